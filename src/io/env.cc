// Env helpers that only need the abstract interface.
#include "ssdfeed/env.h"

#include <unistd.h>

#include <atomic>
#include <random>
#include <vector>

namespace ssdfeed {

void Env::Warn(const std::string& msg) { GetLogger()->Log(Logger::Level::kWarning, msg); }

Status WritableFile::WriteAt(uint64_t, const void*, size_t) {
  return Status::NotSupported(path() + ": positional writes are not supported");
}

Status Env::ReadFileToString(const std::string& path, std::string* out,
                             const RandomAccessFileOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto file, NewRandomAccessFile(path, opts));
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  out->resize(size);
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(file->Read(0, size, out->data(), &got));
  out->resize(got);
  return Status::OK();
}

Status Env::ReadPseudoFile(const std::string& path, std::string* out) {
  out->clear();
  RandomAccessFileOptions opts;
  opts.no_follow = false;
  SSDFEED_ASSIGN_OR_RETURN(auto file, NewRandomAccessFile(path, opts));
  constexpr size_t kChunk = 4096;
  for (size_t got = kChunk; got == kChunk;) {
    size_t at = out->size();
    out->resize(at + kChunk);
    SSDFEED_RETURN_IF_ERROR(file->Read(at, kChunk, out->data() + at, &got));
    out->resize(at + got);
  }
  return Status::OK();
}

namespace {

struct DoneReads final : PendingReads {
  void Wait() override {}
};

// Whether every request is on reqs[0]'s file: the common batch (one
// segment), handed to that file without grouping or copying.
template <typename Req>
bool OneFile(const Req* reqs, size_t n) {
  for (size_t i = 1; i < n; ++i)
    if (reqs[i].file != reqs[0].file) return false;
  return true;
}

// The positions of reqs grouped by file, each group in request order:
// every file gets its requests in one call, so they are in flight together.
template <typename Req>
std::vector<std::vector<size_t>> ByFile(const Req* reqs, size_t n) {
  std::vector<std::vector<size_t>> groups;
  std::vector<const void*> files;
  for (size_t i = 0; i < n; ++i) {
    size_t g = 0;
    while (g < files.size() && files[g] != reqs[i].file) ++g;  // a batch holds few files
    if (g == files.size()) {
      files.push_back(reqs[i].file);
      groups.emplace_back();
    }
    groups[g].push_back(i);
  }
  return groups;
}

// Reads of several files: each file's requests are copied into a group of
// its own (a file's StartMultiRead takes a contiguous array) and their
// results copied back on Wait.
class FileGroupReads final : public PendingReads {
 public:
  FileGroupReads(ReadRequest* outer, std::vector<std::vector<size_t>> groups)
      : outer_(outer), index_(std::move(groups)), inner_(index_.size()) {
    for (size_t g = 0; g < index_.size(); ++g) {
      for (size_t i : index_[g]) inner_[g].push_back(outer_[i]);
      pending_.push_back(
          inner_[g].front().file->StartMultiRead(inner_[g].data(), inner_[g].size()));
    }
  }
  ~FileGroupReads() override { Wait(); }
  void Wait() override {
    for (size_t g = 0; g < pending_.size(); ++g) {
      if (pending_[g] == nullptr) continue;
      pending_[g]->Wait();
      pending_[g].reset();
      for (size_t j = 0; j < index_[g].size(); ++j) {
        outer_[index_[g][j]].got = inner_[g][j].got;
        outer_[index_[g][j]].status = inner_[g][j].status;
      }
    }
  }

 private:
  ReadRequest* outer_;
  std::vector<std::vector<size_t>> index_;
  std::vector<std::vector<ReadRequest>> inner_;  // never resized once reads start
  std::vector<std::unique_ptr<PendingReads>> pending_;
};

}  // namespace

std::unique_ptr<PendingReads> RandomAccessFile::StartMultiRead(ReadRequest* reqs, size_t n) const {
  for (size_t i = 0; i < n; ++i)
    reqs[i].status = Read(reqs[i].offset, reqs[i].n, reqs[i].scratch, &reqs[i].got);
  return std::make_unique<DoneReads>();
}

void WritableFile::MultiWrite(WriteRequest* reqs, size_t n) {
  for (size_t i = 0; i < n; ++i) reqs[i].status = WriteAt(reqs[i].offset, reqs[i].data, reqs[i].n);
}

std::unique_ptr<PendingReads> Env::StartReads(ReadRequest* reqs, size_t n) {
  if (n == 0) return std::make_unique<DoneReads>();
  if (OneFile(reqs, n)) return reqs[0].file->StartMultiRead(reqs, n);
  return std::make_unique<FileGroupReads>(reqs, ByFile(reqs, n));
}

void Env::WriteMany(WriteRequest* reqs, size_t n) {
  if (n == 0) return;
  if (OneFile(reqs, n)) return reqs[0].file->MultiWrite(reqs, n);
  for (const auto& g : ByFile(reqs, n)) {
    std::vector<WriteRequest> inner;
    for (size_t i : g) inner.push_back(reqs[i]);
    inner[0].file->MultiWrite(inner.data(), inner.size());
    for (size_t j = 0; j < g.size(); ++j) reqs[g[j]].status = inner[j].status;
  }
}

Status Env::WriteFileAtomic(const std::string& path, const std::string& data, uint32_t mode,
                            bool durable) {
  // pids repeat across containers (pid 1 in each): a random part keeps two
  // writers from sharing one temporary file.
  static const uint64_t process_nonce =
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(process_nonce) + "." +
                    std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  WritableFileOptions o;
  o.truncate = true;
  o.mode = mode;
  SSDFEED_ASSIGN_OR_RETURN(auto f, NewWritableFile(tmp, o));
  Status s = f->Append(data.data(), data.size());
  if (s.ok() && durable) s = f->Sync();
  if (s.ok()) s = f->Close();
  if (s.ok()) s = RenameFile(tmp, path);
  if (!s.ok()) {
    RemoveFile(tmp).IgnoreError();  // best effort; the error that matters is s
    return s;
  }
  return durable ? SyncDir(Dirname(path)) : Status::OK();
}

Status CreateDirs(Env* env, const std::string& path, uint32_t mode) {
  if (path.empty() || path == "/" || path == ".") return Status::OK();
  if (env->FileExists(path)) return env->CreateDir(path, mode);  // checks it is a dir
  SSDFEED_RETURN_IF_ERROR(CreateDirs(env, Dirname(path), mode));
  return env->CreateDir(path, mode);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

std::string Basename(const std::string& path) {
  size_t p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

std::string Dirname(const std::string& path) {
  size_t p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

}  // namespace ssdfeed
