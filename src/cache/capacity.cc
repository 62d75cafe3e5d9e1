#include "cache/capacity.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "cache/entry_files.h"

namespace ssdfeed {

RootPaths::RootPaths(std::string r)
    : root(std::move(r)),
      entries(JoinPath(root, "entries")),
      trash(JoinPath(root, "trash")),
      writers(JoinPath(root, "writers")),
      stats(JoinPath(root, "stats")),
      lock(JoinPath(root, "capacity.lock")),
      ledger(JoinPath(root, "capacity.ledger")) {}

namespace {

constexpr char kRootSlotPrefix[] = "w-";

// Bytes of segment files and of the other (small) files of an entry dir.
void DirBytes(Env* env, const std::string& dir, uint64_t* seg, uint64_t* meta, uint64_t* claims,
              uint64_t* seg_files) {
  *seg = *meta = *claims = *seg_files = 0;
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return;
  for (const auto& n : names) {
    auto fi = env->Lstat(JoinPath(dir, n));
    if (!fi.ok() || fi->is_dir) continue;
    bool is_seg = n.rfind("seg-", 0) == 0;
    (is_seg ? *seg : *meta) += fi->size;
    *seg_files += is_seg;
    if (n == "claims") *claims = fi->size;
  }
}

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// A line per live writer: a few KiB. Its size is checked before it is read,
// so a sparse ledger (a group member's) costs no more than a refusal.
Status ReadLedgerText(Env* env, const std::string& path, std::string* text) {
  constexpr uint64_t kMaxLedgerBytes = 1 << 20;
  SSDFEED_ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(path));
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > kMaxLedgerBytes)
    return Status::Corruption(path + ": " + std::to_string(size) +
                              " bytes, too large for a ledger");
  text->resize(size);
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(file->Read(0, size, text->data(), &got));
  text->resize(got);
  return Status::OK();
}

// Rows of writers whose slot lock nobody holds are dropped: their
// reservation died with them (a pid would not tell, across PID namespaces).
// An unreadable ledger is an error, never "no reservations": rewriting it
// from nothing would drop every live writer's rows.
Result<std::vector<LedgerRow>> ReadLiveLedger(Env* env, const RootPaths& p, uint32_t mode) {
  std::string text;
  Status s = ReadLedgerText(env, p.ledger, &text);
  if (s.IsNotFound()) return std::vector<LedgerRow>();
  SSDFEED_RETURN_IF_ERROR(s);
  std::vector<LedgerRow> rows = ParseLedger(text);
  std::erase_if(rows, [&](const LedgerRow& r) {
    return !SlotAlive(env, p.writers, kRootSlotPrefix, r.slot, mode);
  });
  return rows;
}

Status WriteLedger(Env* env, const std::string& path, const std::vector<LedgerRow>& rows,
                   uint32_t mode) {
  // Not durable: reservations die with their writers, and a power cut ends them all.
  return env->WriteFileAtomic(path, FormatLedger(rows), mode, /*durable=*/false);
}

// Parses an unsigned decimal that fills `s` exactly.
template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool InOurGroups(uint32_t gid) {
  if (gid == ::getegid()) return true;
  gid_t groups[256];
  int n = ::getgroups(256, groups);
  return std::find(groups, groups + std::max(n, 0), gid) != groups + std::max(n, 0);
}

}  // namespace

std::vector<LedgerRow> ParseLedger(std::string_view text) {
  std::vector<LedgerRow> rows;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t sp = line.find(' ');
    LedgerRow r{};
    if (line.size() > 1 && line[0] == 'w' && sp != std::string_view::npos &&
        ParseNumber(line.substr(1, sp - 1), &r.slot) && ParseNumber(line.substr(sp + 1), &r.bytes))
      rows.push_back(r);
  }
  return rows;
}

std::string FormatLedger(const std::vector<LedgerRow>& rows) {
  std::ostringstream out;
  for (const auto& r : rows) out << "w" << r.slot << " " << r.bytes << "\n";
  return out.str();
}

