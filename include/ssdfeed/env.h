// Env: the core's one seam to the outside world (files, mapped files,
// directory listings, locks, clocks, threads, warnings), so tests can replace
// any of it (fault injection, dropped unsynced writes, a fake clock, a
// captured log) and the cache and sources never call the OS directly.
// Modelled on leveldb's Env.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ssdfeed/status.h"

namespace ssdfeed {

struct FileInfo {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool is_dir = false;
  bool is_symlink = false;  // only from Lstat
  bool is_regular = false;  // a plain file (not a FIFO, socket, device, link or dir)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = 0;  // permission bits incl. setgid / sticky (07777)
  // With size and mtime, what a source's identity holds of a local file: a
  // rewrite in place that keeps size and mtime (`cp -p`, `rsync -t`) still
  // changes ctime, and a replacement by rename changes the inode.
  uint64_t inode = 0;
  int64_t ctime_ns = 0;
};

class RandomAccessFile;
class WritableFile;

// One read of RandomAccessFile::StartMultiRead or Env::StartReads.
struct ReadRequest {
  // The file to read, for Env::StartReads; a file's own StartMultiRead
  // reads itself and ignores this.
  const RandomAccessFile* file = nullptr;
  uint64_t offset = 0;
  size_t n = 0;
  char* scratch = nullptr;
  size_t got = 0;  // out: bytes read (< n only at end of file)
  Status status;   // out
};

// Reads started by StartMultiRead or Env::StartReads. Wait() returns once
// every one is done (each request's got and status set); the destructor
// waits too, so the buffers are never written after it.
class PendingReads {
 public:
  virtual ~PendingReads() = default;
  virtual void Wait() = 0;
};

// One write of WritableFile::MultiWrite or Env::WriteMany: WriteAt(offset,
// data, n) on the file.
struct WriteRequest {
  // The file to write, for Env::WriteMany; a file's own MultiWrite writes
  // itself and ignores this.
  WritableFile* file = nullptr;
  uint64_t offset = 0;
  const char* data = nullptr;
  size_t n = 0;
  Status status;  // out
};

// Positional reads; safe to call from many threads at once.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into scratch; *got < n only at end of file.
  virtual Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const = 0;
  // Starts n reads of this file, as many in flight at once as the file can
  // (a POSIX file: io_uring, so direct reads keep the device's queue full),
  // and returns while they run; reqs must live until Wait. Each request
  // gets its own status. A wrapper file overrides it to hand the reads its
  // target's own StartMultiRead, as rocksdb's FSRandomAccessFile::MultiRead.
  // Default: one Read after another, done on return.
  virtual std::unique_ptr<PendingReads> StartMultiRead(ReadRequest* reqs, size_t n) const;
  void MultiRead(ReadRequest* reqs, size_t n) const { StartMultiRead(reqs, n)->Wait(); }
  virtual Result<uint64_t> Size() const = 0;
  virtual const std::string& path() const = 0;
};

// Appends (or, on a direct file, positional writes). Data is durable only
// after Sync() returns OK.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(const void* data, size_t n) = 0;
  // Writes n bytes at offset, extending the file if it ends before. On a
  // file opened with WritableFileOptions::direct, offset, n and data must be
  // multiples of kDirectIoAlignment. Default: NotSupported.
  virtual Status WriteAt(uint64_t offset, const void* data, size_t n);
  // Does n WriteAt calls on this file, as many in flight at once as it can
  // (a direct POSIX file: io_uring), and returns when all are done, each
  // request with its own status. Not on a thread with reads still in
  // flight (a POSIX file's ring is the thread's). Default: one WriteAt
  // after another.
  virtual void MultiWrite(WriteRequest* reqs, size_t n);
  // fdatasync: the data and the size, not every inode field.
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  virtual uint64_t Size() const = 0;  // end of what was written (incl. existing)
  virtual const std::string& path() const = 0;
};

