#include "util/fault_injection_env.h"

#include <chrono>
#include <memory>
#include <vector>

namespace ssdfeed {

namespace {

// The base file's reads for a batch, its results copied back on Wait.
class FaultReads final : public PendingReads {
 public:
  FaultReads(ReadRequest* outer, size_t n) : outer_(outer) {
    inner_.reserve(n);  // the base holds pointers into it
    index_.reserve(n);
  }
  ~FaultReads() override { Wait(); }
  void Add(size_t i, const RandomAccessFile* base) {
    ReadRequest r = outer_[i];
    r.file = base;
    inner_.push_back(r);
    index_.push_back(i);
  }
  void Start(const RandomAccessFile* base) {
    pending_ = base->StartMultiRead(inner_.data(), inner_.size());
  }
  void Wait() override {
    if (pending_ == nullptr) return;
    pending_->Wait();
    pending_.reset();
    for (size_t j = 0; j < inner_.size(); ++j) {
      outer_[index_[j]].got = inner_[j].got;
      outer_[index_[j]].status = inner_[j].status;
    }
  }

 private:
  ReadRequest* outer_;
  std::vector<ReadRequest> inner_;
  std::vector<size_t> index_;
  std::unique_ptr<PendingReads> pending_;
};

class FaultReadFile final : public RandomAccessFile {
 public:
  FaultReadFile(FaultInjectionEnv* env, std::unique_ptr<RandomAccessFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Read(uint64_t off, size_t n, char* scratch, size_t* got) const override {
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kRead, path()));
    return base_->Read(off, n, scratch, got);
  }
  // Each read may fail on its own (as its single Read would); the rest go
  // to the base file as one batch, so its io_uring path is the one under test.
  std::unique_ptr<PendingReads> StartMultiRead(ReadRequest* reqs, size_t n) const override {
    auto reads = std::make_unique<FaultReads>(reqs, n);
    for (size_t i = 0; i < n; ++i) {
      Status s = env_->MaybeFail(FaultInjectionEnv::Op::kRead, path());
      if (!s.ok()) {
        reqs[i].got = 0;
        reqs[i].status = s;
        continue;
      }
      reads->Add(i, base_.get());
    }
    reads->Start(base_.get());
    return reads;
  }
  Result<uint64_t> Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv* env_;
  std::unique_ptr<RandomAccessFile> base_;
};

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Append(const void* data, size_t n) override {
    env_->MaybeDelayWrite(path());
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kWrite, path()));
    return base_->Append(data, n);
  }
  Status WriteAt(uint64_t offset, const void* data, size_t n) override {
    env_->MaybeDelayWrite(path());
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kWrite, path()));
    return base_->WriteAt(offset, data, n);
  }
  // As StartMultiRead: one delay for the batch, each write may fail alone,
  // the rest reach the base file together.
  void MultiWrite(WriteRequest* reqs, size_t n) override {
    env_->MaybeDelayWrite(path());
    std::vector<WriteRequest> inner;
    std::vector<size_t> index;
    for (size_t i = 0; i < n; ++i) {
      Status s = env_->MaybeFail(FaultInjectionEnv::Op::kWrite, path());
      if (!s.ok()) {
        reqs[i].status = s;
        continue;
      }
      inner.push_back(reqs[i]);
      inner.back().file = base_.get();
      index.push_back(i);
    }
    base_->MultiWrite(inner.data(), inner.size());
    for (size_t j = 0; j < inner.size(); ++j) reqs[index[j]].status = inner[j].status;
  }
  Status Sync() override {
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kSync, path()));
    uint64_t size = base_->Size();  // appends racing with the fsync may not be in it
    SSDFEED_RETURN_IF_ERROR(base_->Sync());
    env_->NoteSynced(path(), size);
    return Status::OK();
  }
  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv* env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultInjectionEnv::MaybeDelayWrite(const std::string& path) {
  {
    std::unique_lock<std::mutex> l(hold_mu_);
    auto free = [&] { return !holding_ || path.find(hold_path_) == std::string::npos; };
    if (!free()) {
      ++held_;
      hold_cv_.notify_all();  // for WaitForHeldWrites
      hold_cv_.wait(l, free);
      --held_;
    }
  }
  int64_t us = write_delay_us_.load();
  if (us > 0) base_->SleepForMicroseconds(us);
}

void FaultInjectionEnv::HoldWrites(std::string path_substr) {
  std::lock_guard<std::mutex> l(hold_mu_);
  hold_path_ = std::move(path_substr);
  holding_ = true;
}

void FaultInjectionEnv::ReleaseWrites() {
  {
    std::lock_guard<std::mutex> l(hold_mu_);
    holding_ = false;
  }
  hold_cv_.notify_all();
}

