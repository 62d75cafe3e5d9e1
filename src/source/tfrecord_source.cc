// tfrecord:GLOB — records of tf.train.Example, every CRC checked, with an
// index of record offsets so any record is one pread away. Fields: those of
// SourceOptions::fields by feature key; without any, the first readable record
// decides: a TF object detection API Example (image/object/bbox/xmin) gives
// boxes + classes, a DeepLab one (image/segmentation/class/encoded) a mask,
// and every other Example stays classic (image + label).
#include <algorithm>

#include "source/field_specs.h"
#include "source/shard_files.h"
#include "source/shard_index.h"
#include "source/sources.h"
#include "source/tfrecord_format.h"

namespace ssdfeed {

namespace {

struct RecordRef {
  uint32_t file = 0;
  uint32_t index = 0;  // record number within the file, for messages
  RecordSpan span;
};

// The keys (and the fields, when there are any: classic identities stay).
std::string IdentityExtra(const ExampleKeys& keys, const std::vector<FieldSpec>& fields) {
  std::string extra = keys.image_key;
  extra.append("|").append(keys.label_key);
  if (!fields.empty()) extra.append("|").append(FieldsIdentity(fields));
  return extra;
}

class TFRecordSource final : public ShardedSource {
 public:
  TFRecordSource(std::string uri, ShardFiles files, std::vector<RecordRef> records,
                 ExampleKeys keys, size_t skipped, std::vector<FieldSpec> fields)
      : ShardedSource(std::move(uri), std::move(files), skipped, "tfrecord",
                      IdentityExtra(keys, fields)),
        records_(std::move(records)),
        keys_(std::move(keys)),
        fields_(std::move(fields)) {
    std::vector<uint32_t> file_of;
    for (const RecordRef& r : records_) file_of.push_back(r.file);
    TrackReads(file_of);
  }

  size_t size() const override { return records_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    const RecordRef& r = records_[id];
    SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files().Get(r.file));
    thread_local std::string buf;
    SSDFEED_RETURN_IF_ERROR(ReadTFRecord(*f, r.span, r.index, &buf));
    ReadOnce(id);
    if (fields_.empty()) {
      out->fields.clear();
      return ParseExample(buf, keys_, out).WithContext(Describe(id));
    }
    Status s = ParseExampleFields(buf, keys_, fields_, out).WithContext(Describe(id));
    for (auto& ef : out->fields) ef.origin = Describe(id);
    return s;
  }
  std::vector<FieldSpec> fields() const override {
    return fields_.empty() ? Source::fields() : fields_;
  }
  std::string Describe(size_t id) const override {
    return file_path(records_[id].file) + " record " + std::to_string(records_[id].index);
  }

 protected:
  // The payload and its CRC (ReadTFRecord).
  void Span(size_t id, uint32_t* file, uint64_t* begin, uint64_t* end) const override {
    const RecordRef& r = records_[id];
    *file = r.file;
    *begin = r.span.data_offset;
    *end = r.span.data_offset + r.span.length + 4;
  }

 public:
  Result<std::string> SaveIndex() const override {
    IndexWriter w;
    w.U32(static_cast<uint32_t>(files().files().size()));
    w.U64(records_.size());
    for (const RecordRef& r : records_) {
      w.U32(r.file);
      w.U32(r.index);
      w.U64(r.span.data_offset);
      w.U64(r.span.length);
    }
    w.U64(skipped());
    w.Str(keys_.image_key);
    w.Str(keys_.label_key);
    w.U64(fields_.size());
    for (const FieldSpec& f : fields_) {
      w.Str(f.name);
      w.U32(static_cast<uint32_t>(f.kind));
      w.Str(f.key);
    }
    return w.data();
  }

 private:
  std::vector<RecordRef> records_;
  ExampleKeys keys_;
  std::vector<FieldSpec> fields_;  // empty: classic (image + label)
};

// The fields asked for (an image added first when none is), or those the
// first record shows (see the top of this file); empty: classic.
// The first record that reads decides (a damaged one is reported when it
// is read as a sample, as in a classic source); none in the first 16:
// classic.
Result<std::vector<FieldSpec>> DetectFields(const ShardFiles& files,
                                            const std::vector<RecordRef>& records) {
  std::string buf;
  for (size_t i = 0; i < records.size() && i < 16; ++i) {
    SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files.Get(records[i].file));
    if (ReadTFRecord(*f, records[i].span, records[i].index, &buf).ok())
      return DetectExampleFields(buf);
  }
  return std::vector<FieldSpec>{};
}

Result<std::vector<FieldSpec>> TFRecordFields(const SourceOptions& opts, const ShardFiles& files,
                                              const std::vector<RecordRef>& records) {
  if (opts.fields.empty()) return DetectFields(files, records);
  SSDFEED_ASSIGN_OR_RETURN(auto specs, ResolveFields(opts.fields, "tfrecord"));
  if (std::none_of(specs.begin(), specs.end(),
                   [](const FieldSpec& f) { return f.kind == FieldKind::kImage; }))
    specs.insert(specs.begin(), {"image", FieldKind::kImage, ""});
  for (auto& f : specs) {
    if (!f.key.empty() || f.kind == FieldKind::kImage) continue;
    if (f.kind == FieldKind::kLabel && f.name == "label") continue;  // ParseExample's keys
    if (f.kind == FieldKind::kBoxes)
      f.key = "image/object/bbox/";
    else if (f.kind == FieldKind::kClasses)
      f.key = "image/object/class/label";
    else if (f.kind == FieldKind::kMask)
      f.key = "image/segmentation/class/encoded";
    else
      f.key = f.name;
  }
  return specs;
}