// An advisory whole-file lock (flock); released when the object dies.
class FileLock {
 public:
  virtual ~FileLock() = default;
  // The locked file's inode (0 if unknown): lets a caller check that the
  // path still names the file it locked.
  virtual uint64_t inode() const { return 0; }
};

// A file mapped shared into memory (claims, stats blocks): stores through
// data() reach every process mapping the same file. Unmapped and closed
// (releasing any Lock) when the object dies.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  // The mapping; nullptr when size() is 0.
  virtual uint8_t* data() const = 0;
  // Bytes mapped: what was asked for, or a read-only file's size if shorter.
  virtual uint64_t size() const = 0;
  // Writes the mapping's dirty pages to the file (msync).
  virtual Status Sync() = 0;
  // flock(LOCK_EX or LOCK_SH) on this file's own descriptor, held until the
  // object dies. A non-blocking lock held elsewhere gives Busy.
  virtual Status Lock(bool exclusive, bool blocking) = 0;
  virtual const std::string& path() const = 0;
};

struct MappedFileOptions {
  // Map read-write (false: read-only, and the file must exist). Default true.
  bool writable = true;
  // Create the file if missing (writable only). Default true.
  bool create = true;
  // Fail with an error if the file exists (O_EXCL). Default false.
  bool exclusive = false;
  // Permission bits a new file gets exactly, whatever the umask (also set
  // on an existing file we own). Default 0600.
  uint32_t mode = 0600;
};

// Where the core's warnings go. Log must be safe from many threads at once.
class Logger {
 public:
  enum class Level { kInfo, kWarning };
  virtual ~Logger() = default;
  // msg is one line without the "ssdfeed: warning: " prefix or a newline.
  virtual void Log(Level level, const std::string& msg) = 0;
};

struct RandomAccessFileOptions {
  // Refuse a symlink in the last path component (O_NOFOLLOW). Default true:
  // the cache root's rule, so nothing planted there is read through a link.
  // Sources pass false: a dataset assembled from symlinked images is normal.
  bool no_follow = true;
  // Bypass the page cache (O_DIRECT): every Read's offset, length and buffer
  // must then be multiples of kDirectIoAlignment. NotSupported where the
  // filesystem refuses it (tmpfs). Default false.
  bool direct = false;
  // Where warnings raised using the file go (io_uring refused); outlives the
  // file. Null: the opening Env's GetLogger(). EnvWrapper fills in its own, so
  // the innermost Env's file still warns through the outermost's logger.
  Logger* logger = nullptr;
  // Non-empty: the file opened must lie inside this directory (a canonical
  // path, as RealPath gives it) with every symlink resolved, else
  // InvalidArgument naming the path and where it leads. Checked on the
  // file actually opened, so a link swapped in after a source listed its
  // files is refused too. A source's ROOT: a writer of a shared dataset
  // folder must not make a reader copy its own files into the cache.
  // Default empty: no check.
  std::string beneath;
};

// What offsets, lengths and buffers of direct reads are aligned to: the
// largest logical block size in use (4 KiB), so any device accepts them.
constexpr size_t kDirectIoAlignment = 4096;

struct WritableFileOptions {
  // Truncate an existing file (false: append to it). Default false.
  bool truncate = false;
  // Permission bits for a new file. Default 0600: no group or world access.
  uint32_t mode = 0600;
  // Bypass the page cache (O_DIRECT) and write only with WriteAt (Append is
  // then refused). NotSupported where the filesystem refuses it (tmpfs).
  // Default false.
  bool direct = false;
  // As RandomAccessFileOptions::logger.
  Logger* logger = nullptr;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never deleted.
  static Env* Default();

