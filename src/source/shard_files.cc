#include "source/shard_files.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "util/hash.h"

namespace ssdfeed {

namespace {

// Bumped whenever what goes into an identity changes, so that entries made
// under the old rule are never reached again (LRU eviction removes them).
constexpr char kIdentityVersion[] = "source-identity-v2";

}  // namespace

Result<InputFile> StatInput(Env* env, const std::string& path) {
  SSDFEED_ASSIGN_OR_RETURN(FileInfo fi, env->Stat(path));
  if (fi.is_dir) return Status::InvalidArgument(path + ": is a directory, not an input file");
  return InputFile{path, fi.size, fi.mtime_ns, fi.inode, fi.ctime_ns, {}};
}

RandomAccessFileOptions OriginReadOptions() {
  RandomAccessFileOptions o;
  o.no_follow = false;
  return o;
}

std::string IdentityDigest(const std::string& kind, const std::vector<InputFile>& files,
                           const std::string& extra) {
  Fingerprinter fp;
  fp.Add(kIdentityVersion);
  fp.Add(kind);
  fp.Add(extra);
  for (const auto& f : files) {
    fp.Add(f.path);
    fp.Add(std::to_string(f.size) + "/" + std::to_string(f.mtime_ns) + "/" +
           std::to_string(f.inode) + "/" + std::to_string(f.ctime_ns));
    if (!f.etag.empty()) fp.Add("etag:" + f.etag);
  }
  return fp.HexDigest();
}

ShardFiles::ShardFiles(Env* env, std::vector<InputFile> files)
    : env_(env), files_(std::move(files)), open_(files_.size()) {}

ShardFiles::ShardFiles(std::vector<InputFile> files, Opener open, Hooks hooks)
    : env_(nullptr),
      opener_(std::move(open)),
      hooks_(std::move(hooks)),
      files_(std::move(files)),
      open_(files_.size()) {}

void ShardedSource::PlanReads(const std::vector<uint64_t>& ids) const {
  if (!files_.plans()) return;
  struct Piece {
    uint64_t begin, end;
  };
  std::vector<std::vector<Piece>> per_file(files_.files().size());
  for (uint64_t id : ids) {
    if (id >= size()) continue;
    uint32_t f = 0;
    uint64_t b = 0, e = 0;
    Span(id, &f, &b, &e);
    per_file[f].push_back({b, e});
  }
  for (size_t f = 0; f < per_file.size(); ++f) {
    auto& pieces = per_file[f];
    std::sort(pieces.begin(), pieces.end(),
              [](const Piece& x, const Piece& y) { return x.begin < y.begin; });
    std::vector<ShardFiles::Run> runs;
    std::vector<size_t> count;  // samples per run
    for (const Piece& p : pieces) {
      bool joins = !runs.empty() && p.begin <= runs.back().end + kCoalesceGapBytes &&
                   std::max(p.end, runs.back().end) - runs.back().begin <= kCoalesceMaxBytes;
      if (joins) {
        runs.back().end = std::max(runs.back().end, p.end);
        ++count.back();
      } else {
        runs.push_back({p.begin, p.end});
        count.push_back(1);
      }
    }
    // A run of one sample is read as it is: nothing to keep for others.
    std::vector<ShardFiles::Run> shared;
    for (size_t r = 0; r < runs.size(); ++r)
      if (count[r] > 1) shared.push_back(runs[r]);
    files_.Plan(f, std::move(shared));
  }
}

void ShardedSource::TrackReads(const std::vector<uint32_t>& file_of) {
  file_of_ = file_of;
  read_ = std::make_unique<std::atomic<bool>[]>(file_of.size());
  unread_ = std::make_unique<std::atomic<uint64_t>[]>(files_.files().size());
  for (uint32_t f : file_of) unread_[f].fetch_add(1, std::memory_order_relaxed);
}

void ShardedSource::ReadOnce(size_t id) const {
  if (!read_ || read_[id].exchange(true, std::memory_order_relaxed)) return;
  uint32_t f = file_of_[id];
  if (unread_[f].fetch_sub(1, std::memory_order_acq_rel) == 1) files_.Release(f);
}

Status ForEachShard(size_t n, int threads, const std::function<Status(size_t)>& fn) {
  std::vector<Status> st(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) st[i] = fn(i);
  };
  std::vector<std::thread> ts;
  size_t extra = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1))) - (n > 0);
  for (size_t t = 0; t < extra; ++t) ts.emplace_back(work);
  work();
  for (auto& t : ts) t.join();
  for (auto& s : st)
    if (!s.ok()) return s;
  return Status::OK();
}

Result<const RandomAccessFile*> ShardFiles::Get(size_t i) const {
  std::lock_guard<std::mutex> l(*mu_);
  if (!open_[i] && opener_) {
    SSDFEED_ASSIGN_OR_RETURN(open_[i], opener_(i));
  } else if (!open_[i]) {
    SSDFEED_ASSIGN_OR_RETURN(open_[i],
                             env_->NewRandomAccessFile(files_[i].path, OriginReadOptions()));
  }
  return static_cast<const RandomAccessFile*>(open_[i].get());
}

Status ReadExact(const RandomAccessFile& f, uint64_t offset, size_t n, char* buf) {
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(f.Read(offset, n, buf, &got));
  if (got != n)
    return Status::Corruption(f.path() + ": cut short (wanted " + std::to_string(n) +
                              " bytes at offset " + std::to_string(offset) + ", file has " +
                              std::to_string(offset + got) + ")");
  return Status::OK();
}

Status ForEachShard(const ShardFiles& files, const ShardScan& scan,
                    const std::function<Status(size_t, const RandomAccessFile&)>& fn) {
  return ForEachShard(files.files().size(), scan.threads, [&](size_t i) -> Status {
    if (!scan.open) {
      SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files.Get(i));
      return fn(i, *f);
    }
    SSDFEED_ASSIGN_OR_RETURN(auto own, scan.open(i));
    return fn(i, *own);
  });
}

Result<std::vector<InputFile>> StatInputs(Env* env, const std::vector<std::string>& paths) {
  std::vector<InputFile> inputs;
  for (const auto& p : paths) {
    SSDFEED_ASSIGN_OR_RETURN(InputFile f, StatInput(env, p));
    inputs.push_back(std::move(f));
  }
  return inputs;
}

}  // namespace ssdfeed
