#include "cache/capacity.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
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

// A ledger row: writer slot (root writers/ dir) and the bytes it reserved.
struct LedgerRow {
  uint32_t slot;
  uint64_t bytes;
};

// Rows of writers whose slot lock nobody holds are dropped: their
// reservation died with them (a pid would not tell, across PID namespaces).
// An unreadable ledger is an error, never "no reservations": rewriting it
// from nothing would drop every live writer's rows.
Result<std::vector<LedgerRow>> ReadLiveLedger(Env* env, const RootPaths& p, uint32_t mode) {
  std::string text;
  std::vector<LedgerRow> rows;
  Status s = env->ReadFileToString(p.ledger, &text);
  if (s.IsNotFound()) return rows;
  SSDFEED_RETURN_IF_ERROR(s);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    unsigned slot = 0;
    unsigned long long bytes = 0;
    if (std::sscanf(line.c_str(), "w%u %llu", &slot, &bytes) != 2) continue;
    if (SlotAlive(env, p.writers, kRootSlotPrefix, slot, mode)) rows.push_back({slot, bytes});
  }
  return rows;
}

Status WriteLedger(Env* env, const std::string& path, const std::vector<LedgerRow>& rows,
                   uint32_t mode) {
  std::ostringstream out;
  for (const auto& r : rows) out << "w" << r.slot << " " << r.bytes << "\n";
  // Not durable: reservations die with their writers, and a power cut ends them all.
  return env->WriteFileAtomic(path, out.str(), mode, /*durable=*/false);
}

bool InOurGroups(uint32_t gid) {
  if (gid == ::getegid()) return true;
  gid_t groups[256];
  int n = ::getgroups(256, groups);
  return std::find(groups, groups + std::max(n, 0), gid) != groups + std::max(n, 0);
}

}  // namespace

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

uint64_t TrashBytes(Env* env, const RootPaths& p) {
  std::vector<std::string> names;
  if (!env->GetChildren(p.trash, &names).ok()) return 0;
  uint64_t total = 0;
  for (const auto& n : names) {
    uint64_t seg, meta, claims, seg_files;
    DirBytes(env, JoinPath(p.trash, n), &seg, &meta, &claims, &seg_files);
    total += seg + meta;
  }
  return total;
}

uint64_t OverheadBytes(Env* env, const RootPaths& p) {
  uint64_t seg, meta, claims, seg_files;
  DirBytes(env, p.stats, &seg, &meta, &claims, &seg_files);
  return TrashBytes(env, p) + seg + meta;
}

bool StagingInProgress(Env* env, const std::string& dir) {
  std::string lock = JoinPath(dir, kMakerLock);
  if (!env->FileExists(lock)) return false;  // its maker died before locking
  auto probe = env->LockFile(lock, true, false);
  return !probe.ok() && probe.status().IsBusy();
}

Result<std::unique_ptr<FileLock>> CreateStagingDir(Env* env, const CacheOptions& opts,
                                                   const std::string& dir) {
  SSDFEED_RETURN_IF_ERROR(env->CreateDir(dir, DirMode(opts)));
  return env->LockFile(JoinPath(dir, kMakerLock), true, false, FileMode(opts));
}

