// The capacity of a cache root, shared by every process that fills any entry
// under it. Usage = bytes charged to every entry under entries/ + bytes still
// in trash/ + capacity reserved but not yet written by live writers (the
// ledger) + the jobs' metrics files under stats/ with the ledger file, at
// least 32 KiB (they change outside any reservation). An entry is charged its segment files plus
// max(its small files, MetaAllowance): the manifest, claims, locks and status files may change
// within that allowance (reserved when the entry is created) without ever
// pushing the root over. A writer reserves before it appends, so the root
// never exceeds the capacity. When a reservation does not fit, unused entries
// are evicted least-recently-used first: chosen under the lock, renamed into
// trash/ (and the renames made durable) after it is released, deleted later,
// so no other writer waits on any of it. The lock is taken with a bounded
// wait (kCapacityLockWaitSeconds): a process stopped while holding it costs
// the others a miss, never a hang.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/writer_slot.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {

// New entries (and imports) are made under trash/ as "new.<...>", then
// renamed into entries/. Their maker first creates and locks the sibling
// file "new.<...>" + kMakerLockSuffix, and only then the directory, and holds
// the lock until the directory has left trash/: a staging directory whose
// lock file is missing or unlocked is a killed maker's, and EmptyTrash
// deletes it (and the lock file). The maker also locks kMakerLock inside the
// directory, as older versions (which look only there) did.
constexpr char kStagingPrefix[] = "new.";
constexpr char kMakerLockSuffix[] = ".maker";
constexpr char kMakerLock[] = ".maker.lock";

struct RootPaths {
  explicit RootPaths(std::string root);
  std::string root, entries, trash, writers, stats, lock, ledger;
};

// A row of capacity.ledger ("w<slot> <bytes>"): a live writer's reservation.
struct LedgerRow {
  uint32_t slot;
  uint64_t bytes;
  bool operator==(const LedgerRow&) const = default;
};
// The rows of a ledger's text; a line that is not a row is skipped.
std::vector<LedgerRow> ParseLedger(std::string_view text);
std::string FormatLedger(const std::vector<LedgerRow>& rows);

// How long anyone waits for capacity.lock (held briefly by each
// reservation). Held longer, its holder is stopped or frozen (SIGSTOP,
// `docker pause`, a frozen cgroup).
constexpr double kCapacityLockWaitSeconds = 2.0;
// capacity.lock, waited for at most kCapacityLockWaitSeconds; Busy (naming
// the lock) when another process holds it longer.
Result<std::unique_ptr<FileLock>> LockCapacity(const CacheOptions& opts, const RootPaths& p);
// How long an open, an export or a compaction's swap waits for an entry's
// use.lock. Its exclusive holders (an evictor's rename, a compaction's swap,
// an in-use probe) let go within milliseconds; one that holds it longer is
// stopped or frozen, and the entry is then served from the origin (Busy).
constexpr double kUseLockWaitSeconds = 2.0;
// `path` locked (shared or exclusive), polled for at most `wait_seconds`,
// never a blocking flock: a holder that never lets go (SIGSTOP, a frozen
// cgroup) costs a bounded wait. Busy naming the file when it stays held.
Result<std::unique_ptr<FileLock>> LockWithin(Env* env, const std::string& path, bool exclusive,
                                             uint32_t mode, double wait_seconds);
// An entry directory's use.lock: shared by every process using the entry,
// exclusive for removing or swapping its files. Waited for at most
// kUseLockWaitSeconds.
Result<std::unique_ptr<FileLock>> LockEntryUse(Env* env, const std::string& dir, bool exclusive,
                                               uint32_t mode);
// Reservations of this process that gave up waiting for capacity.lock
// (ssdfeed_cache_lock_timeouts_total).
uint64_t CapacityLockTimeouts();

struct EntryDirInfo;

class Capacity {
 public:
  Capacity(const CacheOptions& opts, std::string own_entry, CacheCounters* counters);
  ~Capacity();
  // Reserves at least `need` bytes (a whole chunk when it fits), on top of
  // `pending`: bytes of our last grant that are used but not yet on disk
  // (staged for a direct write), which stay charged. Returns the bytes
  // granted beyond `pending`; NoSpace when even `need` does not fit after
  // eviction; Busy (and lock_timed_out()) when capacity.lock stayed held.
  Result<uint64_t> Reserve(uint64_t need, uint64_t pending = 0);
  // Whether the last Reserve failed for capacity.lock held too long.
  bool lock_timed_out() const { return lock_timed_out_; }
  // Drops our ledger row if the lock is free now; never waits (our row dies
  // with our writer slot anyway).
  void Release();
  void SetCounters(CacheCounters* c) { counters_ = c; }
  // Our root writer slot (valid after a successful Reserve).
  uint32_t slot() const { return slot_ ? slot_->id() : 0; }

