// The POSIX Env: pread/write/fdatasync/flock/mmap on plain file descriptors.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifdef SSDFEED_HAVE_URING
#include <liburing.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/confined_roots.h"
#include "ssdfeed/env.h"

namespace ssdfeed {

namespace {

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, Logger* logger)
      : path_(std::move(path)), fd_(fd), logger_(logger) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *got = done;
        return Status::FromErrno(errno, "read " + path_);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    *got = done;
    return Status::OK();
  }
  // io_uring on this thread's ring where the kernel allows it, else Read.
  std::unique_ptr<PendingReads> StartMultiRead(ReadRequest* reqs, size_t n) const override;

  Result<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat " + path_);
    return static_cast<uint64_t>(st.st_size);
  }
  const std::string& path() const override { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_;
  Logger* logger_;  // for warnings (io_uring refused): the opener's
};

#ifdef SSDFEED_HAVE_URING
// One ring per thread (loader workers each keep their own reads in flight);
// made on first use, torn down when the thread ends. Null where the kernel
// or a seccomp policy refuses io_uring: reads then go one after another.
constexpr unsigned kRingDepth = 128;

// The first refusal warns through log: the logger of the Env the caller
// opened its files through (a wrapper's, not this Env's stderr one).
io_uring* ThreadRing(Logger* log) {
  struct Ring {
    io_uring ring;
    bool ok = false;
    explicit Ring(Logger* log) {
      int rc = io_uring_queue_init(kRingDepth, &ring, 0);
      ok = rc == 0;
      static std::atomic<bool> warned{false};
      if (!ok && !warned.exchange(true))
        log->Log(Logger::Level::kWarning,
                 std::string("io_uring unavailable (") + std::strerror(-rc) +
                     "): direct cache reads go one at a time, not the device's queue depth");
    }
    ~Ring() {
      if (ok) io_uring_queue_exit(&ring);
    }
  };
  thread_local Ring r(log);
  return r.ok ? &r.ring : nullptr;
}

