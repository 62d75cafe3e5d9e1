// What a node's cache root holds of one (source, preparation): the sample id
// ranges present, reported to a scheduler that sends work where it is cached.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ssdfeed/loader.h"

namespace ssdfeed {

// Half-open [begin, end) runs of ids present in the entry that `opts` (source,
// source_options, prepare, cache.root) reads. Empty when the root or the entry
// does not exist: asking never creates either, nor counts as a use.
Result<std::vector<std::pair<uint64_t, uint64_t>>> CachedIdRanges(const LoaderOptions& opts);

}  // namespace ssdfeed
