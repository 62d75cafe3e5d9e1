#include "source/shard_index.h"

#include <xxhash.h>

#include <atomic>
#include <cstring>

#include "util/hash.h"

namespace ssdfeed {

namespace {

constexpr char kMagic[8] = {'S', 'D', 'F', 'O', 'I', 'X', '0', '1'};
constexpr size_t kFrame = sizeof(kMagic) + 8 + 8;  // magic, length, checksum

uint64_t FrameSum(std::string_view head_and_body) {
  return XXH3_64bits(head_and_body.data(), head_and_body.size());
}

}  // namespace

std::string IndexWriter::Finish() const {
  std::string out(kMagic, sizeof(kMagic));
  uint64_t n = out_.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out.append(out_);
  uint64_t sum = FrameSum(out);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  return out;
}

Result<IndexReader> IndexReader::Open(std::string_view framed, const std::string& what) {
  if (framed.size() < kFrame || std::memcmp(framed.data(), kMagic, sizeof(kMagic)) != 0)
    return Status::Corruption(what + ": not an origin index (no SDFOIX01 header)");
  uint64_t n = 0, sum = 0;
  std::memcpy(&n, framed.data() + sizeof(kMagic), 8);
  if (n != framed.size() - kFrame)
    return Status::Corruption(what + ": cut short or padded (header says " + std::to_string(n) +
                              " bytes of index, the file holds " +
                              std::to_string(framed.size() - kFrame) + ")");
  std::memcpy(&sum, framed.data() + framed.size() - 8, 8);
  if (sum != FrameSum(framed.substr(0, framed.size() - 8)))
    return Status::Corruption(what + ": checksum mismatch (damaged)");
  return IndexReader(framed.substr(sizeof(kMagic) + 8, n), what);
}

bool IndexReader::Raw(void* p, size_t n) {
  if (data_.size() - pos_ < n) return false;
  std::memcpy(p, data_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool IndexReader::Str(std::string* s) {
  uint32_t n = 0;
  if (!U32(&n) || data_.size() - pos_ < n) return false;
  s->assign(data_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool IndexReader::Count(uint64_t min_bytes, uint64_t* n) {
  return U64(n) && *n <= (data_.size() - pos_) / std::max<uint64_t>(min_bytes, 1);
}

std::string ShardIndexKey(const std::string& kind, const std::vector<InputFile>& files,
                          const SourceOptions& opts) {
  // Everything the tar and tfrecord scans read from the options.
  std::string extra = "index1|" + opts.image_key + "|" + opts.label_key + "|" +
                      std::to_string(static_cast<int>(opts.on_error));
  for (const auto& f : opts.fields)
    extra.append("|")
        .append(f.name)
        .append(":")
        .append(std::to_string(static_cast<int>(f.kind)))
        .append(":")
        .append(f.key);
  return IdentityDigest(kind, files, extra);
}

namespace {

// Opens the layout's source on first need; forwards everything to it.
class DeferredShards final : public Source {
 public:
  DeferredShards(std::string uri, ShardLayout layout, ShardFiles files, ShardScan scan,
                 SourceOptions opts, std::function<OriginTraffic()> traffic)
      : uri_(std::move(uri)),
        layout_(std::move(layout)),
        files_(std::move(files)),
        scan_(std::move(scan)),
        opts_(std::move(opts)),
        traffic_(std::move(traffic)),
        key_(ShardIndexKey(layout_.kind, files_.files(), opts_)) {}

  size_t size() const override { return Inner() ? inner_->size() : 0; }
  Status Read(size_t id, EncodedSample* out) const override {
    SSDFEED_RETURN_IF_ERROR(BuildIndex());
    return inner_->Read(id, out);
  }
  std::string Describe(size_t id) const override { return Inner() ? inner_->Describe(id) : uri_; }
  const std::string& identity() const override {
    static const std::string kNone;
    return Inner() ? inner_->identity() : kNone;
  }
  const std::string& uri() const override { return uri_; }
  size_t skipped() const override { return Inner() ? inner_->skipped() : 0; }
  std::vector<std::string> skipped_reasons() const override {
    return Inner() ? inner_->skipped_reasons() : std::vector<std::string>{};
  }
  std::vector<FieldSpec> fields() const override {
    return Inner() ? inner_->fields() : Source::fields();
  }
  std::string index_key() const override { return key_; }
  Result<std::string> SaveIndex() const override {
    SSDFEED_RETURN_IF_ERROR(BuildIndex());
    SSDFEED_ASSIGN_OR_RETURN(std::string payload, inner_->SaveIndex());
    IndexWriter w;
    w.Str(key_);
    w.Str(payload);
    return w.Finish();
  }
  Status UseIndex(const std::string& index) const override {
    std::lock_guard<std::mutex> l(mu_);
    if (inner_) return Status::OK();
    std::string what = uri_ + " stored index";
    SSDFEED_ASSIGN_OR_RETURN(IndexReader r, IndexReader::Open(index, what));
    std::string key, payload;
    if (!r.Str(&key) || !r.Str(&payload) || !r.done()) return r.Bad("malformed");
    if (key != key_) return r.Bad("made for another listing or options");
    SSDFEED_ASSIGN_OR_RETURN(inner_, layout_.load(files_.Clone(), payload, opts_));
    ready_.store(true, std::memory_order_release);
    return Status::OK();
  }
  Status BuildIndex() const override {
    if (ready_.load(std::memory_order_acquire)) return Status::OK();  // every Read asks
    std::lock_guard<std::mutex> l(mu_);
    if (inner_ || !built_.ok()) return built_;
    auto opened = layout_.scan(files_.Clone(), scan_, opts_);
    if (!opened.ok()) return built_ = opened.status();
    inner_ = std::move(*opened);
    ready_.store(true, std::memory_order_release);
    return Status::OK();
  }
  void SpoolIndexReads(Env* env, const std::string& dir) const override {
    std::lock_guard<std::mutex> l(mu_);
    if (scan_.spool_to) scan_.spool_to(env, dir);  // before any read
  }
  void PlanReads(const std::vector<uint64_t>& ids) const override {
    if (Inner()) inner_->PlanReads(ids);
  }
  OriginTraffic traffic() const override { return traffic_ ? traffic_() : OriginTraffic{}; }

 private:
  bool Inner() const { return BuildIndex().ok(); }

  std::string uri_;
  ShardLayout layout_;
  ShardFiles files_;
  ShardScan scan_;
  SourceOptions opts_;
  std::function<OriginTraffic()> traffic_;
  std::string key_;
  mutable std::mutex mu_;
  mutable Status built_;                    // why scanning failed (kept: the same on every call)
  mutable std::unique_ptr<Source> inner_;   // set once, under mu_
  mutable std::atomic<bool> ready_{false};  // inner_ is set
};

}  // namespace

Result<std::unique_ptr<Source>> OpenSharded(const std::string& uri, ShardLayout layout,
                                            ShardFiles files, ShardScan scan,
                                            const SourceOptions& opts,
                                            std::function<OriginTraffic()> traffic) {
  auto deferred = std::make_unique<DeferredShards>(uri, std::move(layout), std::move(files),
                                                   std::move(scan), opts, std::move(traffic));
  if (!opts.defer_index) SSDFEED_RETURN_IF_ERROR(deferred->BuildIndex());
  return std::unique_ptr<Source>(std::move(deferred));
}

}  // namespace ssdfeed
