// Reading a root's stats files: folding ended processes into per-entry totals
// and summing everything per entry, for the exporter.

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "metrics/stats_file.h"

namespace ssdfeed::metrics {

namespace {

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool EndsWith(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// The entry label: the first 12 hex digits of a fingerprint, nothing else
// (a file name or header that any user of the root can write must not put
// arbitrary text into a label).
bool IsEntryId(const std::string& s) {
  if (s.size() != 12) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// One process's stats file. Read with pread, never mapped: in a group-shared
// root the file may be another user's, and a mapped file that its owner
// truncates raises SIGBUS in the reader. Exactly one block is read, so a
// file of any size costs the same. The owner stores its counters with
// aligned 8-byte stores, which Linux's copy to user space keeps whole.
class StatsFileView {
 public:
  Status Open(Env* env, const std::string& path) {
    path_ = path;
    // A read-only mapping of 0 bytes maps nothing: it is only the
    // descriptor that flock needs (Live). Opened first, so a file deleted
    // meanwhile fails the read below instead of being read unlocked.
    MappedFileOptions o;
    o.writable = false;
    SSDFEED_ASSIGN_OR_RETURN(lock_, env->NewMappedFile(path, 0, o));
    SSDFEED_ASSIGN_OR_RETURN(file_, env->NewRandomAccessFile(path));
    return Load();
  }
  // Reads the block again (a dead owner's last counts, once Live said so).
  Status Load() {
    size_t got = 0;
    auto* b = reinterpret_cast<uint8_t*>(block_.data());
    SSDFEED_RETURN_IF_ERROR(file_->Read(0, kBlockBytes, reinterpret_cast<char*>(b), &got));
    Status s = ValidateBlock(b, got, got < kBlockBytes ? nullptr : &header_);
    if (s.ok() && got < kBlockBytes) return Status::Corruption(path_ + ": truncated");
    return s.ok() ? s : Status::Corruption(path_ + ": " + s.message());
  }
  // True while the owner holds its shared lock. A dead file stays locked
  // exclusively by us until this view is destroyed.
  bool Live() { return lock_->Lock(/*exclusive=*/true, /*blocking=*/false).IsBusy(); }
  const BlockHeader& header() const { return header_; }
  StatsSnapshot Read() const { return ReadBlock(reinterpret_cast<const uint8_t*>(block_.data())); }

 private:
  std::string path_;
  std::unique_ptr<MappedFile> lock_;
  std::unique_ptr<RandomAccessFile> file_;
  std::array<uint64_t, kBlockBytes / 8> block_{};  // ReadBlock loads 8-byte words
  BlockHeader header_;
};

struct Ended {
  StatsSnapshot totals;
  std::set<std::string> last_folded;  // hex ids
};

std::string EndedPath(const std::string& root, const std::string& entry) {
  return StatsDir(root) + "/ended-" + entry + ".stats";
}

// Reads the block and the folded ids: exactly the bytes they take, the
// count checked first (CheckEnded), so a sparse or garbage file (any user of
// a group-shared root can write one) costs one block's read and a warning,
// never a huge allocation.
Status ReadEnded(Env* env, const std::string& path, Ended* out) {
  auto file = env->NewRandomAccessFile(path);
  if (!file.ok()) return file.status().IsNotFound() ? Status::OK() : file.status();
  const RandomAccessFile& f = **file;
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  std::array<uint64_t, kBlockBytes / 8 + 1> aligned{};  // ReadBlock loads 8-byte words
  auto* b = reinterpret_cast<uint8_t*>(aligned.data());
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(f.Read(0, kBlockBytes + 4, reinterpret_cast<char*>(b), &got));
  uint32_t n = 0;
  if (Status s = CheckEnded(b, got, size, &n); !s.ok())
    return Status::Corruption(path + ": " + s.message());
  std::string ids(size_t{n} * 16, '\0');
  SSDFEED_RETURN_IF_ERROR(f.Read(kBlockBytes + 4, ids.size(), ids.data(), &got));
  if (got != ids.size()) return Status::Corruption(path + ": truncated list of folded ids");
  out->totals = ReadBlock(b);
  out->totals.admission = Admission::kAdmitting;
  for (uint32_t i = 0; i < n; ++i) out->last_folded.insert(HexId(ids.substr(i * 16, 16)));
  return Status::OK();
}

Status WriteEnded(Env* env, const CacheOptions& c, const std::string& entry, const Ended& e) {
  std::vector<uint64_t> aligned(kBlockBytes / 8);
  auto* b = reinterpret_cast<uint8_t*>(aligned.data());
  InitBlock(b, std::string(16, '\0'), entry, env->NowMicros());
  WriteBlock(e.totals, b);
  std::string data(reinterpret_cast<const char*>(b), kBlockBytes);
  uint32_t n = static_cast<uint32_t>(e.last_folded.size());
  data.append(reinterpret_cast<const char*>(&n), 4);
  for (const auto& id : e.last_folded) data += RawId(id);
  return env->WriteFileAtomic(EndedPath(c.root, entry), data, c.group_shared ? 0660 : 0600);
}

struct DeadFile {
  std::string name;
  std::unique_ptr<StatsFileView> view;
};

// Folds one entry's ended files: add, write the totals with their ids, delete.
Status FoldEntry(Env* env, const CacheOptions& c, const std::string& entry,
                 std::vector<DeadFile>& dead) {
  Ended e;
  SSDFEED_RETURN_IF_ERROR(ReadEnded(env, EndedPath(c.root, entry), &e));
  Ended next{e.totals, {}};
  std::vector<std::string> remove;
  for (auto& d : dead) {
    remove.push_back(d.name);
    if (e.last_folded.count(d.view->header().id)) continue;  // counted before a crash
    StatsSnapshot s = d.view->Read();
    s.admission = Admission::kAdmitting;
    next.totals.Add(s);
    next.last_folded.insert(d.view->header().id);
  }
  if (!next.last_folded.empty()) SSDFEED_RETURN_IF_ERROR(WriteEnded(env, c, entry, next));
  // A file left behind is listed in last_folded: never counted twice, and
  // removed by the next fold.
  for (const auto& name : remove) env->RemoveFile(StatsDir(c.root) + "/" + name).IgnoreError();
  return Status::OK();
}

}  // namespace

Status FoldEnded(Env* env, const CacheOptions& c, bool blocking,
                 std::vector<std::string>* warnings) {
  // The exporter (often root) may be the first to touch a root: a stats/
  // planted as a symlink must be refused, not locked, written and deleted in.
  if (Status s = env->ConfineRoot(c.root); !s.ok()) return s.IsNotFound() ? Status::OK() : s;
  std::string dir = StatsDir(c.root);
  if (!env->FileExists(dir)) return Status::OK();
  auto lock = env->LockFile(dir + "/.fold.lock", true, blocking, c.group_shared ? 0660 : 0600);
  if (!lock.ok()) return lock.status().code() == Status::Code::kBusy ? Status::OK() : lock.status();
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(env->GetChildren(dir, &names));
  std::map<std::string, std::vector<DeadFile>> by_entry;
  for (const auto& n : names) {
    if (!StartsWith(n, "p-") || !EndsWith(n, ".stats")) continue;
    auto v = std::make_unique<StatsFileView>();
    if (Status s = v->Open(env, dir + "/" + n); !s.ok()) {
      warnings->push_back(s.message() + " (skipped)");
      continue;
    }
    if (v->Live()) continue;
    if (!IsEntryId(v->header().entry)) {
      warnings->push_back(dir + "/" + n + ": bad entry id (skipped)");
      continue;
    }
    if (Status s = v->Load(); !s.ok()) {  // its owner's last counts
      warnings->push_back(s.message() + " (skipped)");
      continue;
    }
    auto& dead = by_entry[v->header().entry];
    // The ended file lists at most kMaxFoldedIds; the rest wait for the
    // next fold (and are summed as they are meanwhile).
    if (dead.size() < kMaxFoldedIds) dead.push_back({n, std::move(v)});
  }
  for (auto& [entry, dead] : by_entry) {
    if (Status s = FoldEntry(env, c, entry, dead); !s.ok())
      warnings->push_back("folding ended stats of entry " + entry + ": " + s.message());
  }
  return Status::OK();
}

}  // namespace ssdfeed::metrics

namespace ssdfeed {

Result<RootStats> CollectRootStats(Env* env, const CacheOptions& c) {
  if (env == nullptr) env = Env::Default();
  RootStats out;
  SSDFEED_RETURN_IF_ERROR(metrics::FoldEnded(env, c, true, &out.warnings));
  std::string dir = metrics::StatsDir(c.root);
  std::vector<std::string> names;
  if (env->FileExists(dir)) SSDFEED_RETURN_IF_ERROR(env->GetChildren(dir, &names));
  std::map<std::string, RootStats::PerEntry> sums;
  for (const auto& n : names) {
    if (metrics::StartsWith(n, "p-") && metrics::EndsWith(n, ".stats")) {
      metrics::StatsFileView v;
      if (Status s = v.Open(env, dir + "/" + n); !s.ok()) {
        out.warnings.push_back(s.message() + " (skipped)");
        continue;
      }
      if (!metrics::IsEntryId(v.header().entry)) {
        out.warnings.push_back(dir + "/" + n + ": bad entry id (skipped)");
        continue;
      }
      auto& e = sums[v.header().entry];
      e.stats.Add(v.Read());
      if (v.Live()) e.live_processes++;
    } else if (metrics::StartsWith(n, "ended-") && metrics::EndsWith(n, ".stats")) {
      std::string entry = n.substr(6, n.size() - 6 - 6);
      if (!metrics::IsEntryId(entry)) {
        out.warnings.push_back(dir + "/" + n + ": not ended-<12 hex digits>.stats (skipped)");
        continue;
      }
      metrics::Ended ended;
      if (Status s = metrics::ReadEnded(env, dir + "/" + n, &ended); !s.ok()) {
        out.warnings.push_back(s.message() + " (skipped)");
        continue;
      }
      sums[entry].stats.Add(ended.totals);
    }
  }
  for (auto& [k, v] : sums) out.entries.emplace_back(k, std::move(v));
  // Folding and summing both meet a bad file: say it once.
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (auto& w : out.warnings)
    if (seen.insert(w).second) unique.push_back(std::move(w));
  out.warnings = std::move(unique);
  return out;
}

}  // namespace ssdfeed
