// The capacity of a cache root, shared by every process that fills any entry
// under it. Usage = bytes charged to every entry under entries/ + capacity
// reserved but not yet written by live writers (the ledger). An entry is
// charged its segment files plus max(its small files, MetaAllowance): the
// manifest, claims, last_used and status files may change within that
// allowance (which is reserved when the entry is created) without ever
// pushing the root over. A writer reserves before
// it appends, so the root never exceeds the capacity. When a reservation does
// not fit, unused entries are evicted least-recently-used first.
#pragma once

#include <string>
#include <vector>

#include "ssdfeed/cache.h"

namespace ssdfeed {

struct RootPaths {
  explicit RootPaths(std::string root);
  std::string root, entries, trash, lock, ledger;
};

class Capacity {
 public:
  Capacity(const CacheOptions& opts, std::string own_entry, std::string writer_id,
           CacheCounters* counters);
  ~Capacity();
  // Reserves at least `need` bytes (a whole chunk when it fits). Returns the
  // bytes granted, or NoSpace when even `need` does not fit after eviction.
  Result<uint64_t> Reserve(uint64_t need);
  void Release();
  void SetCounters(CacheCounters* c) { counters_ = c; }

 private:
  CacheOptions opts_;
  RootPaths paths_;
  std::string own_entry_, writer_id_;
  CacheCounters* counters_;
  uint64_t capacity_ = 0;
};

// The default capacity: what the root holds now plus 80% of the free space.
Result<uint64_t> DefaultCapacity(const CacheOptions& opts);

// Bytes an entry's small files may take, for an entry of n samples.
inline uint64_t MetaAllowance(uint64_t samples) { return samples * 4 + 16384; }

struct EntryDirInfo {
  std::string name, dir;
  uint64_t bytes = 0;    // on disk
  uint64_t charged = 0;  // counted against the capacity (>= bytes)
  int64_t last_used_ns = 0;
  bool foreign = false;
};
// Entries under the root (symlinks skipped), with their bytes.
Status ScanEntries(Env* env, const RootPaths& p, std::vector<EntryDirInfo>* out);
// Removes an entry if nobody uses it (Busy otherwise). Renames it into the
// trash first, so a half-deleted entry is never visible; unlinks only the
// regular files and links directly inside it.
Status DeleteEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e);
// Finishes deletions a crash interrupted.
void EmptyTrash(Env* env, const RootPaths& p);

}  // namespace ssdfeed