 private:
  enum class Outcome { kGranted, kEvict, kFull };
  // One pass under capacity.lock: a grant, or the victims to evict (kEvict),
  // least recently used first, none of them in `skip`.
  Result<Outcome> TryReserveLocked(uint64_t need, uint64_t pending, uint64_t* grant,
                                   std::string* why, const std::vector<uint64_t>& skip,
                                   std::vector<EntryDirInfo>* victims);
  Status EnsureSlot();

  CacheOptions opts_;
  RootPaths paths_;
  std::string own_entry_;
  CacheCounters* counters_;
  uint64_t capacity_ = 0;
  std::unique_ptr<WriterSlot> slot_;  // our liveness for the ledger
  bool lock_timed_out_ = false;
};

// EffectiveCapacity's default (capacity_bytes 0), for opts whose env is set
// and root confined: what the root holds now plus 80% of the free space.
Result<uint64_t> DefaultCapacity(const CacheOptions& opts);

// Bytes an entry's small files may take, for an entry of n samples.
inline uint64_t MetaAllowance(uint64_t samples) { return samples * 4 + 16384; }

struct EntryDirInfo {
  std::string name, dir;
  uint64_t inode = 0;    // the same directory after a rename (into trash/, say)
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
// An entry directory is served only when its owner is trusted: us, root, the
// root's owner, or (group-shared) a member of our group. InvalidArgument
// naming it and its owner otherwise.
Status CheckEntryOwner(Env* env, const CacheOptions& opts, const std::string& dir,
                       const FileInfo& entry);
// Entries under the root (symlinks skipped), with their bytes.
Status ScanEntries(Env* env, const RootPaths& p, const CacheOptions& opts,
                   std::vector<EntryDirInfo>* out);
// Bytes the root holds outside entries/: trash/ plus the jobs' stats files.
// A directory of trash/ whose inode is in `seen` (read from entries/ just
// before, and moved since) is not counted again.
uint64_t OverheadBytes(Env* env, const RootPaths& p, const std::vector<EntryDirInfo>& seen = {});
// The bytes the root holds (RootBytes), under capacity.lock (LockCapacity): no
// reservation is granted meanwhile, so every writer grows only into room
// charged before, and the sum is one the disk could hold at one moment.
Result<uint64_t> UsedBytesSnapshot(const CacheOptions& opts);
// Moves an entry nobody uses into trash/ (Busy if in use): atomic, so a
// half-deleted entry is never visible. EmptyTrash() then deletes it. Needs
// no lock: a reservation reads entries/ before trash/, so a moving entry is
// counted twice at worst, never missed.
Status TrashEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e);
// TrashEntryIfUnused + EmptyTrash.
Status DeleteEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e);
// Deletes what is in trash/ (also what a killed process left there), through
// directory descriptors: never follows a link.
void EmptyTrash(Env* env, const RootPaths& p);
// Locks the maker lock of staging directory `dir` (under trash/), then makes
// the directory. The lock, held until it is destroyed, keeps EmptyTrash off
// the directory; destroy it once the directory has left trash/ (renamed into
// place, or removed), which also removes the lock file.
Result<std::unique_ptr<FileLock>> CreateStagingDir(Env* env, const CacheOptions& opts,
                                                   const std::string& dir);
// True while a live process holds the maker lock of staging dir `dir`.
bool StagingInProgress(Env* env, const std::string& dir);
// `cause`, or, when the root's permission bits deny this process `want` (1
// search, 2 write, 3 both), an IOError that says whose the root is,
// its mode, and what to do (in a container: check what is mounted there).
Status ExplainRootDenial(Env* env, const CacheOptions& opts, uint32_t want, const Status& cause);
// Creates root/, entries/ and trash/ with the cache's modes, then checks them.
Status PrepareRoot(Env* env, const CacheOptions& opts);

}  // namespace ssdfeed