// A batch of reads on this thread's ring. Several may be in flight at once;
// a completion found while waiting for one batch is credited to its own.
class UringReads final : public PendingReads {
 public:
  UringReads(io_uring* ring, const PosixRandomAccessFile* file, ReadRequest* reqs, size_t n)
      : ring_(ring), file_(file), reqs_(reqs), tags_(n), left_(n) {
    for (size_t i = 0; i < n; ++i) {
      tags_[i] = {this, i};
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) {  // more in flight than the ring holds: this one now
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
      }
      if (sqe == nullptr) {
        Finish(i, 0);
        continue;
      }
      io_uring_prep_read(sqe, file_->fd(), reqs[i].scratch, static_cast<unsigned>(reqs[i].n),
                         reqs[i].offset);
      io_uring_sqe_set_data(sqe, &tags_[i]);
    }
    io_uring_submit(ring);
  }
  ~UringReads() override { Wait(); }

  void Wait() override {
    while (left_ > 0) {
      // Any a refused submit left queued (-EBUSY, -EAGAIN, -ENOMEM): waiting
      // alone would never send them, and with nothing else in flight on
      // this ring would never end. So while some stay queued, the wait is
      // short and the submit is tried again.
      if (io_uring_sq_ready(ring_) > 0) io_uring_submit(ring_);
      io_uring_cqe* cqe = nullptr;
      int w;
      if (io_uring_sq_ready(ring_) > 0) {
        __kernel_timespec retry{0, 1000000};
        w = io_uring_wait_cqe_timeout(ring_, &cqe, &retry);
        if (w == -ETIME) continue;
      } else {
        w = io_uring_wait_cqe(ring_, &cqe);
      }
      if (w == -EINTR) continue;
      if (w != 0) std::abort();  // the kernel lost track of reads into our buffers
      Tag* t = static_cast<Tag*>(io_uring_cqe_get_data(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(ring_, cqe);
      t->owner->Finish(t->i, res);
    }
  }

 private:
  struct Tag {
    UringReads* owner = nullptr;
    size_t i = 0;
  };
  // A short read (end of file, a signal) or EAGAIN is finished with pread,
  // as Read would; any other error comes back from pread too.
  void Finish(size_t i, int res) {
    ReadRequest& r = reqs_[i];
    --left_;
    if (res >= 0 && static_cast<size_t>(res) == r.n) {
      r.got = r.n;
      r.status = Status::OK();
      return;
    }
    // Resume at an aligned point: on an O_DIRECT file an unaligned pread is
    // EINVAL once a writer has appended past the old end of file.
    size_t done = res > 0 ? static_cast<size_t>(res) & ~(kDirectIoAlignment - 1) : 0, more = 0;
    r.status = file_->Read(r.offset + done, r.n - done, r.scratch + done, &more);
    r.got = done + more;
  }

  io_uring* ring_;
  const PosixRandomAccessFile* file_;
  ReadRequest* reqs_;
  std::vector<Tag> tags_;
  size_t left_;
};
#endif

std::unique_ptr<PendingReads> PosixRandomAccessFile::StartMultiRead(ReadRequest* reqs,
                                                                    size_t n) const {
  for (size_t i = 0; i < n; ++i) reqs[i].got = 0;
#ifdef SSDFEED_HAVE_URING
  io_uring* ring = n > 0 ? ThreadRing(logger_) : nullptr;
  if (ring != nullptr) return std::make_unique<UringReads>(ring, this, reqs, n);
#endif
  return RandomAccessFile::StartMultiRead(reqs, n);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t size, bool direct, Logger* logger)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct), logger_(logger) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(const void* data, size_t n) override {
    if (direct_) return Status::InvalidArgument(path_ + ": opened for direct writes: WriteAt only");
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, "write " + path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      size_ += static_cast<uint64_t>(w);
    }
    return Status::OK();
  }
  Status WriteAt(uint64_t offset, const void* data, size_t n) override {
    // Not on an O_APPEND file: Linux would append, whatever the offset.
    if (!direct_) return Status::InvalidArgument(path_ + ": positional writes need a direct file");
    const char* p = static_cast<const char*>(data);
    uint64_t end = offset + n;
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w == 0) return Status::IOError("write " + path_ + ": no progress");
      if (w < 0) {
        if (errno == EINTR) continue;
        // Opened with O_DIRECT but refused at the write (some FUSE and
        // network filesystems).
        if (errno == EINVAL) return Status::NotSupported(path_ + ": O_DIRECT writes refused");
        return Status::FromErrno(errno, "write " + path_);
      }
      // A short direct write leaves an aligned remainder (it stops at a
      // block), so resuming keeps the alignment O_DIRECT needs.
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    Extend(end);
    return Status::OK();
  }
  // Records a write that ended at `end` (WriteAt, or io_uring for it).
  void Extend(uint64_t end) {
    uint64_t seen = size_.load(std::memory_order_relaxed);
    while (seen < end && !size_.compare_exchange_weak(seen, end, std::memory_order_acq_rel)) {
    }
  }
  int fd() const { return fd_; }
  // Direct writes together through io_uring where the kernel allows it.
  void MultiWrite(WriteRequest* reqs, size_t n) override;
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, "fdatasync " + path_);
    return Status::OK();
  }
  Status Close() override {
    if (fd_ < 0) return Status::OK();
    int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) return Status::FromErrno(errno, "close " + path_);
    return Status::OK();
  }
  uint64_t Size() const override { return size_.load(std::memory_order_acquire); }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  std::atomic<uint64_t> size_;  // read by a syncing thread while appends go on
  const bool direct_;
  Logger* logger_;  // for warnings (io_uring refused): the opener's
};

