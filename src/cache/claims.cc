#include "cache/claims.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace ssdfeed {

namespace {

constexpr size_t kHeaderBytes = 64;
constexpr char kMagic[8] = {'S', 'D', 'F', 'C', 'L', 'M', '0', '2'};

}  // namespace

Claims::~Claims() {
  if (base_ != nullptr) ::munmap(base_, map_bytes_);
}

Status Claims::Open(const std::string& path, uint64_t n, uint32_t mode, uint32_t slot,
                    std::function<bool(uint32_t)> alive) {
  me_ = slot + 1;
  alive_ = std::move(alive);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  size_t bytes = (kHeaderBytes + n * sizeof(uint32_t) + 4095) / 4096 * 4096;
  struct stat st;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError(path + ": not a regular file");
  } else if (st.st_uid == ::geteuid() && (st.st_mode & 07777) != mode) {
    ::fchmod(fd, mode);  // exact mode whatever the umask (group sharing)
  }
  // Allocates every block (no-op where already allocated), so a later write
  // through the mapping can never hit a full disk.
  if (err == 0) err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    return Status::FromErrno(err, "allocate " + path);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return Status::FromErrno(e, "mmap " + path);
  base_ = static_cast<uint8_t*>(p);
  map_bytes_ = bytes;
  slots_ = reinterpret_cast<uint32_t*>(base_ + kHeaderBytes);
  n_ = n;
  if (std::memcmp(base_, kMagic, sizeof(kMagic)) != 0) std::memcpy(base_, kMagic, sizeof(kMagic));
  DropStaleClaims();
  return Status::OK();
}

void Claims::DropStaleClaims() {
  for (uint64_t i = 0; i < n_; ++i) {
    std::atomic_ref<uint32_t> slot(slots_[i]);
    uint32_t cur = me_;
    if (slot.load(std::memory_order_relaxed) == me_)
      slot.compare_exchange_strong(cur, 0, std::memory_order_acq_rel);
  }
}

bool Claims::TryClaim(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return true;  // no coordination: go ahead
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t cur = slot.load(std::memory_order_acquire);
  if (cur == me_) return true;  // another thread of ours: fine, bounded
  if (cur != 0 && alive_(cur - 1)) return false;
  // Free, or its owner died: take it.
  return slot.compare_exchange_strong(cur, me_, std::memory_order_acq_rel);
}

void Claims::Release(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return;
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t me = me_;
  slot.compare_exchange_strong(me, 0, std::memory_order_acq_rel);
}

uint64_t Claims::NextSeq(uint64_t seen) {
  if (base_ == nullptr) return seen + 1;
  std::atomic_ref<uint64_t> seq(*reinterpret_cast<uint64_t*>(base_ + 8));
  // Never behind what is on disk (a claims file rebuilt after a crash).
  uint64_t cur = seq.load(std::memory_order_relaxed);
  while (cur <= seen && !seq.compare_exchange_weak(cur, seen + 1, std::memory_order_relaxed)) {
  }
  return seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace ssdfeed
