// The origin index of a sharded source (Source::SaveIndex: where each sample
// lies in its shards), kept with the cache entries that hold its samples, so
// that a job over an unchanged origin opens from the listing alone
// (docs/cache-format.md, "Origin index").
#pragma once

#include <string>

#include "ssdfeed/cache.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

// An index file is the samples' places, some tens of bytes each.
constexpr uint64_t kMaxOriginIndexBytes = uint64_t{4} << 30;

// The file name of source's index in an entry: "origin-<index_key>.index".
std::string OriginIndexName(const Source& source);

// Before the entry key is made (it needs the sample count): gives source
// the index stored in any entry of cache.root for its index_key, else has
// it read the origin (BuildIndex; its errors are returned). A stored index
// that is damaged or does not fit is skipped with a warning naming it.
// spool: the source may keep what it fetches in cache.root/trash/ for its
// samples' reads (Source::SpoolIndexReads), the root made if need be; false
// creates nothing (a look at what a root holds).
Status LoadOrBuildIndex(const Source& source, const CacheOptions& cache, std::string* warning,
                        bool spool = true);

// Opens uri from the listing, its index taken from cache.root when stored
// there (else built from the origin), so opening reads no origin byte for
// an entry a job has filled. Creates nothing (no spool: for looks at a
// root and estimates, not for reading every sample). Warnings about stored
// indexes go to *warning.
Result<std::unique_ptr<Source>> OpenIndexedSource(const std::string& uri,
                                                  const SourceOptions& options,
                                                  const CacheOptions& cache, std::string* warning);

// After the entry is open: writes source's index into it unless it holds
// one already or is read only (atomic write: a reader sees all or
// nothing). A failure is a warning; the next job builds the index again.
void StoreIndex(const Source& source, const CacheEntry& entry, const CacheOptions& cache,
                std::string* warning);

}  // namespace ssdfeed