namespace {
std::atomic<uint64_t> lock_timeouts{0};
}  // namespace

uint64_t CapacityLockTimeouts() { return lock_timeouts.load(std::memory_order_relaxed); }

Result<std::unique_ptr<FileLock>> LockWithin(Env* env, const std::string& path, bool exclusive,
                                             uint32_t mode, double wait_seconds) {
  int64_t deadline = env->MonotonicMicros() + static_cast<int64_t>(wait_seconds * 1e6);
  int64_t pause = 100;
  // Polled, not a blocking flock: a holder that never lets go (SIGSTOP, a
  // frozen cgroup) must not stop us for longer than the wait.
  while (true) {
    auto lock = env->LockFile(path, exclusive, false, mode);
    if (lock.ok() || !lock.status().IsBusy()) return lock;
    int64_t left = deadline - env->MonotonicMicros();
    if (left <= 0) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", wait_seconds);
      return Status::Busy(path + ": held by another process for over " + secs +
                          " s (stopped or frozen?)");
    }
    env->SleepForMicroseconds(std::min(pause, left));
    pause = std::min<int64_t>(pause * 2, 2000);  // often: holders let go within a millisecond
  }
}

Result<std::unique_ptr<FileLock>> LockCapacity(const CacheOptions& opts, const RootPaths& p) {
  return LockWithin(opts.env, p.lock, true, FileMode(opts), kCapacityLockWaitSeconds);
}

Result<std::unique_ptr<FileLock>> LockEntryUse(Env* env, const std::string& dir, bool exclusive,
                                               uint32_t mode) {
  return LockWithin(env, JoinPath(dir, "use.lock"), exclusive, mode, kUseLockWaitSeconds);
}

bool IsForeignEntry(const FileInfo& fi, const CacheOptions& opts) {
  if (fi.uid == ::geteuid()) return false;
  // A group-shared cache is filled by every member of the group.
  return !(opts.group_shared && (fi.mode & 020) && InOurGroups(fi.gid));
}

Status ScanEntries(Env* env, const RootPaths& p, const CacheOptions& opts,
                   std::vector<EntryDirInfo>* out) {
  std::vector<std::string> names;
  Status s = env->GetChildren(p.entries, &names);
  if (s.IsNotFound()) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(s);
  for (const auto& n : names) {
    std::string dir = JoinPath(p.entries, n);
    auto fi = env->Lstat(dir);
    if (!fi.ok() || fi->is_symlink || !fi->is_dir) continue;  // never followed
    uint64_t seg, meta, claims, seg_files;
    DirBytes(env, dir, &seg, &meta, &claims, &seg_files);
    EntryDirInfo e;
    e.name = n;
    e.dir = dir;
    e.inode = fi->inode;
    e.bytes = seg + meta;
    e.charged = seg + std::max(meta, MetaAllowance(claims / 4));
    e.last_used_ns = fi->mtime_ns;
    e.foreign = IsForeignEntry(*fi, opts);
    e.segment_files = seg_files;
    e.file_mode = FileMode(opts);
    auto lu = env->Lstat(JoinPath(dir, "last_used"));
    if (lu.ok()) e.last_used_ns = lu->mtime_ns;
    out->push_back(std::move(e));
  }
  return Status::OK();
}

// stats/ and the ledger change size outside any reservation: a job makes
// its metrics file (about 4 KiB) as it starts, and folding an ended job's
// file rewrites its entry's totals beside the old ones. Charged at least
// this much, those changes stay inside what the root already counted while
// stats/ holds up to about six files; past that, what it holds (a fold
// can then pass the capacity by one file's bytes for a moment).
constexpr uint64_t kRootFilesAllowance = 32 << 10;