void EmptyTrash(Env* env, const RootPaths& p) {
  std::vector<std::string> names;
  if (!env->GetChildren(p.trash, &names).ok()) return;
  for (const auto& n : names) {
    std::string dir = JoinPath(p.trash, n);
    auto fi = env->Lstat(dir);
    if (!fi.ok() || fi->is_symlink) continue;
    if (n.rfind(kStagingPrefix, 0) == 0 && StagingInProgress(env, dir)) continue;
    if (fi->is_dir) {
      // Best effort, as is all of EmptyTrash: another process may be at it
      // too, and what stays is removed by the next pass.
      env->RemoveDirAndFiles(dir).IgnoreError();
    } else {
      env->RemoveFile(dir).IgnoreError();
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
  {
    // Under the capacity lock, as evictions are: a reservation then never
    // sees the entry in neither (or both) of entries/ and trash/.
    auto lock = env->LockFile(p.lock, true, true, e.file_mode);
    if (!lock.ok()) return lock.status();
    SSDFEED_RETURN_IF_ERROR(TrashEntryIfUnused(env, p, e));
  }
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

}  // namespace

Result<uint32_t> CheckRootTrustedOwner(Env* env, const CacheOptions& opts) {
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
    SSDFEED_RETURN_IF_ERROR(fi.status());
    if (fi->is_symlink || !fi->is_dir)
      return Status::InvalidArgument(*d + ": not a directory (a symlink?); refusing it");
    if (!TrustedOwner(*fi, root.uid, opts))
      return Status::InvalidArgument(UntrustedOwner(*d, *fi, root.uid));
    if (fi->mode & 002) return refuse(*d, "all users");
    if ((fi->mode & 020) && !opts.group_shared) return refuse(*d, "its group");
  }
  return root.uid;
}

Status CheckRootTrusted(Env* env, const CacheOptions& opts) {
  return CheckRootTrustedOwner(env, opts).status();
}

Status CheckEntryOwner(Env* env, const CacheOptions& opts, const std::string& dir,
                       const FileInfo& entry) {
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Lstat(opts.root));
  if (TrustedOwner(entry, root.uid, opts)) return Status::OK();
  return Status::InvalidArgument(UntrustedOwner(dir, entry, root.uid));
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
      SSDFEED_RETURN_IF_ERROR(env->CreateDir(*d, mode));
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

Result<uint64_t> Capacity::Reserve(uint64_t need) {
  SSDFEED_RETURN_IF_ERROR(EnsureSlot());
  std::string why;
  // Each pass either grants, or evicts at least one entry (finite), or fails.
  for (int pass = 0; pass < 64; ++pass) {
    EmptyTrash(opts_.env, paths_);  // outside the lock: nobody waits on deletions
    uint64_t grant = 0;
    SSDFEED_ASSIGN_OR_RETURN(Outcome o, TryReserveLocked(need, &grant, &why));
    if (o == Outcome::kGranted) return grant;
    if (o == Outcome::kFull) break;
  }
  return Status::NoSpace(why);
}

Result<Capacity::Outcome> Capacity::TryReserveLocked(uint64_t need, uint64_t* grant,
                                                     std::string* why) {
  Env* env = opts_.env;
  SSDFEED_ASSIGN_OR_RETURN(auto lock, env->LockFile(paths_.lock, true, true, FileMode(opts_)));
  SSDFEED_ASSIGN_OR_RETURN(std::vector<LedgerRow> rows,
                           ReadLiveLedger(env, paths_, FileMode(opts_)));
  std::erase_if(rows, [&](const LedgerRow& r) { return r.slot == slot_->id(); });
  uint64_t used = OverheadBytes(env, paths_);  // trash not yet gone, metrics files
  for (const auto& r : rows) used += r.bytes;
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(env, paths_, opts_, &entries));
  for (const auto& e : entries) used += e.charged;
  uint64_t free_bytes = 0, total = 0;
  SSDFEED_RETURN_IF_ERROR(env->FsSpace(opts_.root, &free_bytes, &total));
  uint64_t headroom = total / 100;  // leave 1% of the filesystem to others
  uint64_t room = used < capacity_ ? capacity_ - used : 0;
  uint64_t fs_room = free_bytes > headroom ? free_bytes - headroom : 0;
  *grant = std::min({std::max(need, opts_.reserve_chunk), room, fs_room});
  if (*grant >= need) {
    rows.push_back({slot_->id(), *grant});
    SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, FileMode(opts_)));
    return Outcome::kGranted;
  }
  // Least recently used first; our own entry and foreign ones never. The
  // victims go to trash/ now and are deleted after the lock is released.
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_used_ns < b.last_used_ns; });
  bool evicted = false;
  uint64_t freed = 0;
  for (const auto& e : entries) {
    if (used - std::min(used, freed) + need <= capacity_ && fs_room + freed >= need) break;
    if (e.dir == own_entry_ || e.foreign) continue;
    if (TrashEntryIfUnused(env, paths_, e).ok()) {
      freed += e.charged;
      evicted = true;
      if (counters_ != nullptr) counters_->evictions++;
    }
  }
  SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, FileMode(opts_)));
  if (evicted) return Outcome::kEvicted;
  *why = "cache root " + opts_.root + " is full (capacity " + std::to_string(capacity_) +
         " bytes, " + std::to_string(used) + " used or reserved, " + std::to_string(free_bytes) +
         " free on the filesystem)";
  return Outcome::kFull;
}

void Capacity::Release() {
  if (!slot_) return;
  Env* env = opts_.env;
  auto lock = env->LockFile(paths_.lock, true, true, FileMode(opts_));
  if (!lock.ok()) return;
  auto read = ReadLiveLedger(env, paths_, FileMode(opts_));
  if (!read.ok()) return;  // our row dies with our slot anyway
  std::vector<LedgerRow> rows = std::move(*read);
  size_t before = rows.size();
  std::erase_if(rows, [&](const LedgerRow& r) { return r.slot == slot_->id(); });
  // A row left behind names a slot that is free once we exit, and readers
  // drop rows of free slots (ReadLiveLedger): nothing stays reserved.
  if (rows.size() != before) WriteLedger(env, paths_.ledger, rows, FileMode(opts_)).IgnoreError();
}

}  // namespace ssdfeed