// The image and label keys: the fields' own when given, else the options'.
ExampleKeys KeysFor(const SourceOptions& opts, const std::vector<FieldSpec>& fields) {
  ExampleKeys k{opts.image_key, opts.label_key};
  for (const auto& f : fields) {
    if (f.kind == FieldKind::kImage && !f.key.empty()) k.image_key = f.key;
    if (f.kind == FieldKind::kLabel && f.name == "label" && !f.key.empty()) k.label_key = f.key;
  }
  return k;
}

Result<std::unique_ptr<Source>> ScanTFRecordShards(const std::string& uri, ShardFiles files,
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
  SSDFEED_ASSIGN_OR_RETURN(auto fields, TFRecordFields(opts, files, records));
  ExampleKeys keys = KeysFor(opts, fields);
  return std::unique_ptr<Source>(new TFRecordSource(uri, std::move(files), std::move(records),
                                                    std::move(keys), total_skipped,
                                                    std::move(fields)));
}

// A record (header, payload, CRC) must lie inside its shard as listed.
Status ReadRecordRef(IndexReader& r, const ShardFiles& files, RecordRef* ref) {
  if (!r.U32(&ref->file) || !r.U32(&ref->index) || !r.U64(&ref->span.data_offset) ||
      !r.U64(&ref->span.length))
    return r.Bad("cut short in a record");
  if (ref->file >= files.files().size()) return r.Bad("record of a shard not listed");
  uint64_t size = files.files()[ref->file].size;
  if (ref->span.data_offset < 12 || ref->span.data_offset > size ||
      ref->span.length > size - ref->span.data_offset ||
      size - ref->span.data_offset - ref->span.length < 4)
    return r.Bad(files.files()[ref->file].path + " record " + std::to_string(ref->index) +
                 " lies outside the shard");
  return Status::OK();
}

Result<std::vector<FieldSpec>> ReadFieldSpecs(IndexReader& r) {
  uint64_t n = 0;
  if (!r.Count(12, &n)) return r.Bad("cut short in the fields");
  std::vector<FieldSpec> fields(n);
  for (auto& f : fields) {
    uint32_t kind = 0;
    if (!r.Str(&f.name) || !r.U32(&kind) || !r.Str(&f.key)) return r.Bad("cut short in the fields");
    if (kind > static_cast<uint32_t>(FieldKind::kInstanceMasks))
      return r.Bad("field '" + f.name + "' of unknown kind " + std::to_string(kind));
    f.kind = static_cast<FieldKind>(kind);
  }
  return fields;
}

// A TFRecordSource from what its SaveIndex gave (checked against the listing).
Result<std::unique_ptr<Source>> LoadTFRecordShards(const std::string& uri, ShardFiles files,
                                                   const std::string& index, const SourceOptions&) {
  IndexReader r = IndexReader::Plain(index, uri + " stored index");
  uint32_t nfiles = 0;
  uint64_t n = 0;
  if (!r.U32(&nfiles) || nfiles != files.files().size() || !r.Count(24, &n) || n == 0)
    return r.Bad("shard or record count does not fit the listing");
  std::vector<RecordRef> records(n);
  for (auto& ref : records) SSDFEED_RETURN_IF_ERROR(ReadRecordRef(r, files, &ref));
  uint64_t skipped = 0;
  ExampleKeys keys;
  if (!r.U64(&skipped) || !r.Str(&keys.image_key) || !r.Str(&keys.label_key))
    return r.Bad("cut short");
  SSDFEED_ASSIGN_OR_RETURN(auto fields, ReadFieldSpecs(r));
  if (!r.done()) return r.Bad("trailing bytes");
  return std::unique_ptr<Source>(new TFRecordSource(uri, std::move(files), std::move(records),
                                                    std::move(keys), skipped, std::move(fields)));
}

}  // namespace

ShardLayout TFRecordLayout(const std::string& uri) {
  ShardLayout l;
  l.kind = "tfrecord";
  l.scan = [uri](ShardFiles files, const ShardScan& scan, const SourceOptions& opts) {
    return ScanTFRecordShards(uri, std::move(files), scan, opts);
  };
  l.load = [uri](ShardFiles files, const std::string& index, const SourceOptions& opts) {
    return LoadTFRecordShards(uri, std::move(files), index, opts);
  };
  return l;
}

Result<std::unique_ptr<Source>> OpenTFRecordSource(const std::string& uri,
                                                   const std::vector<std::string>& paths,
                                                   const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto inputs, StatInputs(opts.env, paths));
  return OpenSharded(uri, TFRecordLayout(uri), ShardFiles(opts.env, std::move(inputs)), ShardScan{},
                     opts);
}

}  // namespace ssdfeed