uint64_t OverheadBytes(Env* env, const RootPaths& p, const std::vector<EntryDirInfo>& seen) {
  uint64_t seg, meta, claims, seg_files, total = 0;
  std::vector<std::string> names;
  if (env->GetChildren(p.trash, &names).ok()) {
    for (const auto& n : names) {
      std::string dir = JoinPath(p.trash, n);
      auto fi = env->Lstat(dir);
      if (!fi.ok()) continue;
      if (std::any_of(seen.begin(), seen.end(),
                      [&](const auto& e) { return e.inode == fi->inode; }))
        continue;
      if (!fi->is_dir) {
        total += fi->size;  // a maker's lock file
        continue;
      }
      DirBytes(env, dir, &seg, &meta, &claims, &seg_files);
      total += seg + meta;
    }
  }
  DirBytes(env, p.stats, &seg, &meta, &claims, &seg_files);
  uint64_t root_files = seg + meta;
  if (auto ledger = env->Lstat(p.ledger); ledger.ok()) root_files += ledger->size;
  return total + std::max(root_files, kRootFilesAllowance);
}

Result<uint64_t> UsedBytesSnapshot(const CacheOptions& opts) {
  RootPaths p(opts.root);
  auto lock = LockCapacity(opts, p);
  // Busy: a stopped holder; better no figure than one that may be wrong. A
  // lock we may not create (another user's root, read-only) or no root yet:
  // read without it.
  if (!lock.ok() && lock.status().IsBusy()) return lock.status();
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(opts.env, p, opts, &entries));
  uint64_t total = OverheadBytes(opts.env, p, entries);
  for (const auto& e : entries) total += e.bytes;
  return total;
}

namespace {

std::string MakerLockPath(const std::string& dir) { return dir + kMakerLockSuffix; }

// The maker lock: removes its file, then unlocks, once the directory has
// left trash/.
class MakerLock : public FileLock {
 public:
  MakerLock(Env* env, std::string path, std::unique_ptr<FileLock> lock)
      : env_(env), path_(std::move(path)), lock_(std::move(lock)) {}
  ~MakerLock() override {
    inside_.reset();
    env_->RemoveFile(path_).IgnoreError();
  }
  uint64_t inode() const override { return lock_->inode(); }
  std::unique_ptr<FileLock> inside_;  // kMakerLock in the directory

 private:
  Env* env_;
  std::string path_;
  std::unique_ptr<FileLock> lock_;
};

// Whether `path` still names the file `lock` holds: EmptyTrash may have
// unlinked it (a killed maker's, it thought) between our open and our lock.
bool StillNamed(Env* env, const std::string& path, const FileLock& lock) {
  auto fi = env->Lstat(path);
  return fi.ok() && (lock.inode() == 0 || fi->inode == lock.inode());
}

}  // namespace

bool StagingInProgress(Env* env, const std::string& dir) {
  // The lock file beside it is made (and locked) before the directory and
  // removed after it has left trash/: missing or unlocked, its maker died.
  // An older version's maker locks only the one inside.
  for (const std::string& lock : {MakerLockPath(dir), JoinPath(dir, kMakerLock)}) {
    if (!env->FileExists(lock)) continue;
    auto probe = env->LockFile(lock, true, false);
    if (!probe.ok() && probe.status().IsBusy()) return true;
  }
  return false;
}

Result<std::unique_ptr<FileLock>> CreateStagingDir(Env* env, const CacheOptions& opts,
                                                   const std::string& dir) {
  std::string path = MakerLockPath(dir);
  std::unique_ptr<FileLock> held;
  // A prober (StagingInProgress) holds it for an instant; EmptyTrash may
  // unlink a file it found unlocked: then lock the new one.
  for (int attempt = 0; attempt < 100 && !held; ++attempt) {
    auto lock = env->LockFile(path, true, false, FileMode(opts));
    if (!lock.ok() && !lock.status().IsBusy()) return lock.status();
    if (lock.ok() && StillNamed(env, path, **lock)) held = std::move(*lock);
    if (!held) env->SleepForMicroseconds(1000);
  }
  if (!held) return Status::Busy(path + ": could not lock it");
  auto maker = std::make_unique<MakerLock>(env, path, std::move(held));
  SSDFEED_RETURN_IF_ERROR(env->CreateDir(dir, DirMode(opts)));
  // For older versions' EmptyTrash, which knows only this one.
  SSDFEED_ASSIGN_OR_RETURN(maker->inside_,
                           env->LockFile(JoinPath(dir, kMakerLock), true, false, FileMode(opts)));
  return std::unique_ptr<FileLock>(std::move(maker));
}

