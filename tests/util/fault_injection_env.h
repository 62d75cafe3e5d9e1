// FaultInjectionEnv wraps another Env and, on request, fails chosen calls
// (reads, writes, syncs, locks, mkdir, rename, directory syncs, listings,
// free-space queries) with any Status, and can throw away what a power cut
// would: every byte written since the last Sync() of each file, and every file
// or directory created (or renamed into place) since the last SyncDir() of
// its parent. For tests only: built into ssdfeed_testutil, never into the
// shipped library.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ssdfeed/env.h"

namespace ssdfeed {

class FaultInjectionEnv : public EnvWrapper {
 public:
  enum class Op {
    kRead,
    kWrite,
    kSync,
    kLock,
    kMkdir,
    kRename,
    kSyncDir,
    kList,
    kFsSpace,
    kRemove,
    kMap
  };

  explicit FaultInjectionEnv(Env* base) : EnvWrapper(base), base_(base) {}

  // After `skip` more successful calls of op on files whose path contains
  // path_substr, fail the next `count` calls (count < 0: all later calls).
  void FailAfter(Op op, int skip, int count, Status error, std::string path_substr = "");
  void ClearFaults();
  // Direct (O_DIRECT) writable files are refused with NotSupported, as on a
  // filesystem without O_DIRECT.
  void RefuseDirectWrites(bool on) { refuse_direct_ = on; }
  // Every write call (WriteAt, Append, one MultiWrite) first sleeps this
  // long, as a slow device would: writers then find several chunks queued.
  void DelayWrites(int64_t micros) { write_delay_us_ = micros; }
  // Every write call on a file whose path contains path_substr waits until
  // ReleaseWrites(): a device that has stopped. Unlike a delay, what queues
  // up meanwhile does not depend on how fast the writers run (a sanitizer,
  // a loaded machine), so a test can wait for the queue it needs.
  void HoldWrites(std::string path_substr);
  void ReleaseWrites();
  // Waits (at most timeout_micros) until n write calls are held; false if
  // they were not. A test then knows which writes the device has taken.
  bool WaitForHeldWrites(int n, int64_t timeout_micros);

  // Like a power cut: truncates every file written through this Env to its
  // size at its last successful Sync() (0 if never synced), then deletes the
  // files and directories whose creation was not made durable by a SyncDir()
  // of their parent.
  Status DropUnsyncedData();

  // Number of successful calls so far, per op.
  int Count(Op op) const;

  // Env: only what may fail or must be tracked; EnvWrapper forwards the rest.
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& o = {}) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const WritableFileOptions& o = {}) override;
  Status GetChildren(const std::string& d, std::vector<std::string>* n) override;
  Status CreateDir(const std::string& p, uint32_t m = 0700) override;
  Status RemoveFile(const std::string& p) override;
  Status RemoveDir(const std::string& p) override;
  Status RenameFile(const std::string& f, const std::string& t) override;
  Status SyncDir(const std::string& d) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& p, bool ex, bool bl,
                                             uint32_t mode = 0600) override;
  Status FsSpace(const std::string& p, uint64_t* f, uint64_t* t) override;
  Result<std::unique_ptr<MappedFile>> NewMappedFile(const std::string& p, uint64_t size,
                                                    const MappedFileOptions& o = {}) override;
  Status RemoveDirAndFiles(const std::string& d) override;

  // Called by the wrapped files.
  Status MaybeFail(Op op, const std::string& path);
  void NoteSynced(const std::string& path, uint64_t size);
  void NoteWritten(const std::string& path, uint64_t size);
  void MaybeDelayWrite(const std::string& path);

 private:
  struct Rule {
    int skip = 0;
    int count = 0;
    Status error;
    std::string path_substr;
  };
  Env* base_;
  mutable std::mutex mu_;
  std::map<Op, Rule> rules_;
  std::map<Op, int> counts_;
  std::atomic<bool> refuse_direct_{false};
  std::atomic<int64_t> write_delay_us_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  std::string hold_path_;  // non-empty: writes to matching files wait
  bool holding_ = false;
  int held_ = 0;  // write calls waiting for ReleaseWrites
  void NoteCreated(const std::string& path, bool is_dir);
  void Forget(const std::string& path);

  std::map<std::string, uint64_t> synced_size_;  // every file written through us
  // Created (or renamed into place) since the last SyncDir of the parent.
  std::map<std::string, bool> undurable_names_;  // path -> is_dir
};

// Wraps the files it opens to record each batch (StartMultiRead,
// MultiWrite) that reaches them, then forwards it. Under a
// FaultInjectionEnv it shows the batches reach the POSIX files whole, where
// io_uring takes them.
class BatchRecordingEnv : public EnvWrapper {
 public:
  explicit BatchRecordingEnv(Env* base) : EnvWrapper(base) {}
  struct Batch {
    bool write = false;
    size_t n = 0;
  };
  std::vector<Batch> batches() const;
  void Note(Batch b);  // called by its files

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& o = {}) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const WritableFileOptions& o = {}) override;

 private:
  mutable std::mutex mu_;
  std::vector<Batch> batches_;
};

}  // namespace ssdfeed
