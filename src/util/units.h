// Parsing of SIZE ("64G", "1.5T", "4096") and DURATION ("7d", "12h", "90s").
#pragma once

#include <cstdint>
#include <string>

#include "ssdfeed/status.h"

namespace ssdfeed {

Result<uint64_t> ParseSize(const std::string& text);
Result<int64_t> ParseDurationSeconds(const std::string& text);
std::string FormatBytes(uint64_t bytes);

}  // namespace ssdfeed
