// The content check of `ssdfeed cache verify --verify-source=content`: every
// record an entry holds is compared with its origin sample, read and
// prepared again. It catches what a stat-based identity cannot (a file
// rewritten with the same size, mtime and ctime, e.g. through some FUSE
// mounts), at the price of reading and decoding the whole origin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

struct OriginCheckReport {
  uint64_t compared = 0;    // records read from the entry and the origin
  uint64_t mismatched = 0;  // pixels, shape, label or fields differ from the origin
  uint64_t unreadable = 0;  // the origin sample cannot be read or decoded
  // "<origin file>: sample <id>: <what differs>", the first kMaxProblems.
  std::vector<std::string> problems;
  static constexpr size_t kMaxProblems = 20;
};

// What differs between a cached record and the origin's freshly prepared
// sample (shape, label, pixels, then each field by name, byte for byte); ""
// when they are the same.
std::string SampleDifference(const CachedSample& cached, const CachedSample& origin);

// Compares every record present in entry with source's sample, prepared
// with spec, on `threads` threads (decoding dominates). InvalidArgument when
// the source's sample count is not the entry's (ids would not line up: the
// source changed).
Status CompareWithOrigin(const Source& source, const PrepareSpec& spec, CacheEntry* entry,
                         int threads, OriginCheckReport* report);

}  // namespace ssdfeed
