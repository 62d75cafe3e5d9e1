#include "ssdfeed/testing/fault_injection_env.h"

namespace ssdfeed {

namespace {

class FaultReadFile final : public RandomAccessFile {
 public:
  FaultReadFile(FaultInjectionEnv* env, std::unique_ptr<RandomAccessFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Read(uint64_t off, size_t n, char* scratch, size_t* got) const override {
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kRead, path()));
    return base_->Read(off, n, scratch, got);
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
    SSDFEED_RETURN_IF_ERROR(env_->MaybeFail(FaultInjectionEnv::Op::kWrite, path()));
    return base_->Append(data, n);
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
  SSDFEED_ASSIGN_OR_RETURN(auto f, base_->NewWritableFile(path, o));
  // What the file held when opened counts as durable.
  NoteWritten(path, f->Size());
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, std::move(f)));
}

Status FaultInjectionEnv::RemoveFile(const std::string& p) {
  {
    std::lock_guard<std::mutex> l(mu_);
    synced_size_.erase(p);
  }
  return base_->RemoveFile(p);
}

Status FaultInjectionEnv::RenameFile(const std::string& f, const std::string& t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = synced_size_.find(f);
    if (it != synced_size_.end()) {
      synced_size_[t] = it->second;
      synced_size_.erase(f);
    } else {
      synced_size_.erase(t);
    }
  }
  return base_->RenameFile(f, t);
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::map<std::string, uint64_t> files;
  {
    std::lock_guard<std::mutex> l(mu_);
    files = synced_size_;
  }
  for (const auto& [path, size] : files) {
    auto info = base_->Stat(path);
    if (!info.ok()) continue;  // removed since
    if (info->size > size) SSDFEED_RETURN_IF_ERROR(base_->TruncateFile(path, size));
  }
  return Status::OK();
}

}  // namespace ssdfeed
