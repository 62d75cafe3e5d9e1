// The index of a sharded source (where each sample lies in its shards) as
// bytes that can be stored with a cache entry, and the source that defers
// building it: opened from the listing only, it takes a stored index or
// reads the shards when first needed (SourceOptions::defer_index).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "source/shard_files.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

// Little-endian fields appended to a string.
class IndexWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  const std::string& data() const { return out_; }
  // The fields, framed: magic, length, then an XXH3-64 checksum of both.
  std::string Finish() const;

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// Reads what IndexWriter wrote; every read past the end, and a count larger
// than the bytes left could hold, fails (ok() false) instead of allocating.
class IndexReader {
 public:
  // Checks the frame (magic, length, checksum); Corruption naming `what`.
  static Result<IndexReader> Open(std::string_view framed, const std::string& what);
  // Fields without a frame (checked by the frame around them).
  static IndexReader Plain(std::string_view data, const std::string& what) {
    return IndexReader(data, what);
  }
  bool U8(uint8_t* v) { return Raw(v, 1); }
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool I64(int64_t* v) { return Raw(v, 8); }
  bool Str(std::string* s);
  // A count of items each taking at least min_bytes.
  bool Count(uint64_t min_bytes, uint64_t* n);
  bool done() const { return pos_ == data_.size(); }
  // Corruption: "<what>: <why>".
  Status Bad(const std::string& why) const { return Status::Corruption(what_ + ": " + why); }

 private:
  IndexReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}
  bool Raw(void* p, size_t n);
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
};

// How a layout builds its source: by scanning the shards, or from an index
// its SaveIndex gave.
struct ShardLayout {
  std::string kind;  // "tar", "tfrecord"
  std::function<Result<std::unique_ptr<Source>>(ShardFiles, const ShardScan&, const SourceOptions&)>
      scan;
  std::function<Result<std::unique_ptr<Source>>(ShardFiles, const std::string& index,
                                                const SourceOptions&)>
      load;
};

// The two sharded layouts (tar_source.cc, tfrecord_source.cc); uri names
// the source in messages.
ShardLayout TarLayout(const std::string& uri);
ShardLayout TFRecordLayout(const std::string& uri);

// index_key of a sharded source: the layout, every input as listed (path,
// size, mtime, inode, ctime, ETag) and the options that change the index.
std::string ShardIndexKey(const std::string& kind, const std::vector<InputFile>& files,
                          const SourceOptions& opts);

// Opens the layout's source now (defer_index false) or returns one that
// opens it when first needed. traffic: what the origin has been asked for
// (null: not counted).
Result<std::unique_ptr<Source>> OpenSharded(const std::string& uri, ShardLayout layout,
                                            ShardFiles files, ShardScan scan,
                                            const SourceOptions& opts,
                                            std::function<OriginTraffic()> traffic = nullptr);

}  // namespace ssdfeed
