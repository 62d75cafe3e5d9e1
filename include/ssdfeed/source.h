// Origin readers: a folder of images, TFRecord shards, or WebDataset tars.
// Every source gives its samples stable ids 0..size()-1 (canonical order:
// sorted file names, record order within a file) and reads one sample by id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ssdfeed/env.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// What to do with a sample that cannot be read or decoded.
enum class OnError { kRaise, kSkip };

struct SourceOptions {
  // All file access goes through this Env. Default: Env::Default().
  Env* env = nullptr;
  // tfrecord: feature key of the encoded image; empty tries "image/encoded"
  // then "image". Default empty.
  std::string image_key;
  // tfrecord: int64 feature key of the label; empty tries
  // "image/class/label" then "label". Default empty.
  std::string label_key;
  // raise: a damaged shard (bad length CRC, cut short, unsafe tar member)
  // fails Open with the file and record named. skip: that part is left out
  // and counted in skipped(). Default raise.
  OnError on_error = OnError::kRaise;
  // folder: a class folder without any image is an error naming it (as
  // torchvision's ImageFolder) unless this is true; then it keeps its index,
  // so labels match ImageFolder(allow_empty=True). The URI can set it too:
  // "folder:DIR?allow_empty=1". Default false.
  bool allow_empty_classes = false;
  // The fields each sample gives beyond the default (image and, where the
  // layout has one, the class label). tar: WebDataset member extensions
  // ({"image","jpg"}, {"mask","seg.png"}, {"depth","npy"}); tfrecord:
  // feature keys; files: the URI's own FIELD=PATTERN pairs win; coco: the
  // fields given on request beyond image, boxes and classes, by COCO key
  // ("image_id", "iscrowd", "area"; the URI's "fields=KEY,..." wins).
  // Empty: the layout's default fields. Part of the source identity.
  std::vector<FieldSpec> fields;
  // coco: also keep boxes marked iscrowd. Default false (left out).
  bool coco_crowd = false;
  // folder:, files: and coco: read only files that lie inside the source's
  // root folder (DIR, ROOT, IMAGES_DIR) once every symlink is resolved;
  // links that stay inside it are followed. A link leaving it is an error
  // naming the file and its target: whoever can write a shared dataset
  // folder could otherwise link a file there to the reader's own files
  // (~/.ssh/...) and read them back from a group-shared cache entry. True
  // follows links anywhere (datasets assembled from links to other
  // disks); the URI can set it too: "?follow_links=1". Default false.
  bool follow_links = false;
  // files: serve only these stems (a split such as VOC's
  // ImageSets/Segmentation/train.txt), still in sorted stem order; a stem
  // without its files is an error naming it (skipped under on_error skip).
  // The URI's "split=FILE" (relative to ROOT, one stem per line) reads
  // them from a file instead; giving both is an error. Empty: every stem
  // the image pattern finds. The files it selects make the identity.
  std::vector<std::string> stems;
  // tfrecord: and tar: (local or s3://): open from the file listing only
  // (stat, or the bucket's listing) and build the index of where each sample
  // lies (which reads every shard's headers) only when first needed, so a
  // caller holding a stored index (Source::UseIndex) never reads the origin
  // to open. Loader and Warm set it and look in the cache root first. Other
  // layouts ignore it. Default false (the index is built while opening).
  bool defer_index = false;
};

// What a source object has read from its origin so far (index building and
// sample reads, retries included).
struct OriginTraffic {
  uint64_t bytes = 0;     // object body bytes received (s3://)
  uint64_t requests = 0;  // requests sent, listings included (s3://)
};

struct EncodedSample {
  std::string bytes;  // the encoded image (JPEG/PNG), as stored in the origin
  int64_t label = -1;
  std::vector<EncodedField> fields;  // every other field (masks, boxes, arrays, ...)
};

class Source {
 public:
  virtual ~Source() = default;

