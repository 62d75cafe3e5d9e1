#include "cache/capacity.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <sstream>

namespace ssdfeed {

RootPaths::RootPaths(std::string r)
    : root(std::move(r)),
      entries(JoinPath(root, "entries")),
      trash(JoinPath(root, "trash")),
      lock(JoinPath(root, "capacity.lock")),
      ledger(JoinPath(root, "capacity.ledger")) {}

namespace {

// Bytes of segment files and of the other (small) files of an entry dir.
void DirBytes(Env* env, const std::string& dir, uint64_t* seg, uint64_t* meta, uint64_t* claims) {
  *seg = *meta = *claims = 0;
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return;
  for (const auto& n : names) {
    auto fi = env->Lstat(JoinPath(dir, n));
    if (!fi.ok() || fi->is_dir) continue;
    (n.rfind("seg-", 0) == 0 ? *seg : *meta) += fi->size;
    if (n == "claims") *claims = fi->size;
  }
}

struct LedgerRow {
  long pid;
  std::string writer;
  uint64_t bytes;
};

std::vector<LedgerRow> ReadLedger(Env* env, const std::string& path) {
  std::string text;
  std::vector<LedgerRow> rows;
  if (!env->ReadFileToString(path, &text).ok()) return rows;
  std::istringstream in(text);
  LedgerRow r;
  while (in >> r.pid >> r.writer >> r.bytes) {
    // Rows of dead processes are dropped: their reservation died with them.
    if (::kill(static_cast<pid_t>(r.pid), 0) == 0 || errno == EPERM) rows.push_back(r);
  }
  return rows;
}

Status WriteLedger(Env* env, const std::string& path, const std::vector<LedgerRow>& rows,
                   uint32_t mode) {
  std::ostringstream out;
  for (const auto& r : rows) out << r.pid << " " << r.writer << " " << r.bytes << "\n";
  return env->WriteFileAtomic(path, out.str(), mode);
}

}  // namespace

Status ScanEntries(Env* env, const RootPaths& p, std::vector<EntryDirInfo>* out) {
  std::vector<std::string> names;
  Status s = env->GetChildren(p.entries, &names);
  if (s.IsNotFound()) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(s);
  uid_t me = ::geteuid();
  for (const auto& n : names) {
    std::string dir = JoinPath(p.entries, n);
    auto fi = env->Lstat(dir);
    if (!fi.ok() || fi->is_symlink || !fi->is_dir) continue;  // never followed
    uint64_t seg, meta, claims;
    DirBytes(env, dir, &seg, &meta, &claims);
    EntryDirInfo e{n,
                   dir,
                   seg + meta,
                   seg + std::max(meta, MetaAllowance(claims / 4)),
                   fi->mtime_ns,
                   fi->uid != me};
    auto lu = env->Lstat(JoinPath(dir, "last_used"));
    if (lu.ok()) e.last_used_ns = lu->mtime_ns;
    out->push_back(std::move(e));
  }
  return Status::OK();
}

void EmptyTrash(Env* env, const RootPaths& p) {
  std::vector<std::string> names;
  if (!env->GetChildren(p.trash, &names).ok()) return;
  for (const auto& n : names) {
    std::string dir = JoinPath(p.trash, n);
    auto fi = env->Lstat(dir);
    if (!fi.ok() || !fi->is_dir || fi->is_symlink) continue;
    std::vector<std::string> files;
    if (!env->GetChildren(dir, &files).ok()) continue;
    for (const auto& f : files) {
      auto ffi = env->Lstat(JoinPath(dir, f));
      if (ffi.ok() && !ffi->is_dir) env->RemoveFile(JoinPath(dir, f));  // unlink never follows
    }
    env->RemoveDir(dir);
  }
}

Status DeleteEntryIfUnused(Env* env, const RootPaths& p, const EntryDirInfo& e) {
  if (e.foreign) return Status::InvalidArgument(e.name + ": owned by another user, not deleted");
  auto lock = env->LockFile(JoinPath(e.dir, "use.lock"), true, false);
  if (!lock.ok()) return Status::Busy(e.name + ": in use by a running process");
  static std::atomic<int> n{0};
  SSDFEED_RETURN_IF_ERROR(env->CreateDir(p.trash, 0700));
  std::string dest =
      JoinPath(p.trash, e.name + "." + std::to_string(::getpid()) + "." + std::to_string(n++));
  SSDFEED_RETURN_IF_ERROR(env->RenameFile(e.dir, dest));
  lock->reset();
  EmptyTrash(env, p);
  return Status::OK();
}

Result<uint64_t> DefaultCapacity(const CacheOptions& opts) {
  RootPaths p(opts.root);
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(opts.env, p, &entries));
  uint64_t used = 0;
  for (const auto& e : entries) used += e.charged;
  uint64_t free_bytes = 0, total = 0;
  SSDFEED_RETURN_IF_ERROR(opts.env->FsSpace(opts.root, &free_bytes, &total));
  return used + free_bytes / 5 * 4;
}

