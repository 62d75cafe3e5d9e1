// The import stream parser (`ssdfeed cache import`) over arbitrary bytes:
// never a crash, never more bytes written than the root may hold, and a
// refused stream leaves nothing in the root.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ssdfeed/cache.h"
#include "ssdfeed/env.h"

namespace {

using namespace ssdfeed;

// Counts every byte written through the files it opens: the capacity is
// charged from the stream's header before a byte is written, so the count
// must stay within it whatever the header declares.
class CountingEnv : public EnvWrapper {
 public:
  explicit CountingEnv(Env* base) : EnvWrapper(base) {}
  std::atomic<uint64_t> written{0};

  Result<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& o = {}) override {
    SSDFEED_ASSIGN_OR_RETURN(auto f, target()->NewWritableFile(path, o));
    return std::unique_ptr<WritableFile>(new File(std::move(f), &written));
  }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> f, std::atomic<uint64_t>* n) : f_(std::move(f)), n_(n) {}
    Status Append(const void* d, size_t n) override {
      *n_ += n;
      return f_->Append(d, n);
    }
    Status WriteAt(uint64_t off, const void* d, size_t n) override {
      *n_ += n;
      return f_->WriteAt(off, d, n);
    }
    Status Sync() override { return f_->Sync(); }
    Status Close() override { return f_->Close(); }
    uint64_t Size() const override { return f_->Size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    std::unique_ptr<WritableFile> f_;
    std::atomic<uint64_t>* n_;
  };
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string base = "/tmp/ssdfeed-import-fuzz-" + std::to_string(getpid());
  std::string root = base + "/root", stream = base + "/stream";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  int fd = ::open(stream.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  ::close(fd);
  fd = ::open(stream.c_str(), O_RDONLY);
  CountingEnv env(Env::Default());
  CacheOptions o;
  o.env = &env;
  o.root = root;
  o.capacity_bytes = 8 << 20;  // a header declaring more is refused before writing
  o.reserve_chunk = 1 << 20;
  TransferReport r;
  Status s = ImportEntry(o, fd, {}, &r);
  ::close(fd);
  if (env.written > o.capacity_bytes) std::abort();  // wrote past what it was charged
  if (!s.ok() && !std::filesystem::is_empty(root + "/trash")) std::abort();  // left behind
  std::filesystem::remove_all(base);
  return 0;
}
