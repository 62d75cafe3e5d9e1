// s3://BUCKET/PATTERN — the three layouts in an S3-compatible bucket.
// TFRecord and tar shards reuse the local readers over objects: the index
// is built by streaming each shard once (8 MiB ranged GETs, shards in
// parallel), its bytes spooled on the cache's disk (shard_spool.h) so the
// samples are prepared from the spool: a cold pass fetches each byte once.
// Samples not spooled are one ranged GET each. The index is stored with the
// cache entry (origin-*.index), so a later job over an unchanged listing
// fetches nothing to open. A folder layout
// takes the class from the first path component under the prefix. Identity:
// every object's key, size and ETag; reads carry If-Match, so a replaced
// object is an error, never bytes of another version.
#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

#include "source/s3_client.h"
#include "source/shard_files.h"
#include "source/shard_index.h"
#include "source/shard_spool.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

using s3::Client;
using s3::ObjectInfo;

struct Bucket {
  std::shared_ptr<Client> client;
  std::string name;
  std::string Path(const ObjectInfo& o) const { return "s3://" + name + "/" + o.key; }
};

// One object, read by ranged GETs; thread-safe.
class ObjectFile : public RandomAccessFile {
 public:
  ObjectFile(Bucket bucket, ObjectInfo obj)
      : bucket_(std::move(bucket)), obj_(std::move(obj)), path_(bucket_.Path(obj_)) {}
  Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
    thread_local std::string buf;
    SSDFEED_RETURN_IF_ERROR(bucket_.client->Get(bucket_.name, obj_, offset, n, &buf));
    std::memcpy(scratch, buf.data(), buf.size());
    *got = buf.size();
    return Status::OK();
  }
  Result<uint64_t> Size() const override { return obj_.size; }
  const std::string& path() const override { return path_; }

 protected:
  Bucket bucket_;
  ObjectInfo obj_;
  std::string path_;
};

Result<std::shared_ptr<Client>> MakeClient(Env* env) {
  SSDFEED_ASSIGN_OR_RETURN(s3::Config config, s3::Config::FromEnv(env));
  return std::make_shared<Client>(std::move(config));
}

// The objects whose keys match pattern (shell glob per path component,
// brace ranges; a pattern ending in '/' means every object under it).
Result<std::vector<ObjectInfo>> MatchKeys(const Bucket& b, std::string pattern) {
  if (pattern.empty() || pattern.back() == '/') pattern += "*";
  std::string prefix = pattern.substr(0, pattern.find_first_of("*?[{\\"));
  std::vector<std::string> pats;
  SSDFEED_RETURN_IF_ERROR(ExpandBraces(pattern, &pats));
  SSDFEED_ASSIGN_OR_RETURN(auto all, b.client->List(b.name, prefix));
  std::vector<ObjectInfo> out;
  for (auto& o : all) {
    if (o.key.back() == '/') continue;  // a "directory" marker
    for (const auto& p : pats) {
      if (fnmatch(p.c_str(), o.key.c_str(), FNM_PATHNAME) == 0) {
        out.push_back(std::move(o));
        break;
      }
    }
  }
  if (out.empty())
    return Status::NotFound("no objects match s3://" + b.name + "/" + pattern + " (" +
                            std::to_string(all.size()) + " under the prefix '" + prefix + "')");
  return out;
}

InputFile Input(const Bucket& b, const ObjectInfo& o) {
  InputFile f;
  f.path = b.Path(o);
  f.size = o.size;
  f.etag = o.etag;
  return f;
}

Result<std::unique_ptr<Source>> OpenShards(const std::string& uri, const Bucket& b,
                                           const std::string& pattern, bool tar,
                                           const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto objects, MatchKeys(b, pattern));
  std::vector<InputFile> inputs;
  for (const auto& o : objects) inputs.push_back(Input(b, o));
  // The scan streams each shard once; the samples read what it kept.
  auto spools = std::make_shared<ShardSpools>(objects.size());
  ShardScan scan;
  scan.threads = b.client->config().max_requests;
  scan.open = [b, objects, spools](size_t i) -> Result<std::unique_ptr<RandomAccessFile>> {
    return spools->Streaming(i, std::make_unique<ObjectFile>(b, objects[i]));
  };
  scan.spool_to = [spools](Env* env, const std::string& dir) { spools->Configure(env, dir); };
  ShardFiles files(
      std::move(inputs),
      [b, objects, spools](size_t i) -> Result<std::unique_ptr<RandomAccessFile>> {
        return spools->Reading(i, std::make_unique<ObjectFile>(b, objects[i]));
      },
      ShardFiles::Hooks{[spools](size_t i) { spools->Release(i); },
                        [spools](size_t i, std::vector<ShardFiles::Run> runs) {
                          spools->Plan(i, std::move(runs));
                        }});
  auto client = b.client;
  auto traffic = [client] { return OriginTraffic{client->object_bytes(), client->requests()}; };
  return OpenSharded(uri, tar ? TarLayout(uri) : TFRecordLayout(uri), std::move(files),
                     std::move(scan), opts, traffic);
}

