// Peer fill's batches (ssdfeed/peer.h). A batch is
//   "ssdfeed-peer-records 1 <fingerprint>\n"
//   records in the cache's own format (docs/cache-format.md), back to back
// A receiver checks each record as an import of an export stream does
// (cache_format::CheckRecord against the entry's rules, a decode of any
// other codec) and stores it through the entry's Put, so capacity, writer
// slots and sequence numbers are the entry's own. The process group that
// carries the batches is the trust boundary (docs/multi-node.md): the checks
// catch damage, not a peer that lies consistently.
#include <cstring>

#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "image/pixel_codec.h"
#include "pipeline/entry_key.h"
#include "pipeline/warm_entry.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/peer.h"

namespace ssdfeed {

namespace cf = cache_format;

namespace {

constexpr char kBatchMagic[] = "ssdfeed-peer-records 1 ";

std::string BatchHeader(const std::string& fingerprint) { return kBatchMagic + fingerprint + "\n"; }

uint32_t LoadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t LoadU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

class PeerEntryImpl : public PeerEntry {
 public:
  PeerEntryImpl(std::unique_ptr<Source> source, WarmOptions options, EntryKey key,
                std::unique_ptr<CacheEntry> entry, std::unique_ptr<StatsPublisher> stats)
      : source_(std::move(source)),
        options_(std::move(options)),
        key_(std::move(key)),
        fingerprint_(key_.fingerprint()),
        rules_(RulesOf(key_)),
        entry_(std::move(entry)),
        stats_(std::move(stats)),
        stored_(options_.cache.env, entry_->dir(), key_.samples_total, rules_) {}

  const std::string& fingerprint() const override { return fingerprint_; }
  uint64_t samples_total() const override { return key_.samples_total; }
  const std::string& dir() const override { return entry_->dir(); }
  bool admitting() const override { return entry_->admitting(); }
  std::string warning() const override { return entry_->warning(); }

  Status Presence(std::vector<uint8_t>* present) override {
    SSDFEED_RETURN_IF_ERROR(entry_->Refresh());
    present->assign(key_.samples_total, 0);
    for (uint64_t id = 0; id < key_.samples_total; ++id) (*present)[id] = entry_->Contains(id);
    return Status::OK();
  }

  Status WarmIds(const std::vector<uint64_t>& ids, WarmResult* result) override {
    WarmOptions o = options_;
    o.ids = ids;
    return WarmEntry(*source_, o, entry_.get(), result);  // one handle: one reservation
  }

  Status Export(const std::vector<uint64_t>& ids, uint32_t receivers, std::string* batch,
                PeerBatchInfo* info) override {
    *info = {};
    SSDFEED_RETURN_IF_ERROR(stored_.Refresh());
    size_t start = batch->size();
    *batch += BatchHeader(fingerprint_);
    std::string buf;
    for (uint64_t id : ids) {
      if (id >= key_.samples_total || !stored_.Contains(id)) continue;
      CachedSample s;
      Status st = stored_.GetStored(id, &buf, &s);  // checked: a corrupt one stays home
      if (st.IsCorruption() || st.IsNotFound()) continue;
      SSDFEED_RETURN_IF_ERROR(st);
      *batch += buf;
      info->records++;
    }
    info->bytes = batch->size() - start;
    stats_->Add(Ctr::kPeerRecordsSent, info->records * receivers);
    stats_->Add(Ctr::kPeerBytesSent, info->bytes * receivers);
    return Status::OK();
  }

  Status Import(const char* batch, size_t len, PeerImportReport* report) override {
    *report = {};
    report->bytes = len;
    stats_->Add(Ctr::kPeerBytesReceived, len);
    std::string header = BatchHeader(fingerprint_);
    if (len < header.size() || std::memcmp(batch, header.data(), header.size()) != 0) {
      Refuse(report, "not a batch of entry " + fingerprint_ + " (another entry, or damaged)");
      return Status::OK();
    }
    SSDFEED_RETURN_IF_ERROR(entry_->Refresh());
    for (size_t off = header.size(); off < len;) {
      size_t rec_len = 0;
      std::string bad = NextRecord(batch + off, len - off, &rec_len);
      if (bad.empty()) bad = StoreRecord(batch + off, rec_len, report);
      if (bad == kStopped) break;
      if (!bad.empty()) Refuse(report, "record at byte " + std::to_string(off) + ": " + bad);
      if (rec_len == 0) break;  // framing lost: the rest is refused
      off += rec_len;
    }
    stats_->Add(Ctr::kPeerRecordsReceived, report->stored);
    return io_error_;
  }