bool FaultInjectionEnv::WaitForHeldWrites(int n, int64_t timeout_micros) {
  std::unique_lock<std::mutex> l(hold_mu_);
  return hold_cv_.wait_for(l, std::chrono::microseconds(timeout_micros),
                           [&] { return held_ >= n; });
}

void FaultInjectionEnv::FailAfter(Op op, int skip, int count, Status error,
                                  std::string path_substr) {
  std::lock_guard<std::mutex> l(mu_);
  rules_[op] = Rule{skip, count, std::move(error), std::move(path_substr)};
}

void FaultInjectionEnv::ClearFaults() {
  std::lock_guard<std::mutex> l(mu_);
  rules_.clear();
}

int FaultInjectionEnv::Count(Op op) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

Status FaultInjectionEnv::MaybeFail(Op op, const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = rules_.find(op);
  if (it != rules_.end() && path.find(it->second.path_substr) != std::string::npos) {
    Rule& r = it->second;
    if (r.skip > 0) {
      --r.skip;
    } else if (r.count != 0) {
      if (r.count > 0) --r.count;
      return r.error.WithContext("injected fault on " + path);
    }
  }
  ++counts_[op];
  return Status::OK();
}

void FaultInjectionEnv::NoteSynced(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  synced_size_[path] = size;
}

void FaultInjectionEnv::NoteWritten(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  synced_size_.emplace(path, size);  // keeps an earlier synced size
}

Result<std::unique_ptr<RandomAccessFile>> FaultInjectionEnv::NewRandomAccessFile(
    const std::string& path, const RandomAccessFileOptions& o) {
  SSDFEED_ASSIGN_OR_RETURN(auto f, base_->NewRandomAccessFile(path, o));
  return std::unique_ptr<RandomAccessFile>(new FaultReadFile(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path, const WritableFileOptions& o) {
  if (o.direct && refuse_direct_.load())  // as tmpfs did before Linux 6.6
    return Status::NotSupported(path + ": the filesystem refuses O_DIRECT");
  bool existed = base_->FileExists(path);
  SSDFEED_ASSIGN_OR_RETURN(auto f, base_->NewWritableFile(path, o));
  // What the file held when opened counts as durable.
  NoteWritten(path, f->Size());
  if (!existed) NoteCreated(path, false);
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, std::move(f)));
}

namespace {

Status RemoveTree(Env* env, const std::string& dir) {
  std::vector<std::string> names;
  Status s = env->GetChildren(dir, &names);
  if (s.IsNotFound()) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(s);
  for (const auto& n : names) {
    auto fi = env->Lstat(JoinPath(dir, n));
    if (fi.ok() && fi->is_dir) SSDFEED_RETURN_IF_ERROR(RemoveTree(env, JoinPath(dir, n)));
  }
  return env->RemoveDirAndFiles(dir);
}

}  // namespace

void FaultInjectionEnv::NoteCreated(const std::string& path, bool is_dir) {
  std::lock_guard<std::mutex> l(mu_);
  undurable_names_[path] = is_dir;
}

void FaultInjectionEnv::Forget(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  synced_size_.erase(path);
  undurable_names_.erase(path);
}

Status FaultInjectionEnv::GetChildren(const std::string& d, std::vector<std::string>* n) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kList, d));
  return base_->GetChildren(d, n);
}

Status FaultInjectionEnv::CreateDir(const std::string& p, uint32_t m) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kMkdir, p));
  bool existed = base_->FileExists(p);
  SSDFEED_RETURN_IF_ERROR(base_->CreateDir(p, m));
  if (!existed) NoteCreated(p, true);
  return Status::OK();
}

Status FaultInjectionEnv::RemoveFile(const std::string& p) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kRemove, p));
  Forget(p);
  return base_->RemoveFile(p);
}

Status FaultInjectionEnv::RemoveDir(const std::string& p) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kRemove, p));
  Forget(p);
  return base_->RemoveDir(p);
}

Status FaultInjectionEnv::RemoveDirAndFiles(const std::string& d) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kRemove, d));
  {
    std::lock_guard<std::mutex> l(mu_);
    std::string prefix = d + "/";
    std::erase_if(synced_size_, [&](auto& kv) { return kv.first.rfind(prefix, 0) == 0; });
    std::erase_if(undurable_names_,
                  [&](auto& kv) { return kv.first.rfind(prefix, 0) == 0 || kv.first == d; });
  }
  return base_->RemoveDirAndFiles(d);
}

