#include "source/shard_files.h"

#include "util/hash.h"

namespace ssdfeed {

Result<InputFile> StatInput(Env* env, const std::string& path) {
  SSDFEED_ASSIGN_OR_RETURN(FileInfo fi, env->Stat(path));
  return InputFile{path, fi.size, fi.mtime_ns};
}

std::string IdentityDigest(const std::string& kind, const std::vector<InputFile>& files,
                           const std::string& extra) {
  Fingerprinter fp;
  fp.Add(kind);
  fp.Add(extra);
  for (const auto& f : files) {
    fp.Add(f.path);
    fp.Add(std::to_string(f.size) + "/" + std::to_string(f.mtime_ns));
  }
  return fp.HexDigest();
}

ShardFiles::ShardFiles(Env* env, std::vector<InputFile> files)
    : env_(env), files_(std::move(files)), open_(files_.size()) {}

Result<const RandomAccessFile*> ShardFiles::Get(size_t i) const {
  std::lock_guard<std::mutex> l(*mu_);
  if (!open_[i]) {
    SSDFEED_ASSIGN_OR_RETURN(open_[i], env_->NewRandomAccessFile(files_[i].path));
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

}  // namespace ssdfeed