#ifdef SSDFEED_HAVE_URING
// Direct writes all in flight on this thread's ring, waited for together. A
// write that comes back short or failed is finished (or failed again, for
// its status) with WriteAt.
void UringWriteMany(io_uring* ring, PosixWritableFile* f, WriteRequest* reqs, size_t n) {
  size_t queued = 0;
  for (size_t i = 0; i < n; ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) {  // no room: this one on its own (never with <= 128 requests)
      reqs[i].status = f->WriteAt(reqs[i].offset, reqs[i].data, reqs[i].n);
      continue;
    }
    io_uring_prep_write(sqe, f->fd(), reqs[i].data, static_cast<unsigned>(reqs[i].n),
                        reqs[i].offset);
    io_uring_sqe_set_data64(sqe, i);
    ++queued;
  }
  size_t in_flight = 0;
  for (size_t done = 0; done < queued;) {
    if (io_uring_sq_ready(ring) > 0) {
      int r = io_uring_submit(ring);
      if (r > 0) in_flight += static_cast<size_t>(r);
      // Refused (ENOMEM, EAGAIN) with nothing in flight: waiting for a
      // completion would never end; try again shortly.
      if (in_flight == 0) {
        ::usleep(1000);
        continue;
      }
    }
    io_uring_cqe* cqe = nullptr;
    int w = io_uring_wait_cqe(ring, &cqe);
    if (w == -EINTR) continue;
    if (w != 0) std::abort();  // the kernel lost track of writes from our buffers
    size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    ++done;
    --in_flight;
    WriteRequest& r = reqs[i];
    if (res >= 0 && static_cast<size_t>(res) == r.n) {
      f->Extend(r.offset + r.n);
      r.status = Status::OK();
      continue;
    }
    size_t ok = res > 0 ? static_cast<size_t>(res) & ~(kDirectIoAlignment - 1) : 0;
    r.status = f->WriteAt(r.offset + ok, r.data + ok, r.n - ok);
  }
}
#endif

void PosixWritableFile::MultiWrite(WriteRequest* reqs, size_t n) {
#ifdef SSDFEED_HAVE_URING
  io_uring* ring = direct_ && n > 1 ? ThreadRing(logger_) : nullptr;
  if (ring != nullptr) return UringWriteMany(ring, this, reqs, n);
#endif
  WritableFile::MultiWrite(reqs, n);
}

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing drops the flock
  uint64_t inode() const override {
    struct stat st;
    return ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }

 private:
  int fd_;
};

Status FlockFd(int fd, bool exclusive, bool blocking, const std::string& path) {
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (blocking ? 0 : LOCK_NB);
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    return Status::FromErrno(errno, "flock " + path);
  }
  return Status::OK();
}