  void RecordComplete(double seconds) override {
    stats_->Add(Ctr::kPeerFillCompleteMs, static_cast<uint64_t>(seconds * 1000 + 0.5));
  }

  Status Sync() override { return entry_->Sync(); }

 private:
  static constexpr const char* kStopped = "\x01stopped";

  void Refuse(PeerImportReport* report, const std::string& why) {
    report->refused++;
    if (report->first_refusal.empty()) report->first_refusal = why;
    stats_->Add(Ctr::kPeerRecordsRefused);
  }

  // The length of the record at p from its header; "" when it fits, else
  // why not (with *rec_len 0: nothing after it can be framed).
  std::string NextRecord(const char* p, size_t left, size_t* rec_len) const {
    *rec_len = 0;
    if (left < cf::kRecordHeaderSize) return "cut short";
    uint32_t payload = LoadU32(p + 4);
    if (payload > cf::kMaxPayload || cf::kRecordHeaderSize + payload > left)
      return "its length (" + std::to_string(payload) + ") runs past the batch";
    *rec_len = cf::kRecordHeaderSize + payload;
    return "";
  }

  // Checks one framed record and stores it when the entry lacks it: "" when
  // done (stored, present or not admitted), kStopped on an I/O error, else
  // why it is refused.
  std::string StoreRecord(const char* rec, size_t len, PeerImportReport* report) {
    uint64_t id = LoadU64(rec + 8);
    if (id >= key_.samples_total)
      return "sample id " + std::to_string(id) + " is past the entry's " +
             std::to_string(key_.samples_total);
    cf::RecordHeader h;
    std::string bad = cf::CheckRecord(rec, len, id, rules_, &h);
    if (!bad.empty()) return "sample " + std::to_string(id) + ": " + bad;
    CachedSample cs;
    cf::SampleOf(rec, h, &cs);
    if (cs.codec != RecordCodec::kRaw) {  // stored bytes must decode, as a read needs
      if (pixels_.size() < cs.bytes()) pixels_.resize(cs.bytes());
      Status d = cf::DecodeSample(&cs, pixels_.data(), &codec_scratch_);
      if (!d.ok()) return "sample " + std::to_string(id) + ": " + d.message();
    }
    if (entry_->Contains(id)) {
      report->already_present++;
      return "";
    }
    if (!entry_->admitting()) {
      report->not_admitted++;
      return "";
    }
    Status p = entry_->Put(id, cs);
    if (p.ok()) {
      report->stored++;
    } else if (p.IsNoSpace()) {
      report->not_admitted++;  // the entry keeps what fits and says so (warning())
    } else if (p.IsInvalidArgument()) {
      return "sample " + std::to_string(id) + ": " + p.message();
    } else {
      io_error_ = p.WithContext("storing a record received from a peer in " + entry_->dir());
      return kStopped;
    }
    return "";
  }

  std::unique_ptr<Source> source_;
  WarmOptions options_;
  EntryKey key_;
  std::string fingerprint_;
  cf::RecordRules rules_;
  std::unique_ptr<CacheEntry> entry_;
  std::unique_ptr<StatsPublisher> stats_;
  SegmentIndex stored_;  // the entry's records as stored, for Export
  std::vector<uint8_t> pixels_;
  PixelCodecScratch codec_scratch_;
  Status io_error_;
};

}  // namespace

Result<std::unique_ptr<PeerEntry>> PeerEntry::Open(const std::string& uri, const WarmOptions& in) {
  WarmOptions o = in;
  o.ids.clear();
  o.progress = nullptr;
  if (o.cache.env == nullptr) o.cache.env = Env::Default();
  SSDFEED_ASSIGN_OR_RETURN(auto source, OpenSource(uri, o.source));
  EntryKey key = MakeEntryKey(*source, o.source, o.prepare);
  SSDFEED_ASSIGN_OR_RETURN(auto entry, CacheEntry::Open(o.cache, key));
  if (entry->read_only())
    return Status::InvalidArgument(entry->dir() + ": owned by another user, read only");
  std::string warning;
  auto stats = StatsPublisher::Create(o.cache.env, o.cache, Basename(entry->dir()), &warning);
  return std::unique_ptr<PeerEntry>(new PeerEntryImpl(
      std::move(source), std::move(o), std::move(key), std::move(entry), std::move(stats)));
}

}  // namespace ssdfeed
