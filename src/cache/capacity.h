// The capacity of a cache root, shared by every process that fills any entry
// under it. Usage = bytes charged to every entry under entries/ + bytes still
// in trash/ + capacity reserved but not yet written by live writers (the
// ledger) + the jobs' metrics files under stats/. An entry is charged its segment files plus
// max(its small files, MetaAllowance): the manifest, claims, locks and status files may change
// within that allowance (reserved when the entry is created) without ever
// pushing the root over. A writer reserves before it appends, so the root
// never exceeds the capacity. When a reservation does not fit, unused entries
// are evicted least-recently-used first: renamed into trash/ under the lock,
// deleted after it is released, so no other writer waits on the deletion.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/writer_slot.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {

// New entries (and imports) are made under trash/ as "new.<...>", then
// renamed into entries/. Their maker holds flock on kMakerLock inside for as
// long as it works; EmptyTrash leaves such a directory alone and deletes the
// ones a killed maker left.
constexpr char kStagingPrefix[] = "new.";
constexpr char kMakerLock[] = ".maker.lock";

struct RootPaths {
  explicit RootPaths(std::string root);
  std::string root, entries, trash, writers, stats, lock, ledger;
};

class Capacity {
 public:
  Capacity(const CacheOptions& opts, std::string own_entry, CacheCounters* counters);
  ~Capacity();
  // Reserves at least `need` bytes (a whole chunk when it fits). Returns the
  // bytes granted, or NoSpace when even `need` does not fit after eviction.
  Result<uint64_t> Reserve(uint64_t need);
  void Release();
  void SetCounters(CacheCounters* c) { counters_ = c; }
  // Our root writer slot (valid after a successful Reserve).
  uint32_t slot() const { return slot_ ? slot_->id() : 0; }

 private:
  enum class Outcome { kGranted, kEvicted, kFull };
  // One pass under capacity.lock; renames victims into trash/ (kEvicted).
  Result<Outcome> TryReserveLocked(uint64_t need, uint64_t* grant, std::string* why);
  Status EnsureSlot();

  CacheOptions opts_;
  RootPaths paths_;
  std::string own_entry_;
  CacheCounters* counters_;
  uint64_t capacity_ = 0;
  std::unique_ptr<WriterSlot> slot_;  // our liveness for the ledger
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
  uint64_t segment_files = 0;
  uint32_t file_mode = 0600;  // for the capacity lock, if DeleteEntryIfUnused creates it
};
// Whether an entry directory belongs to someone we must not write or delete
// for: another user, unless the cache is group-shared and the entry is
// group-writable by one of our groups.
bool IsForeignEntry(const FileInfo& fi, const CacheOptions& opts);
// CheckRootTrusted (which confines the root in the Env first), returning the
// root's owner.
Result<uint32_t> CheckRootTrustedOwner(Env* env, const CacheOptions& opts);
// An entry directory is served only when its owner is trusted: us, root, the
// root's owner, or (group-shared) a member of our group. InvalidArgument
// naming it and its owner otherwise.
Status CheckEntryOwner(Env* env, const CacheOptions& opts, const std::string& dir,
                       const FileInfo& entry);
// Entries under the root (symlinks skipped), with their bytes.
Status ScanEntries(Env* env, const RootPaths& p, const CacheOptions& opts,
                   std::vector<EntryDirInfo>* out);
// Bytes of the files still in trash/ (deletions not yet finished).
uint64_t TrashBytes(Env* env, const RootPaths& p);
// Bytes the root holds outside entries/: trash/ plus the jobs' stats files.
uint64_t OverheadBytes(Env* env, const RootPaths& p);
// Moves an entry nobody uses into trash/ (Busy if in use): atomic, so a
// half-deleted entry is never visible. EmptyTrash() then deletes it.
Status TrashEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e);
// TrashEntryIfUnused + EmptyTrash.
Status DeleteEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e);
// Deletes what is in trash/ (also what a killed process left there), through
// directory descriptors: never follows a link.
void EmptyTrash(Env* env, const RootPaths& p);
// Makes a staging directory under trash/ and holds its maker lock.
Result<std::unique_ptr<FileLock>> CreateStagingDir(Env* env, const CacheOptions& opts,
                                                   const std::string& dir);
// True while a live process holds the maker lock of staging dir `dir`.
bool StagingInProgress(Env* env, const std::string& dir);
// Creates root/, entries/ and trash/ with the cache's modes, then checks them.
Status PrepareRoot(Env* env, const CacheOptions& opts);

}  // namespace ssdfeed
