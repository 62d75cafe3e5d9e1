// What `ssdfeed cache ls` says an entry holds, from what the entry records:
// a source's prepared samples, a Python dataset's items (ssdfeed.cache), or
// a tf.data pipeline's elements (ssdfeed.tf.cache), with the counts that
// mean something for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"

namespace ssdfeed::cli {

struct EntryContents {
  // "full-size rgb", "resize_short=256 ...", "python items", "tf.data elements",
  // "tf.data element count".
  std::string what;
  std::string state;  // as EntryInfo::state; a tf.data part's from its element count
  uint64_t present = 0;
  // Items the entry is complete with; nullopt where nobody knows yet (a
  // tf.data pipeline's elements before a pass has reached its end).
  std::optional<uint64_t> total;
};

// One per entry of list, in its order. A tf.data cache keeps element i as
// item i % P of part entry i / P (every part made P items long, before the
// count is known) and the count in its meta entry once a pass has ended:
// part p is complete with min(P, count - p * P) elements.
std::vector<EntryContents> DescribeEntries(const CacheOptions& opts,
                                           const std::vector<EntryInfo>& list);

}  // namespace ssdfeed::cli
