// Pieces shared by the file-backed sources: the list of input files with
// what stat says of them, the identity digest over it, and lazily opened
// read handles (pread is thread-safe, so one handle per file serves all).
// Origin files are opened through symlinks: no-follow is the cache root's
// rule, and datasets are often assembled from links.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ssdfeed/env.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

struct InputFile {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  int64_t ctime_ns = 0;
  std::string etag;  // objects in a bucket: what identifies their content
};

// Stats path (through symlinks); a directory or other non-regular file is
// InvalidArgument naming it.
Result<InputFile> StatInput(Env* env, const std::string& path);
// StatInput of every path, in order.
Result<std::vector<InputFile>> StatInputs(Env* env, const std::vector<std::string>& paths);

// The origin's read options: symlinks are followed.
RandomAccessFileOptions OriginReadOptions();

// Hex digest of kind, every file's path/size/mtime/inode/ctime and extra
// (options that change what is read, and the folder source's label map).
std::string IdentityDigest(const std::string& kind, const std::vector<InputFile>& files,
                           const std::string& extra);

// Samples about to be read (Source::PlanReads) are fetched in runs: the
// next sample joins a run when at most kCoalesceGapBytes lie between them
// (fetching a small gap costs less than another request) and the run stays
// within kCoalesceMaxBytes.
constexpr uint64_t kCoalesceGapBytes = uint64_t{64} << 10;
constexpr uint64_t kCoalesceMaxBytes = uint64_t{8} << 20;

class ShardFiles {
 public:
  // How file i is opened when it is not a local file (objects in a bucket).
  using Opener = std::function<Result<std::unique_ptr<RandomAccessFile>>(size_t)>;
  ShardFiles(Env* env, std::vector<InputFile> files);
  // release(i): every sample of file i has been read once; what was kept
  // for those reads (a spool of the streamed shard) may go.
  // A run of bytes [begin, end) of a file that samples about to be read
  // lie in (Source::PlanReads).
  struct Run {
    uint64_t begin = 0, end = 0;
  };
  struct Hooks {
    std::function<void(size_t)> release;
    std::function<void(size_t, std::vector<Run>)> plan;  // file i's runs, sorted
  };
  ShardFiles(std::vector<InputFile> files, Opener open, Hooks hooks = {});
  const std::vector<InputFile>& files() const { return files_; }
  // The open handle of file i, opened on first use.
  Result<const RandomAccessFile*> Get(size_t i) const;
  void Release(size_t i) const {
    if (hooks_.release) hooks_.release(i);
  }
  bool plans() const { return static_cast<bool>(hooks_.plan); }
  void Plan(size_t i, std::vector<Run> runs) const {
    if (hooks_.plan) hooks_.plan(i, std::move(runs));
  }
  // The same files, none opened yet.
  ShardFiles Clone() const {
    return env_ ? ShardFiles(env_, files_) : ShardFiles(files_, opener_, hooks_);
  }

 private:
  Env* env_;
  Opener opener_;
  Hooks hooks_;
  std::vector<InputFile> files_;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
  mutable std::vector<std::unique_ptr<RandomAccessFile>> open_;
};

// What TFRecord and tar sources have in common: shard files, the identity
// over them, the URI and the count of parts skipped while opening.
class ShardedSource : public Source {
 public:
  ShardedSource(std::string uri, ShardFiles files, size_t skipped, const std::string& kind,
                const std::string& extra)
      : uri_(std::move(uri)),
        files_(std::move(files)),
        skipped_(skipped),
        identity_(IdentityDigest(kind, files_.files(), extra)) {}
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  size_t skipped() const override { return skipped_; }
  // Groups the samples' byte spans into runs per shard (ShardFiles::Plan).
  void PlanReads(const std::vector<uint64_t>& ids) const override;

 protected:
  // The bytes sample id is read from: file, [begin, end).
  virtual void Span(size_t id, uint32_t* file, uint64_t* begin, uint64_t* end) const = 0;
  const std::string& file_path(size_t i) const { return files_.files()[i].path; }
  const ShardFiles& files() const { return files_; }
  // file_of[id]: the shard of each sample. Then Read calls ReadOnce, and
  // once every sample of a shard has been read, ShardFiles::Release(shard).
  void TrackReads(const std::vector<uint32_t>& file_of);
  void ReadOnce(size_t id) const;

 private:
  std::string uri_;
  ShardFiles files_;
  size_t skipped_;
  std::string identity_;
  std::vector<uint32_t> file_of_;
  std::unique_ptr<std::atomic<bool>[]> read_;        // per sample: read once
  std::unique_ptr<std::atomic<uint64_t>[]> unread_;  // per shard: samples not yet read
};

// How a sharded source's index is built: every shard read once, in order.
struct ShardScan {
  // Opens shard i for that one sequential pass (a remote origin streams it
  // with read-ahead). Default null: the read handle of ShardFiles serves.
  std::function<Result<std::unique_ptr<RandomAccessFile>>(size_t)> open;
  // Shards indexed at once. Default 1 (local disks gain nothing from more).
  int threads = 1;
  // Bytes asked of the file per read while walking a tar's headers: one
  // header block, so member data is skipped, not read. Indexing then reads
  // the headers and the samples' reads their data, each byte once (on NFS
  // or in a bucket, where every byte counts). Default 512.
  size_t tar_read_size = 512;
  // Where the shards read through open may be kept for the samples' reads
  // (Source::SpoolIndexReads); null: the layout keeps nothing.
  std::function<void(Env*, const std::string&)> spool_to;
};

// Runs fn(i, file) for each shard i on up to scan.threads threads, file being
// the handle of that one indexing pass (scan.open's, or files' own); the
// first error by index wins.
Status ForEachShard(const ShardFiles& files, const ShardScan& scan,
                    const std::function<Status(size_t, const RandomAccessFile&)>& fn);
Status ForEachShard(size_t n, int threads, const std::function<Status(size_t)>& fn);

// Reads exactly n bytes at offset; a short read is Corruption ("cut short").
Status ReadExact(const RandomAccessFile& f, uint64_t offset, size_t n, char* buf);

}  // namespace ssdfeed
