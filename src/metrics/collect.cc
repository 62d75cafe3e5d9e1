// Reading a root's stats files: folding ended processes into per-entry totals
// and summing everything per entry, for the exporter.

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

bool IsHexId(const std::string& s) {
  if (s.empty() || s.size() > 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// One process's stats file, mapped read-only (or read, when too short to map).
class StatsFileView {
 public:
  Status Open(Env* env, const std::string& path) {
    MappedFileOptions o;
    o.writable = false;
    SSDFEED_ASSIGN_OR_RETURN(file_, env->NewMappedFile(path, kBlockBytes, o));
    size_t got = static_cast<size_t>(file_->size());
    Status s = ValidateBlock(file_->data(), got, got < kBlockBytes ? nullptr : &header_);
    if (s.ok() && got < kBlockBytes) return Status::Corruption(path + ": truncated");
    return s.ok() ? s : Status::Corruption(path + ": " + s.message());
  }
  // True while the owner holds its shared lock. A dead file stays locked
  // exclusively by us until this view is destroyed.
  bool Live() { return file_->Lock(/*exclusive=*/true, /*blocking=*/false).IsBusy(); }
  const BlockHeader& header() const { return header_; }
  StatsSnapshot Read() const { return ReadBlock(file_->data()); }

 private:
  std::unique_ptr<MappedFile> file_;
  BlockHeader header_;
};

struct Ended {
  StatsSnapshot totals;
  std::set<std::string> last_folded;  // hex ids
};

std::string EndedPath(const std::string& root, const std::string& entry) {
  return StatsDir(root) + "/ended-" + entry + ".stats";
}

Status ReadEnded(Env* env, const std::string& path, Ended* out) {
  if (!env->FileExists(path)) return Status::OK();
  std::string data;
  SSDFEED_RETURN_IF_ERROR(env->ReadFileToString(path, &data));
  const auto* b = reinterpret_cast<const uint8_t*>(data.data());
  if (Status s = ValidateBlock(b, data.size(), nullptr); !s.ok())
    return Status::Corruption(path + ": " + s.message());
  std::vector<uint64_t> aligned(kBlockBytes / 8);  // ReadBlock loads 8-byte words
  std::memcpy(aligned.data(), data.data(), kBlockBytes);
  out->totals = ReadBlock(reinterpret_cast<const uint8_t*>(aligned.data()));
  out->totals.admission = Admission::kAdmitting;
  uint32_t n = 0;
  if (data.size() >= kBlockBytes + 4) std::memcpy(&n, data.data() + kBlockBytes, 4);
  if (data.size() < kBlockBytes + 4 + size_t{n} * 16)
    return Status::Corruption(path + ": truncated list of folded ids");
  for (uint32_t i = 0; i < n; ++i)
    out->last_folded.insert(HexId(std::string(data.data() + kBlockBytes + 4 + i * 16, 16)));
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
    if (!IsHexId(v->header().entry)) {
      warnings->push_back(dir + "/" + n + ": bad entry id (skipped)");
      continue;
    }
    by_entry[v->header().entry].push_back({n, std::move(v)});
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
      if (!metrics::IsHexId(v.header().entry)) {
        out.warnings.push_back(dir + "/" + n + ": bad entry id (skipped)");
        continue;
      }
      auto& e = sums[v.header().entry];
      e.stats.Add(v.Read());
      if (v.Live()) e.live_processes++;
    } else if (metrics::StartsWith(n, "ended-") && metrics::EndsWith(n, ".stats")) {
      metrics::Ended ended;
      if (Status s = metrics::ReadEnded(env, dir + "/" + n, &ended); !s.ok()) {
        out.warnings.push_back(s.message() + " (skipped)");
        continue;
      }
      std::string entry = n.substr(6, n.size() - 6 - 6);
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
