// Pieces shared by the file-backed sources: the list of input files with
// what stat says of them, the identity digest over it, and lazily opened
// read handles (pread is thread-safe, so one handle per file serves all).
// Origin files are opened through symlinks: no-follow is the cache root's
// rule, and datasets are often assembled from links.
#pragma once

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

class ShardFiles {
 public:
  ShardFiles(Env* env, std::vector<InputFile> files);
  // Files opened elsewhere (objects in a bucket), one handle per file.
  ShardFiles(std::vector<InputFile> files, std::vector<std::unique_ptr<RandomAccessFile>> opened);
  const std::vector<InputFile>& files() const { return files_; }
  // The open handle of file i, opened on first use.
  Result<const RandomAccessFile*> Get(size_t i) const;

 private:
  Env* env_;
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

 protected:
  const std::string& file_path(size_t i) const { return files_.files()[i].path; }
  const ShardFiles& files() const { return files_; }

 private:
  std::string uri_;
  ShardFiles files_;
  size_t skipped_;
  std::string identity_;
};

// How a sharded source's index is built: every shard read once, in order.
struct ShardScan {
  // Opens shard i for that one sequential pass (a remote origin streams it
  // with read-ahead). Default null: the read handle of ShardFiles serves.
  std::function<Result<std::unique_ptr<RandomAccessFile>>(size_t)> open;
  // Shards indexed at once. Default 1 (local disks gain nothing from more).
  int threads = 1;
};

// Runs fn(i, file) for each shard i on up to scan.threads threads, file being
// the handle of that one indexing pass (scan.open's, or files' own); the
// first error by index wins.
Status ForEachShard(const ShardFiles& files, const ShardScan& scan,
                    const std::function<Status(size_t, const RandomAccessFile&)>& fn);
Status ForEachShard(size_t n, int threads, const std::function<Status(size_t)>& fn);

Result<std::unique_ptr<Source>> OpenTFRecordShards(const std::string& uri, ShardFiles files,
                                                   const ShardScan& scan,
                                                   const SourceOptions& opts);
Result<std::unique_ptr<Source>> OpenTarShards(const std::string& uri, ShardFiles files,
                                              const ShardScan& scan, const SourceOptions& opts);

// Reads exactly n bytes at offset; a short read is Corruption ("cut short").
Status ReadExact(const RandomAccessFile& f, uint64_t offset, size_t n, char* buf);

}  // namespace ssdfeed
