// tfrecord:GLOB — records of tf.train.Example, every CRC checked, with an
// index of record offsets so any record is one pread away.
#include "source/shard_files.h"
#include "source/sources.h"
#include "source/tfrecord_format.h"

namespace ssdfeed {

namespace {

struct RecordRef {
  uint32_t file = 0;
  uint32_t index = 0;  // record number within the file, for messages
  RecordSpan span;
};

class TFRecordSource final : public ShardedSource {
 public:
  TFRecordSource(std::string uri, ShardFiles files, std::vector<RecordRef> records,
                 ExampleKeys keys, size_t skipped)
      : ShardedSource(std::move(uri), std::move(files), skipped, "tfrecord",
                      keys.image_key + "|" + keys.label_key),
        records_(std::move(records)),
        keys_(std::move(keys)) {}

  size_t size() const override { return records_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    const RecordRef& r = records_[id];
    SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files().Get(r.file));
    thread_local std::string buf;
    SSDFEED_RETURN_IF_ERROR(ReadTFRecord(*f, r.span, r.index, &buf));
    return ParseExample(buf, keys_, out).WithContext(Describe(id));
  }
  std::string Describe(size_t id) const override {
    return file_path(records_[id].file) + " record " + std::to_string(records_[id].index);
  }

 private:
  std::vector<RecordRef> records_;
  ExampleKeys keys_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenTFRecordShards(const std::string& uri, ShardFiles files,
                                                   const ShardScan& scan,
                                                   const SourceOptions& opts) {
  size_t n = files.files().size();
  std::vector<std::vector<RecordSpan>> spans(n);
  std::vector<size_t> skipped(n, 0);
  SSDFEED_RETURN_IF_ERROR(ForEachShard(files, scan, [&](size_t i, const RandomAccessFile& f) {
    return ScanTFRecordFile(f, opts.on_error, &spans[i], &skipped[i]);
  }));
  std::vector<RecordRef> records;
  size_t total_skipped = 0;
  for (size_t i = 0; i < n; ++i) {
    total_skipped += skipped[i];
    for (size_t k = 0; k < spans[i].size(); ++k)
      records.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(k), spans[i][k]});
  }
  if (records.empty()) return Status::NotFound(uri + ": no records");
  return std::unique_ptr<Source>(new TFRecordSource(
      uri, std::move(files), std::move(records), {opts.image_key, opts.label_key}, total_skipped));
}

Result<std::unique_ptr<Source>> OpenTFRecordSource(const std::string& uri,
                                                   const std::vector<std::string>& paths,
                                                   const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto inputs, StatInputs(opts.env, paths));
  return OpenTFRecordShards(uri, ShardFiles(opts.env, std::move(inputs)), ShardScan{}, opts);
}

}  // namespace ssdfeed
