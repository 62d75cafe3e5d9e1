// The import stream parser (`ssdfeed cache import`) over arbitrary bytes:
// never a crash, and a refused stream leaves nothing in the root.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ssdfeed/cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  static std::string base = "/tmp/ssdfeed-import-fuzz-" + std::to_string(getpid());
  std::string root = base + "/root", stream = base + "/stream";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  int fd = ::open(stream.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  ::close(fd);
  fd = ::open(stream.c_str(), O_RDONLY);
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 8 << 20;  // a header declaring more is refused before writing
  o.reserve_chunk = 1 << 20;
  TransferReport r;
  Status s = ImportEntry(o, fd, {}, &r);
  ::close(fd);
  if (!s.ok() && !std::filesystem::is_empty(root + "/trash")) std::abort();  // left behind
  std::filesystem::remove_all(base);
  return 0;
}
