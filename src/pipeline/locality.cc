// CachedIdRanges and OpenLoaderSource (ssdfeed/loader.h): what a node's
// cache root holds, and the source opened from the index stored there.
#include <algorithm>

#include "pipeline/entry_key.h"
#include "pipeline/origin_index.h"
#include "ssdfeed/loader.h"

namespace ssdfeed {

Result<std::unique_ptr<Source>> OpenLoaderSource(const LoaderOptions& opts, std::string* warning) {
  std::string ignored;
  return OpenIndexedSource(opts.source, opts.source_options, opts.cache,
                           warning != nullptr ? warning : &ignored);
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> CachedIdRanges(const LoaderOptions& opts) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  if (opts.cache.root.empty()) return ranges;
  std::shared_ptr<const Source> src = opts.source_object;
  if (src == nullptr) {
    // The index stored with the entry, when there is one: no shard is read.
    SSDFEED_ASSIGN_OR_RETURN(auto opened, OpenLoaderSource(opts));
    src = std::move(opened);
  }
  EntryKey key = MakeEntryKey(*src, opts.source_options, opts.prepare);
  CacheOptions co = opts.cache;
  co.record_use = false;
  // Listing first: CacheEntry::Open would create a missing root or entry.
  auto entries = ListEntries(co);
  if (!entries.ok()) return ranges;  // no root yet: nothing cached here
  std::string name = key.fingerprint();
  if (std::none_of(entries->begin(), entries->end(),
                   [&](const EntryInfo& e) { return e.name == name; }))
    return ranges;
  SSDFEED_ASSIGN_OR_RETURN(auto entry, CacheEntry::Open(co, key));
  for (uint64_t id = 0, n = entry->samples_total(); id < n; ++id) {
    if (!entry->Contains(id)) continue;
    if (!ranges.empty() && ranges.back().second == id)
      ranges.back().second = id + 1;
    else
      ranges.emplace_back(id, id + 1);
  }
  return ranges;
}

}  // namespace ssdfeed