void EmptyTrash(Env* env, const RootPaths& p) {
  std::vector<std::string> names;
  if (!env->GetChildren(p.trash, &names).ok()) return;
  for (const auto& n : names) {
    std::string path = JoinPath(p.trash, n);
    auto fi = env->Lstat(path);
    if (!fi.ok() || fi->is_symlink) continue;
    bool staging = n.rfind(kStagingPrefix, 0) == 0;
    if (fi->is_dir) {
      if (staging && StagingInProgress(env, path)) continue;
      // Best effort, as is all of EmptyTrash: another process may be at it
      // too, and what stays is removed by the next pass.
      env->RemoveDirAndFiles(path).IgnoreError();
    } else if (staging) {
      // A maker lock: removed only while we hold it (its maker is gone; one
      // that opened it meanwhile sees it unlinked and makes another).
      auto lock = env->LockFile(path, true, false);
      if (lock.ok() && StillNamed(env, path, **lock)) env->RemoveFile(path).IgnoreError();
    } else {
      env->RemoveFile(path).IgnoreError();
    }
  }
}

Status TrashEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e) {
  if (e.foreign) return Status::InvalidArgument(e.name + ": owned by another user, not deleted");
  auto lock = env->LockFile(JoinPath(e.dir, "use.lock"), true, false, e.file_mode);
  if (!lock.ok()) {
    if (lock.status().IsBusy()) return Status::Busy(e.name + ": in use by a running process");
    return lock.status();
  }
  // Chosen before, outside this lock: only the directory chosen goes.
  auto now = env->Lstat(e.dir);
  if (e.inode != 0 && (!now.ok() || now->inode != e.inode))
    return Status::Busy(e.name + ": replaced since it was chosen");
  static std::atomic<int> n{0};
  std::string dest =
      JoinPath(p.trash, e.name + "." + std::to_string(::getpid()) + "." + std::to_string(n++) +
                            "." + std::to_string(env->NowMicros()));
  SSDFEED_RETURN_IF_ERROR(env->RenameFile(e.dir, dest));
  // Durable: after a power cut the entry is either in place or in trash/.
  SSDFEED_RETURN_IF_ERROR(env->SyncDir(p.entries));
  return env->SyncDir(p.trash);
}

Status DeleteEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e) {
  SSDFEED_RETURN_IF_ERROR(TrashEntryIfUnused(env, p, e));
  EmptyTrash(env, p);
  return Status::OK();
}

