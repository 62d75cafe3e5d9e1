#include "io/confined_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace ssdfeed {

ScopedFd& ScopedFd::operator=(ScopedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

std::string WithoutTrailingSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Why component `name` of `shown` (under dirfd) could not be walked into.
Status WalkError(int dirfd, const std::string& name, const std::string& shown, int err) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode))
      return Status::InvalidArgument(shown +
                                     ": a symlink inside the cache root; never followed there");
    if (!S_ISDIR(st.st_mode))
      return Status::InvalidArgument(shown + ": not a directory inside the cache root");
  }
  return Status::FromErrno(err, "open " + shown);
}

// The path's components below the root, without empty ones and ".".
Result<std::vector<std::string>> Components(const std::string& path, const std::string& rel) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    std::string c = rel.substr(i, j - i);
    if (c == "..") return Status::InvalidArgument(path + ": '..' inside the cache root");
    if (!c.empty() && c != ".") out.push_back(std::move(c));
    i = j + 1;
  }
  return out;
}

}  // namespace

Status ConfinedRoots::Add(const std::string& root_in) {
  std::string root = WithoutTrailingSlash(root_in);
  if (root.empty() || root == "/") return Status::InvalidArgument("'/' cannot be a cache root");
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    if (::lstat(root.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return Status::InvalidArgument(root +
                                     ": the cache root is a symlink; give the directory it "
                                     "points to instead (nothing in a cache root is followed)");
    return Status::FromErrno(err, "open cache root " + root);
  }
  ::close(fd);
  WriterLock l(&mu_);
  roots_.insert(root);
  return Status::OK();
}

std::string ConfinedRoots::RootOf(const std::string& path) const {
  ReaderLock l(&mu_);
  if (roots_.empty()) return {};
  // The path itself, then each prefix ending before a '/', longest first.
  std::string p = WithoutTrailingSlash(path);
  for (;;) {
    if (roots_.count(p) != 0) return p;
    size_t slash = p.find_last_of('/');
    if (slash == std::string::npos || slash == 0) return {};
    p.resize(slash);
    p = WithoutTrailingSlash(p);
  }
}

Result<AtPath> ConfinedRoots::Resolve(const std::string& path) const {
  AtPath at;
  std::string root = RootOf(path);
  if (root.empty()) {
    at.name = path;
    return at;
  }
  at.confined = true;
  SSDFEED_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                           Components(path, path.substr(std::min(root.size(), path.size()))));
  if (parts.empty()) {
    // The root itself, by its path (never following a link in its last
    // component).
    at.name = root;
    return at;
  }
  int rfd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rfd < 0) return WalkError(AT_FDCWD, root, root, errno);
  at.root = ScopedFd(rfd);
  at.dirfd = rfd;
  std::string shown = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    shown.append(1, '/').append(parts[i]);
    // O_PATH needs only search permission; with O_NOFOLLOW it would open a
    // symlink itself, which O_DIRECTORY then refuses (ENOTDIR).
    int fd = ::openat(at.dirfd, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return WalkError(at.dirfd, parts[i], shown, errno);
    at.hold = ScopedFd(fd);
    at.dirfd = fd;
  }
  at.name = parts.back();
  return at;
}

}  // namespace ssdfeed