  // Opens only regular files ("<path>: not a regular file" otherwise) and
  // never block (a FIFO planted in a cache entry fails at once). Writable
  // files never follow a symlink in the last path component; readable ones
  // only when opts.no_follow is false.
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& opts = {}) = 0;
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& opts = {}) = 0;

  virtual Status GetChildren(const std::string& dir, std::vector<std::string>* names) = 0;
  virtual Result<FileInfo> Stat(const std::string& path) = 0;   // follows links
  virtual Result<FileInfo> Lstat(const std::string& path) = 0;  // does not
  // The canonical absolute path of path: every symlink, "." and ".."
  // resolved (realpath(3)); an error if a component is missing.
  virtual Result<std::string> RealPath(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Creates one directory level; OK if it already exists as a directory. A new
  // directory gets exactly `mode` (setgid included), whatever the umask.
  virtual Status CreateDir(const std::string& path, uint32_t mode = 0700) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status RemoveDir(const std::string& path) = 0;
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Makes a rename or create inside dir durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;

  // flock(LOCK_EX or LOCK_SH) on path, created with exactly `mode` if absent
  // (never through a symlink; a non-regular file is refused, never opened
  // blocking). A non-blocking lock held elsewhere gives Busy.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive,
                                                     bool blocking, uint32_t mode = 0600) = 0;

  // Bytes free to unprivileged users on the filesystem holding path, and its size.
  virtual Status FsSpace(const std::string& path, uint64_t* free_bytes, uint64_t* total) = 0;

  // Maps `size` bytes of path shared. Never follows a symlink in the last
  // component, refuses anything but a regular file, never blocks on open. A
  // writable file is first allocated to at least `size` bytes (every block:
  // a store into a sparse mapping on a full disk would be SIGBUS, not an
  // error); a read-only one maps min(size, its size).
  virtual Result<std::unique_ptr<MappedFile>> NewMappedFile(const std::string& path, uint64_t size,
                                                            const MappedFileOptions& opts = {}) = 0;

  // Wall-clock time (for timestamps stored in files).
  virtual int64_t NowMicros() = 0;
  // A monotonic clock for timeouts and intervals; its epoch is arbitrary.
  virtual int64_t MonotonicMicros() = 0;
  virtual void SleepForMicroseconds(int64_t micros) = 0;

  // Starts a thread running fn; the caller joins it.
  virtual std::thread StartThread(std::function<void()> fn) = 0;

  // Where the core's warnings go; the default writes "ssdfeed: warning: MSG"
  // to stderr. Never null.
  virtual Logger* GetLogger() = 0;
  // Shorthand: GetLogger()->Log(kWarning, msg).
  void Warn(const std::string& msg);

  // Starts n reads of any files and returns while they run; reqs must live
  // until Wait. Each file's own StartMultiRead does its requests, so they
  // are in flight together as far as the files allow, and a wrapped file
  // is read through its wrapper. Each request gets its own status.
  std::unique_ptr<PendingReads> StartReads(ReadRequest* reqs, size_t n);
  void ReadMany(ReadRequest* reqs, size_t n) { StartReads(reqs, n)->Wait(); }
  // Does n positional writes through each file's own MultiWrite and returns
  // when all are done, each request with its own status.
  void WriteMany(WriteRequest* reqs, size_t n);

  // Deletes dir and the files directly inside it through a directory
  // descriptor (openat/unlinkat): never follows a symlink, never descends
  // into a subdirectory (one inside makes it fail). Missing dir: OK.
  virtual Status RemoveDirAndFiles(const std::string& dir) = 0;

  // Confines root: from now on every path at or below it is reached from a
  // descriptor of root (opened O_DIRECTORY | O_NOFOLLOW for each call, so no
  // descriptor is held between calls), one component at a time without
  // following a symlink anywhere below it, and each call runs relative to
  // its directory's descriptor (openat, unlinkat, renameat, fstatat without
  // following), never on a path string. A symlink on the way is an
  // InvalidArgument naming it; Stat does not follow one there either. A root
  // that is itself a symlink is refused. The cache confines its root before
  // it touches anything in it.
  virtual Status ConfineRoot(const std::string& root) = 0;

  // Reads a whole file (convenience over NewRandomAccessFile).
  Status ReadFileToString(const std::string& path, std::string* out,
                          const RandomAccessFileOptions& opts = {});
  // Writes via temp file + rename, so readers see old or new. durable:
  // fdatasync the file before and fsync the directory after the rename
  // (default), so a power cut keeps it too; false for files that only matter
  // while processes live.
  Status WriteFileAtomic(const std::string& path, const std::string& data, uint32_t mode = 0600,
                         bool durable = true);

  // --- The process's surroundings: environment variables and the kernel's
  // pseudo-files (/proc, /sys), so a test can give chosen ones. ---

  // The value of environment variable name; nullopt when unset.
  virtual std::optional<std::string> GetEnvVar(const std::string& name) = 0;
  // Reads a whole file to its end whatever size it reports: /proc and /sys
  // files say 0 (ReadFileToString would read nothing). Follows symlinks
  // (/proc/self is one).
  Status ReadPseudoFile(const std::string& path, std::string* out);
};