Capacity::Capacity(const CacheOptions& opts, std::string own_entry, std::string writer_id,
                   CacheCounters* counters)
    : opts_(opts),
      paths_(opts.root),
      own_entry_(std::move(own_entry)),
      writer_id_(std::move(writer_id)),
      counters_(counters) {
  capacity_ = opts.capacity_bytes;
  if (capacity_ == 0) {
    auto d = DefaultCapacity(opts);
    capacity_ = d.ok() ? *d : 0;
  }
}

Capacity::~Capacity() { Release(); }

Result<uint64_t> Capacity::Reserve(uint64_t need) {
  Env* env = opts_.env;
  uint32_t mode = opts_.group_shared ? 0660 : 0600;
  SSDFEED_ASSIGN_OR_RETURN(auto lock, env->LockFile(paths_.lock, true, true));
  std::vector<LedgerRow> rows = ReadLedger(env, paths_.ledger);
  long me = ::getpid();
  rows.erase(
      std::remove_if(rows.begin(), rows.end(),
                     [&](const LedgerRow& r) { return r.pid == me && r.writer == writer_id_; }),
      rows.end());
  uint64_t reserved = 0;
  for (const auto& r : rows) reserved += r.bytes;
  std::vector<EntryDirInfo> entries;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(env, paths_, &entries));
  uint64_t used = reserved;
  for (const auto& e : entries) used += e.charged;
  // Least recently used first; our own entry and foreign ones never.
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_used_ns < b.last_used_ns; });
  for (const auto& e : entries) {
    if (used + need <= capacity_) break;
    if (e.dir == own_entry_ || e.foreign) continue;
    if (DeleteEntryIfUnused(env, paths_, e).ok()) {
      used -= std::min(used, e.charged);
      if (counters_ != nullptr) counters_->evictions++;
    }
  }
  uint64_t free_bytes = 0, total = 0;
  SSDFEED_RETURN_IF_ERROR(env->FsSpace(opts_.root, &free_bytes, &total));
  uint64_t headroom = total / 100;  // leave 1% of the filesystem to others
  uint64_t room = used < capacity_ ? capacity_ - used : 0;
  uint64_t fs_room = free_bytes > headroom ? free_bytes - headroom : 0;
  uint64_t grant = std::min({std::max(need, opts_.reserve_chunk), room, fs_room});
  if (grant < need) {
    SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, mode));
    return Status::NoSpace("cache root " + opts_.root + " is full (capacity " +
                           std::to_string(capacity_) + " bytes, " + std::to_string(used) +
                           " used or reserved, " + std::to_string(free_bytes) +
                           " free on the filesystem)");
  }
  rows.push_back({me, writer_id_, grant});
  SSDFEED_RETURN_IF_ERROR(WriteLedger(env, paths_.ledger, rows, mode));
  return grant;
}

void Capacity::Release() {
  Env* env = opts_.env;
  auto lock = env->LockFile(paths_.lock, true, true);
  if (!lock.ok()) return;
  std::vector<LedgerRow> rows = ReadLedger(env, paths_.ledger);
  long me = ::getpid();
  size_t before = rows.size();
  rows.erase(
      std::remove_if(rows.begin(), rows.end(),
                     [&](const LedgerRow& r) { return r.pid == me && r.writer == writer_id_; }),
      rows.end());
  if (rows.size() != before)
    WriteLedger(env, paths_.ledger, rows, opts_.group_shared ? 0660 : 0600);
}

}  // namespace ssdfeed