namespace {

// Who may own what the cache reads from the root: us, root, or the root's
// owner (whose cache we chose to use); in a group-shared cache also any
// member of our group, whose entries carry the group. Anyone else could have
// planted it (in a sticky world-writable root, say) to be served to us.
bool TrustedOwner(const FileInfo& fi, uint32_t root_uid, const CacheOptions& opts) {
  if (fi.uid == ::geteuid() || fi.uid == 0 || fi.uid == root_uid) return true;
  return opts.group_shared && InOurGroups(fi.gid);
}

std::string UntrustedOwner(const std::string& path, const FileInfo& fi, uint32_t root_uid) {
  return path + ": owned by uid " + std::to_string(fi.uid) +
         ", who is neither you, root nor the cache root's owner (uid " + std::to_string(root_uid) +
         "): it could hold planted cache entries; refusing it (remove it, or ask its owner to)";
}

// Whether this process may do `want` (the mode's bits: 1 search, 2 write) in
// a directory with this owner and mode, by its permission bits (as the
// kernel checks them without ACLs).
bool ModeAllows(const FileInfo& dir, uint32_t want) {
  if (::geteuid() == 0) return true;
  uint32_t bits = dir.uid == ::geteuid() ? dir.mode >> 6
                  : InOurGroups(dir.gid) ? dir.mode >> 3
                                         : dir.mode;
  return (bits & want) == want;
}

// A root of another user that we may not enter or write in. In a container
// this is most often not the directory the user mounted: a runtime that
// mounts the image's own VOLUME over the -v at the same path (buildah 1.28
// does in about one run in four) shows the image's directory instead, and
// the bare "lstat ROOT/entries: Permission denied" said nothing of that.
// Keeps `cause` when the permission bits allow it (an ACL, say): then the
// denial is something else. An IOError as the kernel's denial was (Python
// raises OSError for it, as before).
Status RootDeniesUs(const std::string& root, const FileInfo& fi, uint32_t want,
                    const Status& cause) {
  if (ModeAllows(fi, want)) return cause;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", fi.mode & 07777);
  return Status::IOError(
      root + ": the cache root is owned by uid " + std::to_string(fi.uid) + " gid " +
      std::to_string(fi.gid) + " with mode " + mode + ", so uid " + std::to_string(::geteuid()) +
      " (gid " + std::to_string(::getegid()) + ") may not " + (want & 2 ? "write in" : "enter") +
      " it (" + cause.message() +
      "). Use a cache root you own (--cache, SSDFEED_CACHE), run as its owner, or share it with "
      "a group (chgrp GROUP, chmod 2770, --group-shared). In a container, check that your host "
      "directory is what is mounted there: a VOLUME the image declares at the same path can "
      "shadow the -v mount (buildah 1.28 sometimes does), showing the image's own directory; "
      "mount the host directory on a path the image does not declare as a VOLUME");
}

}  // namespace

Status CheckRootTrusted(Env* env, const CacheOptions& opts) {
  // First of all: from here on the Env reaches the root only through its
  // directory handle, never following a symlink inside it.
  SSDFEED_RETURN_IF_ERROR(env->ConfineRoot(opts.root));
  RootPaths p(opts.root);
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Lstat(opts.root));
  if (!root.is_dir) return Status::InvalidArgument(opts.root + ": cache root is not a directory");
  auto refuse = [&](const std::string& path, const char* who) {
    return Status::InvalidArgument(
        path + ": writable by " + who +
        ", who could plant cache entries that would be served; refusing it (chmod o-w" +
        (opts.group_shared ? "" : ",g-w") + ", set the sticky bit" +
        (opts.group_shared ? "" : ", or use --group-shared for a group's cache") + ")");
  };
  // A sticky world-writable root (as /tmp) is accepted: others may create
  // their own directories in it, but the ones the cache uses must then be
  // owned by someone it trusts (below), so nothing they make is served.
  bool sticky = root.mode & 01000;
  if ((root.mode & 002) && !sticky) return refuse(opts.root, "all users");
  if ((root.mode & 020) && !sticky && !opts.group_shared) return refuse(opts.root, "its group");
  for (const std::string* d : {&p.entries, &p.trash, &p.writers, &p.stats}) {
    auto fi = env->Lstat(*d);
    if (!fi.ok() && fi.status().IsNotFound()) continue;
    if (!fi.ok()) return RootDeniesUs(opts.root, root, 1, fi.status());
    if (fi->is_symlink || !fi->is_dir)
      return Status::InvalidArgument(*d + ": not a directory (a symlink?); refusing it");
    if (!TrustedOwner(*fi, root.uid, opts))
      return Status::InvalidArgument(UntrustedOwner(*d, *fi, root.uid));
    if (fi->mode & 002) return refuse(*d, "all users");
    if ((fi->mode & 020) && !opts.group_shared) return refuse(*d, "its group");
  }
  // The lock and the ledger sit at the top, where anyone may create files
  // in a sticky root: another user's lock, held, would stall every job. (A
  // FIFO or link of our own is refused where it is opened.)
  for (const std::string* f : {&p.lock, &p.ledger}) {
    auto fi = env->Lstat(*f);
    if (!fi.ok() && fi.status().IsNotFound()) continue;
    if (!fi.ok()) return RootDeniesUs(opts.root, root, 1, fi.status());
    if (!TrustedOwner(*fi, root.uid, opts))
      return Status::InvalidArgument(UntrustedOwner(*f, *fi, root.uid));
  }
  return Status::OK();
}