bool IsImageKey(const std::string& key) {
  size_t slash = key.find_last_of('/');
  std::string name = key.substr(slash == std::string::npos ? 0 : slash + 1);
  size_t dot = name.find_last_of('.');
  if (dot == std::string::npos || name.empty() || name[0] == '.') return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

class S3FolderSource final : public Source {
 public:
  S3FolderSource(std::string uri, Bucket bucket, std::vector<ObjectInfo> objects,
                 std::vector<int64_t> labels, const std::string& label_map)
      : uri_(std::move(uri)),
        bucket_(std::move(bucket)),
        objects_(std::move(objects)),
        labels_(std::move(labels)) {
    std::vector<InputFile> inputs;
    for (const auto& o : objects_) inputs.push_back(Input(bucket_, o));
    identity_ = IdentityDigest("folder", inputs, label_map);
  }
  size_t size() const override { return objects_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    out->label = labels_[id];
    return bucket_.client->Get(bucket_.name, objects_[id], 0, objects_[id].size, &out->bytes);
  }
  std::string Describe(size_t id) const override { return bucket_.Path(objects_[id]); }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  OriginTraffic traffic() const override {
    return {bucket_.client->object_bytes(), bucket_.client->requests()};
  }

 private:
  std::string uri_;
  Bucket bucket_;
  std::vector<ObjectInfo> objects_;
  std::vector<int64_t> labels_;
  std::string identity_;
};

// Objects under prefix grouped by class (first path component), sorted by
// class name and then key, as the local folder layout is.
Result<std::unique_ptr<Source>> OpenFolder(const std::string& uri, const Bucket& b,
                                           std::string prefix, const SourceOptions& opts) {
  if (!prefix.empty() && prefix.back() != '/') prefix += "/";
  std::string where = "s3://" + b.name + "/" + prefix;
  SSDFEED_ASSIGN_OR_RETURN(auto all, b.client->List(b.name, prefix));
  std::map<std::string, std::vector<ObjectInfo>> classes;
  for (auto& o : all) {
    std::string rel = o.key.substr(prefix.size());
    size_t slash = rel.find('/');
    if (slash == std::string::npos || slash == 0) continue;  // no class component
    auto& files = classes[rel.substr(0, slash)];
    if (!IsImageKey(o.key)) continue;
    // Each image is read whole into memory: a listed size beyond the cap
    // is refused here, before any read allocates for it.
    uint64_t cap = static_cast<uint64_t>(b.client->config().max_object_mb) << 20;
    if (o.size > cap)
      return Status::Corruption(b.Path(o) + ": " + std::to_string(o.size) +
                                " bytes is more than the largest image read (" +
                                std::to_string(cap >> 20) +
                                " MiB; raise SSDFEED_S3_MAX_OBJECT_MB if it is one)");
    files.push_back(std::move(o));
  }
  if (classes.empty())
    return Status::NotFound(where + ": no class folder found (expected " + where +
                            "<class>/<file>.jpg|.png)");
  std::vector<ObjectInfo> objects;
  std::vector<int64_t> labels;
  std::string label_map = "labels", empty;
  int64_t label = 0;
  for (auto& [name, files] : classes) {
    label_map.append("|").append(std::to_string(label)).append(":");
    label_map.append(std::to_string(name.size())).append(":").append(name);
    if (files.empty()) empty.append(empty.empty() ? "" : ", ").append(name);
    for (auto& o : files) {
      objects.push_back(std::move(o));
      labels.push_back(label);
    }
    ++label;
  }
  if (!empty.empty() && !opts.allow_empty_classes)
    return Status::NotFound(where + ": found no valid file for the classes " + empty +
                            " (supported extensions: .jpg, .jpeg, .png; or allow empty "
                            "classes with folder:s3://...?allow_empty=1)");
  if (objects.empty()) return Status::NotFound(where + ": no images found");
  return std::unique_ptr<Source>(
      new S3FolderSource(uri, b, std::move(objects), std::move(labels), label_map));
}

// Without an explicit layout: shards by their extension, else a folder.
std::string InferLayout(const std::string& pattern) {
  std::string last = pattern.substr(pattern.find_last_of('/') + 1);
  auto ends = [&](const std::string& s) {
    return last.size() >= s.size() && last.compare(last.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".tar")) return "tar";
  if (last.find(".tfrecord") != std::string::npos || ends(".tfrec")) return "tfrecord";
  return "folder";
}

}  // namespace

Result<std::unique_ptr<Source>> OpenS3Source(const std::string& uri, const std::string& location,
                                             const std::string& layout, const SourceOptions& opts) {
  Bucket b;
  std::string pattern;
  SSDFEED_RETURN_IF_ERROR(s3::ParseUri(location, &b.name, &pattern));
  SSDFEED_ASSIGN_OR_RETURN(b.client, MakeClient(opts.env ? opts.env : Env::Default()));
  std::string kind = layout.empty() ? InferLayout(pattern) : layout;
  if (kind == "folder") return OpenFolder(uri, b, pattern, opts);
  return OpenShards(uri, b, pattern, kind == "tar", opts);
}

}  // namespace ssdfeed
