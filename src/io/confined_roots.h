// ConfinedRoots: the directory handles through which the POSIX Env reaches
// every path inside a cache root. For each call the root is opened
// (O_DIRECTORY | O_NOFOLLOW) and the path below it walked from that
// descriptor one component at a time with openat(O_NOFOLLOW), so a symlink
// planted at any
// component (a swapped `trash/`, an `entries/<fp>` replaced between a check
// and a create) is refused instead of followed out of the root. The
// operation itself then runs relative to the last directory's descriptor
// (openat, unlinkat, renameat, fstatat(AT_SYMLINK_NOFOLLOW)), never on a
// path string the kernel would resolve again.
#pragma once

#include <fcntl.h>

#include <set>
#include <string>
#include <utility>

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
  // Keep dirfd open while the call runs: the root's descriptor and the
  // last directory's.
  ScopedFd root;
  ScopedFd hold;
};

class ConfinedRoots {
 public:
  // Confines every path at or below root from now on, once it has checked
  // that root is a directory and not a symlink. No descriptor is kept
  // between calls (a process may use many roots, a test thousands): each
  // Resolve opens the root afresh, so a root deleted and made anew is the
  // new directory.
  Status Add(const std::string& root);
  // Resolves path to the directory that holds its last component. Inside a
  // root, a symlink or a non-directory on the way is an InvalidArgument
  // naming it, a missing component NotFound, and ".." is refused. The root
  // itself resolves to its path (AT_FDCWD), still confined: no link followed.
  Result<AtPath> Resolve(const std::string& path) const;

 private:
  // The longest confined root that path is at or below; empty if none.
  std::string RootOf(const std::string& path) const;

  mutable SharedMutex mu_;
  std::set<std::string> roots_ GUARDED_BY(mu_);  // without a trailing '/'
};

}  // namespace ssdfeed