Status CheckEntryOwner(Env* env, const CacheOptions& opts, const std::string& dir,
                       const FileInfo& entry) {
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Lstat(opts.root));
  if (TrustedOwner(entry, root.uid, opts)) return Status::OK();
  return Status::InvalidArgument(UntrustedOwner(dir, entry, root.uid));
}

Status ExplainRootDenial(Env* env, const CacheOptions& opts, uint32_t want, const Status& cause) {
  auto root = env->Lstat(opts.root);
  return root.ok() ? RootDeniesUs(opts.root, *root, want, cause) : cause;
}

Status PrepareRoot(Env* env, const CacheOptions& opts) {
  RootPaths p(opts.root);
  uint32_t mode = DirMode(opts);
  if (!env->FileExists(opts.root)) {
    SSDFEED_RETURN_IF_ERROR(CreateDirs(env, opts.root, mode));
    SSDFEED_RETURN_IF_ERROR(env->SyncDir(Dirname(opts.root)));
  }
  SSDFEED_RETURN_IF_ERROR(CheckRootTrusted(env, opts));
  bool created = false;
  for (const std::string* d : {&p.entries, &p.trash, &p.writers}) {
    auto fi = env->Lstat(*d);
    if (fi.ok() && (fi->is_symlink || !fi->is_dir))
      return Status::InvalidArgument(*d + ": not a directory (a symlink?); refusing it");
    if (!fi.ok()) {
      Status s = env->CreateDir(*d, mode);
      if (!s.ok()) return ExplainRootDenial(env, opts, 3, s);
      created = true;
    }
  }
  // entries/ must survive a power cut, or every entry in it goes too.
  if (created) SSDFEED_RETURN_IF_ERROR(env->SyncDir(opts.root));
  return CheckRootTrusted(env, opts);
}

Result<uint64_t> DefaultCapacity(const CacheOptions& opts) {
  RootPaths p(opts.root);
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(opts.env, p, opts, &entries));
  uint64_t used = OverheadBytes(opts.env, p);
  for (const auto& e : entries) used += e.charged;
  uint64_t free_bytes = 0, total = 0;
  SSDFEED_RETURN_IF_ERROR(opts.env->FsSpace(opts.root, &free_bytes, &total));
  return used + free_bytes / 5 * 4;
}

Capacity::Capacity(const CacheOptions& opts, std::string own_entry, CacheCounters* counters)
    : opts_(opts), paths_(opts.root), own_entry_(std::move(own_entry)), counters_(counters) {
  capacity_ = opts.capacity_bytes;
  if (capacity_ == 0) {
    auto d = DefaultCapacity(opts);
    capacity_ = d.ok() ? *d : 0;
  }
}

Capacity::~Capacity() { Release(); }

Status Capacity::EnsureSlot() {
  if (slot_) return Status::OK();
  SSDFEED_ASSIGN_OR_RETURN(
      slot_, WriterSlot::Acquire(opts_.env, paths_.writers, kRootSlotPrefix, FileMode(opts_)));
  return Status::OK();
}

Result<uint64_t> Capacity::Reserve(uint64_t need, uint64_t pending) {
  lock_timed_out_ = false;
  SSDFEED_RETURN_IF_ERROR(EnsureSlot());
  std::string why;
  std::vector<uint64_t> skip;  // victims found in use: not chosen again
  // Each pass grants, or evicts at least one entry, or skips one more that
  // is in use (finite), or fails.
  for (int pass = 0; pass < 64; ++pass) {
    EmptyTrash(opts_.env, paths_);  // outside the lock: nobody waits on deletions
    uint64_t grant = 0;
    std::vector<EntryDirInfo> victims;
    auto o = TryReserveLocked(need, pending, &grant, &why, skip, &victims);
    if (!o.ok() && o.status().IsBusy()) {
      lock_timed_out_ = true;
      lock_timeouts.fetch_add(1, std::memory_order_relaxed);
    }
    if (!o.ok()) return o.status();
    if (*o == Outcome::kGranted) return grant;
    if (*o == Outcome::kFull) break;
    // Renamed and made durable without the lock: others reserve meanwhile.
    for (const auto& e : victims) {
      if (TrashEntryIfUnused(opts_.env, paths_, e).ok()) {
        if (counters_ != nullptr) counters_->evictions++;
      } else {
        skip.push_back(e.inode);
      }
    }
  }
  return Status::NoSpace(why);
}