class PosixMappedFile final : public MappedFile {
 public:
  PosixMappedFile(std::string path, int fd, uint8_t* map, uint64_t size)
      : path_(std::move(path)), fd_(fd), map_(map), size_(size) {}
  ~PosixMappedFile() override {
    if (map_ != nullptr) ::munmap(map_, size_);
    ::close(fd_);  // drops any flock
  }
  uint8_t* data() const override { return map_; }
  uint64_t size() const override { return size_; }
  Status Sync() override {
    if (map_ != nullptr && ::msync(map_, size_, MS_SYNC) != 0)
      return Status::FromErrno(errno, "msync " + path_);
    return Status::OK();
  }
  Status Lock(bool exclusive, bool blocking) override {
    return FlockFd(fd_, exclusive, blocking, path_);
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint8_t* map_;
  uint64_t size_;
};

class StderrLogger final : public Logger {
 public:
  void Log(Level level, const std::string& msg) override {
    // One fprintf per line, so lines from many threads never interleave.
    std::fprintf(stderr, "ssdfeed: %s%s\n", level == Level::kWarning ? "warning: " : "",
                 msg.c_str());
  }
};

FileInfo ToInfo(const struct stat& st) {
  FileInfo fi;
  fi.size = static_cast<uint64_t>(st.st_size);
  fi.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  fi.is_dir = S_ISDIR(st.st_mode);
  fi.is_symlink = S_ISLNK(st.st_mode);
  fi.is_regular = S_ISREG(st.st_mode);
  fi.uid = st.st_uid;
  fi.gid = st.st_gid;
  fi.mode = st.st_mode & 07777;
  fi.inode = static_cast<uint64_t>(st.st_ino);
  fi.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec;
  return fi;
}

// open(2) with O_NONBLOCK, so that a FIFO (or device) never blocks the
// caller, then refuses anything but a regular file. O_NONBLOCK has no effect
// on regular files, so it is left set. Returns the fd or an error.
// Inside a cache root, never through a symlink in the last component either.
Result<int> OpenRegular(const AtPath& at, const std::string& path, int flags, uint32_t mode,
                        struct stat* st) {
  if (at.confined) flags |= O_NOFOLLOW;
  int fd = ::openat(at.dirfd, at.name.c_str(), flags | O_NONBLOCK | O_CLOEXEC, mode);
  // ENXIO: a FIFO opened for writing with no reader, or a device.
  if (fd < 0 && errno == ENXIO) return Status::InvalidArgument(path + ": not a regular file");
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  Status s;
  if (::fstat(fd, st) != 0)
    s = Status::FromErrno(errno, "fstat " + path);
  else if (!S_ISREG(st->st_mode))
    s = Status::InvalidArgument(path + ": not a regular file");
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

// realpath(3) as a Result.
Result<std::string> CanonicalPath(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return Status::FromErrno(errno, "realpath " + path);
  std::string out(real);
  std::free(real);
  return out;
}

bool IsInside(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

// RandomAccessFileOptions::beneath for the file opened from path (its
// fstat: opened). The file must
// have a name inside dir with every link resolved: path's canonical form,
// taken after the open, must lie inside dir and still be the file opened
// (same device and inode), so a link swapped in or out around the open is
// caught either way.
Status CheckBeneath(const struct stat& opened, const std::string& path, const std::string& dir) {
  auto real = CanonicalPath(path);
  if (!real.ok()) return real.status();
  if (!IsInside(*real, dir))
    return Status::InvalidArgument(path + ": leads through a symlink to " + *real + ", outside " +
                                   dir + "; not followed out of the source's root");
  struct stat st;
  if (::stat(real->c_str(), &st) != 0 || st.st_dev != opened.st_dev || st.st_ino != opened.st_ino)
    return Status::InvalidArgument(path +
                                   ": changed while it was opened (a symlink swapped in?); "
                                   "not read");
  return Status::OK();
}

// Opens path read-write, creating it if missing, for a file other users
// open at the same moment (a group-shared cache's claims and ledger): a new
// file is made at a temporary name, given its mode, and only then linked
// into place, so nobody finds it with the umask's narrower bits (another
// user's open would fail with EACCES and go on uncoordinated). Where link(2)
// is refused, it is created in place as before.
Result<int> OpenOrCreateShared(const AtPath& at, const std::string& path, uint32_t mode,
                               struct stat* st) {
  static const uint64_t nonce =
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> n{0};
  const int flags = O_RDWR | O_NOFOLLOW;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto fd = OpenRegular(at, path, flags, 0, st);
    if (fd.ok() || !fd.status().IsNotFound()) return fd;
    // In the same directory as path: at.name is its last component (or,
    // outside a confined root, the whole path).
    std::string suffix = ".new." + std::to_string(nonce) + "." + std::to_string(n++);
    AtPath tmp_at;
    tmp_at.dirfd = at.dirfd;
    tmp_at.name = at.name + suffix;
    tmp_at.confined = at.confined;
    SSDFEED_ASSIGN_OR_RETURN(
        int t, OpenRegular(tmp_at, path + suffix, flags | O_CREAT | O_EXCL, mode, st));
    int r = ::fchmod(t, mode) == 0
                ? ::linkat(at.dirfd, tmp_at.name.c_str(), at.dirfd, at.name.c_str(), 0)
                : -1;
    int err = errno;
    ::unlinkat(at.dirfd, tmp_at.name.c_str(), 0);
    if (r == 0) {
      if (::fstat(t, st) == 0) return t;
      err = errno;
    }
    ::close(t);
    if (r == 0) return Status::FromErrno(err, "fstat " + path);
    if (err == EEXIST) continue;  // another opener linked its file first: open that
    if (err == EPERM || err == ENOSYS || err == EOPNOTSUPP || err == EXDEV)
      return OpenRegular(at, path, flags | O_CREAT, mode, st);
    return Status::FromErrno(err, "create " + path);
  }
  return Status::Busy(path + ": keeps being created and removed while opening");
}

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& o) override {
    struct stat st;
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    int flags = O_RDONLY | (o.no_follow ? O_NOFOLLOW : 0) | (o.direct ? O_DIRECT : 0);
    auto fd = OpenRegular(at, path, flags, 0, &st);
    if (!fd.ok() && o.direct) {
      // tmpfs and some network filesystems refuse O_DIRECT (EINVAL): tell
      // that apart from a missing or planted file by opening it plainly.
      auto plain = OpenRegular(at, path, flags & ~O_DIRECT, 0, &st);
      if (!plain.ok()) return plain.status();
      ::close(*plain);
      return Status::NotSupported(path + ": the filesystem refuses O_DIRECT");
    }
    SSDFEED_RETURN_IF_ERROR(fd.status());
    if (!o.beneath.empty()) {
      Status inside = CheckBeneath(st, path, o.beneath);
      if (!inside.ok()) {
        ::close(*fd);
        return inside;
      }
    }
    // O_NONBLOCK only kept a FIFO from blocking the open; io_uring would
    // return EAGAIN for a non-blocking file instead of waiting for the disk.
    if (o.direct) ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, *fd, o.logger ? o.logger : GetLogger()));
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const WritableFileOptions& o) override {
    // O_TRUNC is not used: a FIFO or device must be refused before anything
    // is done to it, so truncation waits for the regular-file check.
    // A direct file is written at explicit offsets: O_APPEND would move them.
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | (o.truncate || o.direct ? 0 : O_APPEND) |
                (o.direct ? O_DIRECT : 0);
    struct stat st;
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    auto opened = OpenRegular(at, path, flags, o.mode, &st);
    if (!opened.ok() && o.direct) {
      // As for reads: tell a filesystem that refuses O_DIRECT (tmpfs) apart
      // from a path that cannot be opened at all.
      auto plain = OpenRegular(at, path, flags & ~O_DIRECT, o.mode, &st);
      if (!plain.ok()) return plain.status();
      ::close(*plain);
      return Status::NotSupported(path + ": the filesystem refuses O_DIRECT");
    }
    SSDFEED_ASSIGN_OR_RETURN(int fd, std::move(opened));
    // O_NONBLOCK (kept by OpenRegular) must not turn a direct write into EAGAIN.
    if (o.direct) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (o.truncate && st.st_size != 0 && ::ftruncate(fd, 0) != 0) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "truncate " + path);
    }
    // The umask must not narrow a group-shared cache's 0660 to 0640.
    if ((st.st_mode & 07777) != o.mode && st.st_uid == ::geteuid() && ::fchmod(fd, o.mode) != 0) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "chmod " + path);
    }
    uint64_t size = o.truncate ? 0 : static_cast<uint64_t>(st.st_size);
    return std::unique_ptr<WritableFile>(
        new PosixWritableFile(path, fd, size, o.direct, o.logger ? o.logger : GetLogger()));
  }

  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(dir));
    int fd = OpenDir(at, O_RDONLY);
    if (fd < 0) return Status::FromErrno(errno, "opendir " + dir);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "opendir " + dir);
    }
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names->emplace_back(e->d_name);
    }
    ::closedir(d);
    return Status::OK();
  }
  Result<FileInfo> Stat(const std::string& path) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    struct stat st;
    // Inside a cache root a link is never followed, by Stat either.
    int flags = at.confined ? AT_SYMLINK_NOFOLLOW : 0;
    if (::fstatat(at.dirfd, at.name.c_str(), &st, flags) != 0)
      return Status::FromErrno(errno, "stat " + path);
    return ToInfo(st);
  }
  Result<std::string> RealPath(const std::string& path) override { return CanonicalPath(path); }
  Result<FileInfo> Lstat(const std::string& path) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    struct stat st;
    if (::fstatat(at.dirfd, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return Status::FromErrno(errno, "lstat " + path);
    return ToInfo(st);
  }
  bool FileExists(const std::string& path) override {
    auto at = roots_.Resolve(path);
    if (!at.ok()) return false;
    if (!at->confined) return ::access(path.c_str(), F_OK) == 0;
    struct stat st;
    return ::fstatat(at->dirfd, at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }
  Status CreateDir(const std::string& path, uint32_t mode) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    if (::mkdirat(at.dirfd, at.name.c_str(), mode) == 0) {
      // mkdir applies the umask and drops setgid; group sharing needs both
      // exact. fchmod on the directory we open, never through a swapped link.
      int fd = ::openat(at.dirfd, at.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno(errno, "open " + path);
      int r = ::fchmod(fd, mode);
      int e = errno;
      ::close(fd);
      if (r != 0) return Status::FromErrno(e, "chmod " + path);
      return Status::OK();
    }
    if (errno != EEXIST) return Status::FromErrno(errno, "mkdir " + path);
    struct stat st;
    if (::fstatat(at.dirfd, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
      return Status::OK();
    return Status::IOError("mkdir " + path + ": exists and is not a directory");
  }
  Status RemoveFile(const std::string& path) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    if (::unlinkat(at.dirfd, at.name.c_str(), 0) != 0)
      return Status::FromErrno(errno, "unlink " + path);
    return Status::OK();
  }
  Status RemoveDir(const std::string& path) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    if (::unlinkat(at.dirfd, at.name.c_str(), AT_REMOVEDIR) != 0)
      return Status::FromErrno(errno, "rmdir " + path);
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath a, roots_.Resolve(from));
    SSDFEED_ASSIGN_OR_RETURN(AtPath b, roots_.Resolve(to));
    if (::renameat(a.dirfd, a.name.c_str(), b.dirfd, b.name.c_str()) != 0)
      return Status::FromErrno(errno, "rename " + from + " -> " + to);
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(dir));
    int fd = OpenDir(at, O_RDONLY);
    if (fd < 0) return Status::FromErrno(errno, "open " + dir);
    int r = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (r != 0) return Status::FromErrno(e, "fsync " + dir);
    return Status::OK();
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    // Never through a link: a planted symlink must not truncate a file outside.
    int fd = ::openat(at.dirfd, at.name.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(errno, "open " + path);
    struct stat st;
    Status s;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
      s = Status::InvalidArgument(path + ": not a regular file");
    else if (::ftruncate(fd, static_cast<off_t>(size)) != 0)
      s = Status::FromErrno(errno, "truncate " + path);
    ::close(fd);
    return s;
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive, bool blocking,
                                             uint32_t mode) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    // O_NONBLOCK: a FIFO planted in the cache must not hang the open.
    int base = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    bool created = true;
    const char* name = at.name.c_str();
    int fd = ::openat(at.dirfd, name, O_RDWR | O_CREAT | O_EXCL | base, mode);
    if (fd < 0 && errno == EEXIST) {
      created = false;
      fd = ::openat(at.dirfd, name, O_RDWR | base);
      if (fd < 0 && errno == EACCES) fd = ::openat(at.dirfd, name, O_RDONLY | base);  // not ours
    }
    if (fd < 0) return Status::FromErrno(errno, "open " + path);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::IOError(path + ": not a regular file; refusing to use it as a lock");
    }
    if (created && ::fchmod(fd, mode) != 0) {  // exact mode, whatever the umask
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "chmod " + path);
    }
    if (Status s = FlockFd(fd, exclusive, blocking, path); !s.ok()) {
      ::close(fd);
      return s;
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  Status RemoveDirAndFiles(const std::string& dir) override {
    auto resolved = roots_.Resolve(dir);
    if (!resolved.ok()) return resolved.status().IsNotFound() ? Status::OK() : resolved.status();
    const AtPath& at = *resolved;
    int dfd = ::openat(at.dirfd, at.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return errno == ENOENT ? Status::OK() : Status::FromErrno(errno, "open " + dir);
    DIR* d = ::fdopendir(::dup(dfd));
    if (d == nullptr) {
      int e = errno;
      ::close(dfd);
      return Status::FromErrno(e, "opendir " + dir);
    }
    Status s;
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      // unlinkat without AT_REMOVEDIR never follows a link and refuses a directory.
      if (::unlinkat(dfd, e->d_name, 0) != 0 && errno != ENOENT && s.ok())
        s = Status::FromErrno(errno, "unlink " + JoinPath(dir, e->d_name));
    }
    ::closedir(d);
    ::close(dfd);
    if (!s.ok()) return s;
    if (::unlinkat(at.dirfd, at.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      return Status::FromErrno(errno, "rmdir " + dir);
    return Status::OK();
  }

  Status FsSpace(const std::string& path, uint64_t* free_bytes, uint64_t* total) override {
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    int fd =
        ::openat(at.dirfd, at.name.c_str(), O_PATH | O_CLOEXEC | (at.confined ? O_NOFOLLOW : 0));
    if (fd < 0) return Status::FromErrno(errno, "open " + path);
    struct statvfs sv;
    int r = ::fstatvfs(fd, &sv);
    int e = errno;
    ::close(fd);
    if (r != 0) return Status::FromErrno(e, "statvfs " + path);
    *free_bytes = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
    *total = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
    return Status::OK();
  }

  Result<std::unique_ptr<MappedFile>> NewMappedFile(const std::string& path, uint64_t size,
                                                    const MappedFileOptions& o) override {
    int flags = O_NOFOLLOW | (o.writable ? O_RDWR : O_RDONLY);
    if (o.writable && o.create) flags |= O_CREAT | (o.exclusive ? O_EXCL : 0);
    struct stat st;
    SSDFEED_ASSIGN_OR_RETURN(AtPath at, roots_.Resolve(path));
    bool shared = o.writable && o.create && !o.exclusive;
    SSDFEED_ASSIGN_OR_RETURN(int fd, shared ? OpenOrCreateShared(at, path, o.mode, &st)
                                            : OpenRegular(at, path, flags, o.mode, &st));
    auto fail = [&](int err, const std::string& what) {
      ::close(fd);
      return Status::FromErrno(err, what + " " + path);
    };
    // The umask must not narrow a group-shared cache's 0660 to 0640.
    if (o.writable && st.st_uid == ::geteuid() && (st.st_mode & 07777) != o.mode &&
        ::fchmod(fd, o.mode) != 0)
      return fail(errno, "chmod");
    if (o.writable) {
      // A no-op where already allocated.
      if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0)
        return fail(err, "allocate");
    } else {
      size = std::min<uint64_t>(size, static_cast<uint64_t>(st.st_size));
    }
    uint8_t* map = nullptr;
    if (size > 0) {
      int prot = PROT_READ | (o.writable ? PROT_WRITE : 0);
      void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) return fail(errno, "mmap");
      map = static_cast<uint8_t*>(p);
    }
    return std::unique_ptr<MappedFile>(new PosixMappedFile(path, fd, map, size));
  }

  int64_t NowMicros() override {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  }
  int64_t MonotonicMicros() override {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }
  void SleepForMicroseconds(int64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
  std::thread StartThread(std::function<void()> fn) override { return std::thread(std::move(fn)); }
  Logger* GetLogger() override { return &logger_; }
  std::optional<std::string> GetEnvVar(const std::string& name) override {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  }

  Status ConfineRoot(const std::string& root) override { return roots_.Add(root); }

 private:
  // The directory at itself names, opened with `flags` | O_DIRECTORY; inside
  // a cache root never through a symlink. -1 and errno on failure.
  static int OpenDir(const AtPath& at, int flags) {
    flags |= O_DIRECTORY | O_CLOEXEC | (at.confined ? O_NOFOLLOW : 0);
    return ::openat(at.dirfd, at.name.c_str(), flags);
  }

  StderrLogger logger_;
  ConfinedRoots roots_;
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();
  return env;
}

}  // namespace ssdfeed
