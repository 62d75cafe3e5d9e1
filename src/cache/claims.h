// Per-sample claims shared by every process using an entry: a file of one
// u32 per sample, mapped shared; a slot holds the pid preparing that sample
// (0: nobody). A claim held by a dead pid may be taken over, so a killed
// process never blocks the others.
#pragma once

#include <cstdint>
#include <string>

#include "ssdfeed/status.h"

namespace ssdfeed {

class Claims {
 public:
  ~Claims();
  // Maps (creating and sizing if needed) path for n samples; read_only maps nothing.
  Status Open(const std::string& path, uint64_t n, uint32_t mode);
  bool TryClaim(uint64_t id);
  void Release(uint64_t id);

 private:
  uint32_t* slots_ = nullptr;
  uint64_t n_ = 0;
  size_t map_bytes_ = 0;
};

}  // namespace ssdfeed
