#include "cache/claims.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace ssdfeed {

Claims::~Claims() {
  if (slots_ != nullptr) ::munmap(slots_, map_bytes_);
}

Status Claims::Open(const std::string& path, uint64_t n, uint32_t mode) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  map_bytes_ = std::max<size_t>(4096, n * sizeof(uint32_t));
  struct stat st;
  if (::fstat(fd, &st) != 0 || (static_cast<size_t>(st.st_size) < map_bytes_ &&
                                ::ftruncate(fd, static_cast<off_t>(map_bytes_)) != 0)) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "size " + path);
  }
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return Status::FromErrno(e, "mmap " + path);
  slots_ = static_cast<uint32_t*>(p);
  n_ = n;
  return Status::OK();
}

bool Claims::TryClaim(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return true;  // no coordination: go ahead
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t me = static_cast<uint32_t>(::getpid());
  uint32_t cur = slot.load(std::memory_order_acquire);
  if (cur == me) return true;  // another thread of ours: fine, bounded
  if (cur != 0 && ::kill(static_cast<pid_t>(cur), 0) == 0) return false;
  if (cur != 0 && errno == EPERM) return false;  // alive, another user's
  // Free, or its owner died: take it.
  return slot.compare_exchange_strong(cur, me, std::memory_order_acq_rel);
}

void Claims::Release(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return;
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t me = static_cast<uint32_t>(::getpid());
  slot.compare_exchange_strong(me, 0, std::memory_order_acq_rel);
}

}  // namespace ssdfeed
