// A RandomAccessFile over bytes in memory (for fuzz targets and tests).
#pragma once

#include <memory>
#include <string>

#include "ssdfeed/env.h"

namespace ssdfeed {

std::unique_ptr<RandomAccessFile> NewStringFile(std::string data, std::string name);

}  // namespace ssdfeed
