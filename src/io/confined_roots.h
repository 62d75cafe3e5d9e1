// ConfinedRoots: the directory handles through which the POSIX Env reaches
// every path inside a cache root. A root is opened once (O_DIRECTORY |
// O_NOFOLLOW); a path below it is then walked from that descriptor one
// component at a time with openat(O_NOFOLLOW), so a symlink planted at any
// component (a swapped `trash/`, an `entries/<fp>` replaced between a check
// and a create) is refused instead of followed out of the root. The
// operation itself then runs relative to the last directory's descriptor
// (openat, unlinkat, renameat, fstatat(AT_SYMLINK_NOFOLLOW)), never on a
// path string the kernel would resolve again.
#pragma once

#include <fcntl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssdfeed/status.h"
#include "util/mutex.h"

namespace ssdfeed {

// An owned file descriptor, closed when it dies.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Where an Env call lands: `name` relative to `dirfd`. Outside every
// confined root, dirfd is AT_FDCWD and name the path as given (resolved by
// the kernel as before: dataset paths may be symlinks).
struct AtPath {
  int dirfd = AT_FDCWD;
  std::string name;
  bool confined = false;
  // Keep dirfd open while the call runs (an intermediate directory's
  // descriptor, or the root's, which a later ConfineRoot may replace).
  ScopedFd hold;
  std::shared_ptr<const ScopedFd> root;
};

class ConfinedRoots {
 public:
  // Opens root (O_DIRECTORY | O_NOFOLLOW) and confines every path at or
  // below it from now on. Called again for the same root, it keeps the
  // handle it has unless the path now names another directory (the root was
  // deleted and made again): the new one is used from then on.
  Status Add(const std::string& root);
  // Resolves path to the directory that holds its last component. Inside a
  // root, a symlink or a non-directory on the way is an InvalidArgument
  // naming it, a missing component NotFound, and ".." is refused. The root
  // itself resolves to its path (AT_FDCWD), still confined: no link followed.
  Result<AtPath> Resolve(const std::string& path) const;

 private:
  struct Root {
    std::string path;  // without a trailing '/'
    std::shared_ptr<const ScopedFd> fd;
  };
  mutable SharedMutex mu_;
  std::vector<Root> roots_ GUARDED_BY(mu_);  // few: one per cache root a process uses
};

}  // namespace ssdfeed