Status FaultInjectionEnv::RenameFile(const std::string& f, const std::string& t) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kRename, f));
  SSDFEED_RETURN_IF_ERROR(base_->RenameFile(f, t));
  std::lock_guard<std::mutex> l(mu_);
  // Moves what we know of f (and of files inside it, for a directory) to t.
  auto move_prefix = [&](auto* m) {
    std::decay_t<decltype(*m)> moved;
    for (auto it = m->begin(); it != m->end();) {
      if (it->first == f || it->first.rfind(f + "/", 0) == 0) {
        moved[t + it->first.substr(f.size())] = it->second;
        it = m->erase(it);
      } else {
        ++it;
      }
    }
    std::erase_if(*m, [&](auto& kv) { return kv.first == t; });
    m->insert(moved.begin(), moved.end());
  };
  move_prefix(&synced_size_);
  move_prefix(&undurable_names_);
  auto fi = base_->Lstat(t);
  undurable_names_[t] = fi.ok() && fi->is_dir;  // the new name is durable only after SyncDir
  return Status::OK();
}

Status FaultInjectionEnv::SyncDir(const std::string& d) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kSyncDir, d));
  SSDFEED_RETURN_IF_ERROR(base_->SyncDir(d));
  std::lock_guard<std::mutex> l(mu_);
  std::erase_if(undurable_names_, [&](auto& kv) { return Dirname(kv.first) == d; });
  return Status::OK();
}

Result<std::unique_ptr<FileLock>> FaultInjectionEnv::LockFile(const std::string& p, bool ex,
                                                              bool bl, uint32_t mode) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kLock, p));
  return base_->LockFile(p, ex, bl, mode);
}

Status FaultInjectionEnv::FsSpace(const std::string& p, uint64_t* f, uint64_t* t) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kFsSpace, p));
  return base_->FsSpace(p, f, t);
}

Result<std::unique_ptr<MappedFile>> FaultInjectionEnv::NewMappedFile(const std::string& p,
                                                                     uint64_t size,
                                                                     const MappedFileOptions& o) {
  SSDFEED_RETURN_IF_ERROR(MaybeFail(Op::kMap, p));
  return base_->NewMappedFile(p, size, o);
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::map<std::string, uint64_t> files;
  std::map<std::string, bool> names;
  {
    std::lock_guard<std::mutex> l(mu_);
    files = synced_size_;
    names = undurable_names_;
  }
  for (const auto& [path, size] : files) {
    auto info = base_->Stat(path);
    if (!info.ok()) continue;  // removed since
    if (info->size > size) SSDFEED_RETURN_IF_ERROR(base_->TruncateFile(path, size));
  }
  // Deepest first; a lost directory loses everything under it.
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    Status s = it->second ? RemoveTree(base_, it->first) : base_->RemoveFile(it->first);
    if (!s.ok() && !s.IsNotFound()) return s;
    Forget(it->first);
  }
  return Status::OK();
}

namespace {

// Passes every call to the file it wraps, noting each batch on the way.
class RecordingReadFile final : public RandomAccessFile {
 public:
  RecordingReadFile(BatchRecordingEnv* env, std::unique_ptr<RandomAccessFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Read(uint64_t off, size_t n, char* scratch, size_t* got) const override {
    return base_->Read(off, n, scratch, got);
  }
  std::unique_ptr<PendingReads> StartMultiRead(ReadRequest* reqs, size_t n) const override {
    env_->Note({false, n});
    return base_->StartMultiRead(reqs, n);
  }
  Result<uint64_t> Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  BatchRecordingEnv* env_;
  std::unique_ptr<RandomAccessFile> base_;
};

class RecordingWritableFile final : public WritableFile {
 public:
  RecordingWritableFile(BatchRecordingEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Append(const void* data, size_t n) override { return base_->Append(data, n); }
  Status WriteAt(uint64_t offset, const void* data, size_t n) override {
    return base_->WriteAt(offset, data, n);
  }
  void MultiWrite(WriteRequest* reqs, size_t n) override {
    env_->Note({true, n});
    base_->MultiWrite(reqs, n);
  }
  Status Sync() override { return base_->Sync(); }
  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  BatchRecordingEnv* env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

std::vector<BatchRecordingEnv::Batch> BatchRecordingEnv::batches() const {
  std::lock_guard<std::mutex> l(mu_);
  return batches_;
}

void BatchRecordingEnv::Note(Batch b) {
  std::lock_guard<std::mutex> l(mu_);
  batches_.push_back(b);
}

Result<std::unique_ptr<RandomAccessFile>> BatchRecordingEnv::NewRandomAccessFile(
    const std::string& path, const RandomAccessFileOptions& o) {
  SSDFEED_ASSIGN_OR_RETURN(auto f, target()->NewRandomAccessFile(path, o));
  return std::unique_ptr<RandomAccessFile>(new RecordingReadFile(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> BatchRecordingEnv::NewWritableFile(
    const std::string& path, const WritableFileOptions& o) {
  SSDFEED_ASSIGN_OR_RETURN(auto f, target()->NewWritableFile(path, o));
  return std::unique_ptr<WritableFile>(new RecordingWritableFile(this, std::move(f)));
}

}  // namespace ssdfeed