// Forwards every call to a target Env: a wrapper (fault injection, a fake
// clock, a captured log) derives from it and overrides only what it changes,
// as leveldb's EnvWrapper. A wrapper that wraps the files it opens keeps
// batches whole by overriding its files' StartMultiRead and MultiWrite to
// hand them to the files it wraps (the Env's StartReads and WriteMany are
// not virtual: they only group a batch by file).
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  // Both hand the target this Env's logger for the file's warnings.
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& opts = {}) override {
    RandomAccessFileOptions o = opts;
    if (o.logger == nullptr) o.logger = GetLogger();
    return target_->NewRandomAccessFile(path, o);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& opts = {}) override {
    WritableFileOptions o = opts;
    if (o.logger == nullptr) o.logger = GetLogger();
    return target_->NewWritableFile(path, o);
  }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    return target_->GetChildren(dir, names);
  }
  Result<FileInfo> Stat(const std::string& path) override { return target_->Stat(path); }
  Result<FileInfo> Lstat(const std::string& path) override { return target_->Lstat(path); }
  Result<std::string> RealPath(const std::string& path) override { return target_->RealPath(path); }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  Status CreateDir(const std::string& path, uint32_t mode = 0700) override {
    return target_->CreateDir(path, mode);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status RemoveDir(const std::string& path) override { return target_->RemoveDir(path); }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    return target_->TruncateFile(path, size);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive, bool blocking,
                                             uint32_t mode = 0600) override {
    return target_->LockFile(path, exclusive, blocking, mode);
  }
  Status FsSpace(const std::string& path, uint64_t* free_bytes, uint64_t* total) override {
    return target_->FsSpace(path, free_bytes, total);
  }
  Result<std::unique_ptr<MappedFile>> NewMappedFile(const std::string& path, uint64_t size,
                                                    const MappedFileOptions& opts = {}) override {
    return target_->NewMappedFile(path, size, opts);
  }
  int64_t NowMicros() override { return target_->NowMicros(); }
  int64_t MonotonicMicros() override { return target_->MonotonicMicros(); }
  void SleepForMicroseconds(int64_t micros) override { target_->SleepForMicroseconds(micros); }
  std::thread StartThread(std::function<void()> fn) override {
    return target_->StartThread(std::move(fn));
  }
  Logger* GetLogger() override { return target_->GetLogger(); }
  Status RemoveDirAndFiles(const std::string& dir) override {
    return target_->RemoveDirAndFiles(dir);
  }
  Status ConfineRoot(const std::string& root) override { return target_->ConfineRoot(root); }

  std::optional<std::string> GetEnvVar(const std::string& name) override {
    return target_->GetEnvVar(name);
  }

 private:
  Env* target_;
};

// Creates every missing directory of path (mkdir -p).
Status CreateDirs(Env* env, const std::string& path, uint32_t mode = 0700);

std::string JoinPath(const std::string& a, const std::string& b);
std::string Basename(const std::string& path);
std::string Dirname(const std::string& path);

}  // namespace ssdfeed