  virtual size_t size() const = 0;
  // Reads sample id's encoded bytes and label. Thread-safe. A damaged sample
  // gives Corruption naming the file (and record index) and what is wrong.
  virtual Status Read(size_t id, EncodedSample* out) const = 0;
  // Where sample id lives, for messages: "/d/a.tfrecord record 17".
  virtual std::string Describe(size_t id) const = 0;
  // Hex digest of every input file's path, size, mtime, inode and ctime (as
  // stat says through symlinks), the folder source's label map, and the
  // source options that change what is read: part of cache fingerprints.
  virtual const std::string& identity() const = 0;
  virtual const std::string& uri() const = 0;
  // Parts of the origin left out under OnError::kSkip while opening.
  virtual size_t skipped() const { return 0; }
  // Why each part counted in skipped() was left out, one line each
  // ("/d/a.tar: sample 'k' has no member for field 'mask' (seg.png)"), for
  // the user to see which samples are missing. Default none.
  virtual std::vector<std::string> skipped_reasons() const { return {}; }
  // A detection source's classes: the category ids of the origin (COCO's
  // category_id) in the order of the class indices samples give, with their
  // names. Empty for sources without such a map.
  struct Category {
    int64_t id = 0;
    std::string name;
  };
  virtual std::vector<Category> categories() const { return {}; }
  // The fields every sample gives, in order. The image and the class label
  // are listed (kinds kImage, kLabel) though they travel outside
  // EncodedSample::fields. {image, label}: a classic source, whose batches
  // are (images, labels); any other set gives a dict per batch.
  virtual std::vector<FieldSpec> fields() const {
    return {{"image", FieldKind::kImage, ""}, {"label", FieldKind::kLabel, ""}};
  }
  // A source whose samples are not prepared from an image (a Python
  // dataset's items: arrays and bytes) names its records' layout here
  // ("items1"); cache entries then key on it instead of the preparation's
  // canonical text, so every preparation option is moot. Empty: prepared.
  virtual std::string record_spec() const { return {}; }

  // A sharded source (tfrecord:, tar:) indexes its shards (where each sample
  // lies, record boundaries, labels, skipped parts) by reading them. That
  // index can be stored with the cache entry and given back to a source
  // opened later from an unchanged listing, which then reads no origin byte
  // until a sample is read. index_key() names what the index was built
  // from (hex digest of the layout, every input's path, size, mtime, inode,
  // ctime or ETag, and the options); empty for sources without such an
  // index. Default empty.
  virtual std::string index_key() const { return {}; }
  // The index in a self-checking binary form (building it if need be; ""
  // when the source has none).
  virtual Result<std::string> SaveIndex() const { return std::string(); }
  // Takes an index SaveIndex gave for the same index_key(); only before
  // anything else is asked of the source. Corruption (naming what is wrong)
  // when it does not fit the listing; the source is then unchanged.
  virtual Status UseIndex(const std::string& /*index*/) const { return Status::OK(); }
  // Builds the index from the origin unless it is built or given; the
  // errors OpenSource gives without defer_index (a damaged shard named).
  virtual Status BuildIndex() const { return Status::OK(); }
  // Before BuildIndex: a directory on the cache's disk where a source that
  // streams its origin to index it (s3:// tar and tfrecord) may keep the
  // shard bytes it streamed, so the samples read from them in this job are
  // not fetched again (a cold job then fetches each byte once), and the
  // runs PlanReads fetches. The files are unlinked at once, a shard's
  // dropped once each of its samples was read, all freed with the source;
  // kept only while the disk keeps a tenth of its size free. Default:
  // nothing kept (an s3:// shard is then fetched once to index and again
  // for its samples, and planned runs are not fetched whole).
  virtual void SpoolIndexReads(Env* /*env*/, const std::string& /*dir*/) const {}
  // The samples this job is about to read from the origin (the ones its
  // cache entry misses, ascending ids). A source whose samples lie in
  // shards of a bucket (s3:// tar and tfrecord) then fetches each run of
  // them lying close together (gaps of up to 64 KiB between samples, runs
  // of up to 8 MiB) with one ranged GET when the first of them is read, and keeps
  // the run in the spool (SpoolIndexReads) for the others. A hint only:
  // any sample can still be read. Default: ignored.
  virtual void PlanReads(const std::vector<uint64_t>& /*ids*/) const {}
  // What this object has read from the origin so far; {0, 0} where not
  // counted (local sources: the fetcher counts encoded bytes instead).
  virtual OriginTraffic traffic() const { return {}; }
};

// A source whose fields() list no image: nothing is decoded, its records
// hold 0x0x0 pixels and the field section, its batches have no images.
bool IsImageLess(const Source& source);

// Opens "folder:DIR" (or a bare directory), "tfrecord:GLOB", "tar:GLOB",
// "files:ROOT?FIELD=PATTERN&..." or "coco:IMAGES_DIR?annotations=FILE.json".
// GLOB may hold * ? [..] and brace ranges like shard-{000..099}.tar. A folder
// URI may end in "?allow_empty=1" (or 0/true/false): see allow_empty_classes.
// A tar URI may end in "?FIELD=EXT&..." ("?image=jpg&mask=seg.png"): fields
// as SourceOptions::fields gives them (the URI's win). Origin files and
// folders are read through symlinks; those of folder:, files: and coco:
// only while they stay inside the root (follow_links). docs/layouts.md.
Result<std::unique_ptr<Source>> OpenSource(const std::string& uri, const SourceOptions& opts = {});

// Expands brace ranges ({000..099}, {a,b}) and then shell globs (* ? [..]
// within one component, listed through env; null: Env::Default()); sorted.
Result<std::vector<std::string>> ExpandGlob(const std::string& pattern, Env* env = nullptr);

}  // namespace ssdfeed