Result<Capacity::Outcome> Capacity::TryReserveLocked(uint64_t need, uint64_t pending,
                                                     uint64_t* grant, std::string* why,
                                                     const std::vector<uint64_t>& skip,
                                                     std::vector<EntryDirInfo>* victims) {
  Env* env = opts_.env;
  SSDFEED_ASSIGN_OR_RETURN(auto lock, LockCapacity(opts_, paths_));
  SSDFEED_ASSIGN_OR_RETURN(std::vector<LedgerRow> rows,
                           ReadLiveLedger(env, paths_, FileMode(opts_)));
  std::erase_if(rows, [&](const LedgerRow& r) { return r.slot == slot_->id(); });
  // entries/ before trash/: an entry evicted (renamed) between the two reads
  // is counted twice at worst, never missed.
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(env, paths_, opts_, &entries));
  uint64_t used = SatAdd(OverheadBytes(env, paths_, entries), pending);
  for (const auto& r : rows) used = SatAdd(used, r.bytes);  // a damaged row must not wrap
  for (const auto& e : entries) used = SatAdd(used, e.charged);
  uint64_t free_bytes = 0, total = 0;
  SSDFEED_RETURN_IF_ERROR(env->FsSpace(opts_.root, &free_bytes, &total));
  uint64_t headroom = total / 100;  // leave 1% of the filesystem to others
  uint64_t room = used < capacity_ ? capacity_ - used : 0;
  uint64_t fs_room = free_bytes > headroom ? free_bytes - headroom : 0;
  *grant = std::min({std::max(need, opts_.reserve_chunk), room, fs_room});
  if (*grant >= need) {
    rows.push_back({slot_->id(), *grant + pending});
    SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, FileMode(opts_)));
    return Outcome::kGranted;
  }
  // What is staged stays charged; the unused rest of our grant is let go.
  if (pending > 0) rows.push_back({slot_->id(), pending});
  SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, FileMode(opts_)));
  // Least recently used first; our own entry, foreign ones and those found
  // in use never.
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_used_ns < b.last_used_ns; });
  uint64_t freed = 0;
  for (const auto& e : entries) {
    if (used - std::min(used, freed) + need <= capacity_ && fs_room + freed >= need) break;
    if (e.dir == own_entry_ || e.foreign) continue;
    if (std::find(skip.begin(), skip.end(), e.inode) != skip.end()) continue;
    victims->push_back(e);
    freed += e.charged;
  }
  if (!victims->empty()) return Outcome::kEvict;
  *why = "cache root " + opts_.root + " is full (capacity " + std::to_string(capacity_) +
         " bytes, " + std::to_string(used) + " used or reserved, " + std::to_string(free_bytes) +
         " free on the filesystem)";
  return Outcome::kFull;
}

void Capacity::Release() {
  if (!slot_) return;
  Env* env = opts_.env;
  // Never waits: a job's exit must not hang on a stopped process, and a row
  // left behind names a slot that is free once we exit, which readers drop
  // (ReadLiveLedger): nothing stays reserved.
  auto lock = env->LockFile(paths_.lock, true, false, FileMode(opts_));
  if (!lock.ok()) return;
  auto read = ReadLiveLedger(env, paths_, FileMode(opts_));
  if (!read.ok()) return;
  std::vector<LedgerRow> rows = std::move(*read);
  size_t before = rows.size();
  std::erase_if(rows, [&](const LedgerRow& r) { return r.slot == slot_->id(); });
  if (rows.size() != before) WriteLedger(env, paths_.ledger, rows, FileMode(opts_)).IgnoreError();
}

}  // namespace ssdfeed
