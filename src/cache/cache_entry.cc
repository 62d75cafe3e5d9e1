// CacheEntry: segments of checksummed records plus per-segment index files,
// one writer per process, readers that follow every writer's index.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <shared_mutex>
#include <thread>

#include "cache/capacity.h"
#include "cache/claims.h"
#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "ssdfeed/cache.h"
#include "util/hash.h"

namespace ssdfeed {

namespace cf = cache_format;

std::string EntryKey::fingerprint() const {
  Fingerprinter fp;
  fp.Add("ssdfeed-cache-v" + std::to_string(cf::kFormatVersion));
  fp.Add(source_identity);
  fp.Add(spec);
  fp.Add(std::to_string(samples_total));
  return fp.HexDigest();
}

namespace {

constexpr uint32_t kAbsent = 0xffffffffu;

struct Loc {
  uint32_t seg = kAbsent;
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t stamp = 0;
};

struct Segment {
  std::string name;  // without extension
  std::unique_ptr<RandomAccessFile> dat;
  uint64_t idx_consumed = 0;
};

std::string NewWriterId() {
  std::random_device rd;
  uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(Mix64(r)));
  return buf;
}

class CacheEntryImpl final : public CacheEntry {
 public:
  CacheEntryImpl(const CacheOptions& opts, const EntryKey& key, std::string dir, bool foreign,
                 std::string writer_id, std::unique_ptr<Capacity> capacity)
      : opts_(opts),
        key_(key),
        dir_(std::move(dir)),
        foreign_(foreign),
        index_(key.samples_total),
        writer_id_(std::move(writer_id)),
        capacity_(std::move(capacity)) {
    admitting_ = !foreign_;
    if (foreign_) warning_ = "entry owned by another user: read only";
  }

  ~CacheEntryImpl() override {
    {
      std::lock_guard<std::mutex> f(flag_mu_);
      stop_syncer_ = true;
    }
    sync_cv_.notify_one();
    if (syncer_.joinable()) syncer_.join();
    std::lock_guard<std::mutex> l(wmu_);
    if (wdat_) {
      SyncLocked();
      wdat_->Close();
      widx_->Close();
    }
    capacity_.reset();  // drops our reservation
    if (!foreign_)
      WriteStatus(opts_.env, dir_, samples_present(), key_.samples_total, FileMode(opts_));
  }

  Status Init() {
    if (!foreign_) {
      SSDFEED_RETURN_IF_ERROR(
          claims_.Open(JoinPath(dir_, "claims"), key_.samples_total, FileMode(opts_)));
      capacity_->SetCounters(&counters_);
    }
    return Refresh();
  }

  void SetUseLock(std::unique_ptr<FileLock> l) { use_lock_ = std::move(l); }

  Status Get(uint64_t id, std::string* buf, CachedSample* out) override {
    if (id >= index_.size()) return Status::InvalidArgument("sample id out of range");
    Loc loc;
    const RandomAccessFile* dat = nullptr;
    {
      std::shared_lock<std::shared_mutex> l(mu_);
      loc = index_[id];
      if (loc.seg == kAbsent) return Status::NotFound("not cached");
      dat = segments_[loc.seg].dat.get();
    }
    buf->resize(loc.len);
    size_t got = 0;
    Status s = dat->Read(loc.offset, loc.len, buf->data(), &got);
    if (!s.ok()) return s;
    cf::RecordHeader h;
    std::string bad = got == loc.len ? cf::CheckRecord(buf->data(), loc.len, id, &h)
                                     : std::string("record cut short");
    if (!bad.empty()) {
      Drop(id, loc);
      return Status::Corruption(dat->path() + " offset " + std::to_string(loc.offset) +
                                ": sample " + std::to_string(id) + ": " + bad);
    }
    out->pixels = reinterpret_cast<const uint8_t*>(buf->data()) + cf::kRecordHeaderSize;
    out->height = h.height;
    out->width = h.width;
    out->channels = h.channels;
    out->label = h.label;
    return Status::OK();
  }

  bool Contains(uint64_t id) override {
    std::shared_lock<std::shared_mutex> l(mu_);
    return id < index_.size() && index_[id].seg != kAbsent;
  }

  Status Put(uint64_t id, int64_t label, const uint8_t* pixels, int height, int width,
             int channels) override {
    if (id >= index_.size()) return Status::InvalidArgument("sample id out of range");
    if (height > 65535 || width > 65535)
      return Status::InvalidArgument("prepared image too large to cache");
    std::lock_guard<std::mutex> l(wmu_);
    if (!admitting_) return Status::NoSpace(warning_);
    cf::RecordHeader h;
    h.payload_len = static_cast<uint32_t>(static_cast<size_t>(height) * width * channels);
    h.sample_id = id;
    h.height = static_cast<uint16_t>(height);
    h.width = static_cast<uint16_t>(width);
    h.channels = static_cast<uint8_t>(channels);
    h.label = label;
    uint32_t rec_len = static_cast<uint32_t>(cf::kRecordHeaderSize + h.payload_len);
    uint64_t need = rec_len + cf::kIndexEntrySize;
    if (reserved_left_ < need) {
      auto r = capacity_->Reserve(need);
      if (!r.ok()) return StopAdmitting(r.status(), &counters_.capacity_denied);
      reserved_left_ = *r;
    }
    Status s = EnsureSegmentLocked(need);
    char hdr[cf::kRecordHeaderSize];
    cf::EncodeRecordHeader(&h, pixels, hdr);
    uint64_t offset = s.ok() ? wdat_->Size() : 0;
    if (s.ok()) s = wdat_->Append(hdr, sizeof(hdr));
    if (s.ok()) s = wdat_->Append(pixels, h.payload_len);
    cf::IndexEntry ie{id,
                      offset,
                      rec_len,
                      h.height,
                      h.width,
                      h.channels,
                      static_cast<uint64_t>(opts_.env->NowMicros()),
                      h.checksum};
    char idx[cf::kIndexEntrySize];
    cf::EncodeIndexEntry(ie, idx);
    // The index entry goes after its record: a record without one is a torn
    // tail nobody reads; an entry without its record fails its checksum.
    if (s.ok()) s = widx_->Append(idx, sizeof(idx));
    if (!s.ok()) return StopAdmitting(s, &counters_.write_errors);
    reserved_left_ -= need;
    unsynced_ += need;
    if (unsynced_ >= opts_.sync_bytes) RequestSyncLocked();
    {
      std::unique_lock<std::shared_mutex> ul(mu_);
      Apply(wseg_, ie);
    }
    counters_.puts++;
    counters_.put_bytes += rec_len;
    return Status::OK();
  }

  bool admitting() const override {
    std::lock_guard<std::mutex> l(wmu_);
    return admitting_;
  }

  bool TryClaim(uint64_t id) override { return foreign_ || claims_.TryClaim(id); }
  void ReleaseClaim(uint64_t id) override {
    if (!foreign_) claims_.Release(id);
  }

  Status Refresh() override {
    std::lock_guard<std::mutex> rl(refresh_mu_);
    std::vector<std::string> names;
    SSDFEED_RETURN_IF_ERROR(opts_.env->GetChildren(dir_, &names));
    for (const auto& n : names) {
      std::string base;
      if (!SegmentBaseOf(n, ".idx", &base)) continue;
      if (base.find(writer_id_) != std::string::npos) continue;  // ours: indexed on Put
      auto fi = opts_.env->Lstat(JoinPath(dir_, n));
      if (!fi.ok() || fi->is_symlink || fi->is_dir) continue;  // planted links are never followed
      SSDFEED_RETURN_IF_ERROR(ReadNewIndexEntries(base));
    }
    return Status::OK();
  }

  Status Sync() override {
    std::lock_guard<std::mutex> l(wmu_);
    return SyncLocked();
  }

  uint64_t samples_present() override {
    std::shared_lock<std::shared_mutex> l(mu_);
    uint64_t n = 0;
    for (const auto& loc : index_) n += loc.seg != kAbsent;
    return n;
  }
  uint64_t samples_total() const override { return key_.samples_total; }
  bool read_only() const override { return foreign_; }
  const std::string& dir() const override { return dir_; }
  const std::string& warning() const override { return warning_; }
  CacheCounters& counters() override { return counters_; }

 private:
  void Drop(uint64_t id, const Loc& seen) {
    std::unique_lock<std::shared_mutex> l(mu_);
    Loc& cur = index_[id];
    if (cur.seg == seen.seg && cur.offset == seen.offset) cur = Loc{};
    counters_.corrupt_records++;
  }

  // Caller holds mu_ exclusively.
  void Apply(uint32_t seg, const cf::IndexEntry& e) {
    if (e.sample_id >= index_.size()) return;
    Loc& cur = index_[e.sample_id];
    if (cur.seg != kAbsent && cur.stamp > e.stamp) return;  // the newest record wins
    cur = Loc{seg, e.record_len, e.offset, e.stamp};
  }

  uint32_t SegmentSlot(const std::string& base) {
    auto it = seg_by_name_.find(base);
    if (it != seg_by_name_.end()) return it->second;
    std::unique_lock<std::shared_mutex> l(mu_);
    segments_.push_back(Segment{base, nullptr, 0});
    uint32_t slot = static_cast<uint32_t>(segments_.size() - 1);
    seg_by_name_[base] = slot;
    return slot;
  }

  Status ReadNewIndexEntries(const std::string& base) {
    Env* env = opts_.env;
    uint32_t slot = SegmentSlot(base);
    Segment& seg = segments_[slot];
    auto idx = env->NewRandomAccessFile(JoinPath(dir_, base + ".idx"));
    if (!idx.ok()) return idx.status().IsNotFound() ? Status::OK() : idx.status();
    SSDFEED_ASSIGN_OR_RETURN(uint64_t size, (*idx)->Size());
    uint64_t whole = size / cf::kIndexEntrySize * cf::kIndexEntrySize;  // torn tail ignored
    if (whole <= seg.idx_consumed) return Status::OK();
    if (!seg.dat) {
      auto dat = env->NewRandomAccessFile(JoinPath(dir_, base + ".dat"));
      if (!dat.ok()) return dat.status().IsNotFound() ? Status::OK() : dat.status();
      seg.dat = std::move(*dat);
    }
    SSDFEED_ASSIGN_OR_RETURN(uint64_t dat_size, seg.dat->Size());
    std::string buf(whole - seg.idx_consumed, '\0');
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR((*idx)->Read(seg.idx_consumed, buf.size(), buf.data(), &got));
    got = got / cf::kIndexEntrySize * cf::kIndexEntrySize;
    std::unique_lock<std::shared_mutex> l(mu_);
    for (size_t off = 0; off < got; off += cf::kIndexEntrySize) {
      cf::IndexEntry e;
      if (!cf::DecodeIndexEntry(buf.data() + off, &e)) continue;  // flipped: skip it
      if (e.offset + e.record_len > dat_size) continue;           // data lost (power cut)
      Apply(slot, e);
    }
    seg.idx_consumed += got;
    return Status::OK();
  }

  Status EnsureSegmentLocked(uint64_t need) {
    if (wdat_ && wdat_->Size() + need <= opts_.segment_bytes) return Status::OK();
    std::lock_guard<std::mutex> files(files_mu_);  // the syncer must not hold old files
    if (wdat_) {
      SSDFEED_RETURN_IF_ERROR(SyncFiles());
      SSDFEED_RETURN_IF_ERROR(wdat_->Close());
      SSDFEED_RETURN_IF_ERROR(widx_->Close());
    }
    char seq[8];
    std::snprintf(seq, sizeof(seq), "%04d", seg_seq_++);
    std::string base = "seg-" + writer_id_ + "-" + seq;
    WritableFileOptions wo;
    wo.truncate = true;
    wo.mode = FileMode(opts_);
    Env* env = opts_.env;
    SSDFEED_ASSIGN_OR_RETURN(wdat_, env->NewWritableFile(JoinPath(dir_, base + ".dat"), wo));
    SSDFEED_ASSIGN_OR_RETURN(widx_, env->NewWritableFile(JoinPath(dir_, base + ".idx"), wo));
    SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir_));
    SSDFEED_ASSIGN_OR_RETURN(auto reader, env->NewRandomAccessFile(JoinPath(dir_, base + ".dat")));
    std::lock_guard<std::mutex> rl(refresh_mu_);
    wseg_ = SegmentSlot(base);
    std::unique_lock<std::shared_mutex> l(mu_);
    segments_[wseg_].dat = std::move(reader);
    return Status::OK();
  }

  // Caller holds wmu_.
  Status SyncLocked() {
    std::lock_guard<std::mutex> files(files_mu_);
    unsynced_ = 0;
    return SyncFiles();
  }

  // Caller holds files_mu_ (so the files are not swapped meanwhile).
  Status SyncFiles() {
    if (!wdat_) return Status::OK();
    // Data first, then the index that points into it.
    SSDFEED_RETURN_IF_ERROR(wdat_->Sync());
    return widx_->Sync();
  }

  // Put only asks for a sync; a background thread does the fdatasyncs, so no
  // worker waits on the disk while it holds the writer lock. Caller holds wmu_.
  void RequestSyncLocked() {
    unsynced_ = 0;
    {
      std::lock_guard<std::mutex> f(flag_mu_);
      sync_requested_ = true;
    }
    sync_cv_.notify_one();
    if (!syncer_.joinable()) syncer_ = std::thread([this] { SyncLoop(); });
  }

  void SyncLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> f(flag_mu_);
        sync_cv_.wait(f, [&] { return sync_requested_ || stop_syncer_; });
        if (stop_syncer_) return;  // the destructor syncs what is left
        sync_requested_ = false;
      }
      Status s;
      {
        std::lock_guard<std::mutex> files(files_mu_);
        s = SyncFiles();
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> l(wmu_);
        StopAdmitting(s, &counters_.write_errors);
      }
    }
  }

  Status StopAdmitting(const Status& why, std::atomic<uint64_t>* counter) {
    (*counter)++;
    if (admitting_) {
      admitting_ = false;
      warning_ = why.message();
      std::fprintf(stderr,
                   "ssdfeed: warning: cache entry %s stops admitting samples (%s); what it holds "
                   "is still served, the rest comes from the origin\n",
                   dir_.c_str(), warning_.c_str());
    }
    return why;
  }

  CacheOptions opts_;
  EntryKey key_;
  std::string dir_;
  bool foreign_;
  CacheCounters counters_;
  std::unique_ptr<FileLock> use_lock_;
  Claims claims_;

  std::shared_mutex mu_;  // index_ and segments_
  std::vector<Loc> index_;
  std::vector<Segment> segments_;  // only appended to; readers hold mu_
  std::mutex refresh_mu_;          // seg_by_name_, idx reading
  std::map<std::string, uint32_t> seg_by_name_;

  mutable std::mutex wmu_;  // the writer; taken before files_mu_
  std::mutex files_mu_;     // wdat_/widx_ are not swapped while held
  std::mutex flag_mu_;      // sync_requested_, stop_syncer_
  std::condition_variable sync_cv_;
  bool sync_requested_ = false, stop_syncer_ = false;
  std::thread syncer_;
  std::string writer_id_;
  std::unique_ptr<WritableFile> wdat_, widx_;
  uint32_t wseg_ = kAbsent;
  int seg_seq_ = 0;
  uint64_t unsynced_ = 0;
  uint64_t reserved_left_ = 0;
  bool admitting_ = true;
  std::string warning_;
  std::unique_ptr<Capacity> capacity_;
};

}  // namespace

Result<std::unique_ptr<CacheEntry>> CacheEntry::Open(const CacheOptions& in, const EntryKey& key) {
  CacheOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  if (opts.root.empty()) return Status::InvalidArgument("cache root not set");
  Env* env = opts.env;
  RootPaths paths(opts.root);
  std::string fp = key.fingerprint();
  std::string dir = JoinPath(paths.entries, fp);
  std::string writer_id = NewWriterId();
  for (int attempt = 0; attempt < 5; ++attempt) {
    SSDFEED_RETURN_IF_ERROR(CreateDirs(env, opts.root, DirMode(opts)));
    SSDFEED_RETURN_IF_ERROR(env->CreateDir(paths.entries, DirMode(opts)));
    auto capacity = std::make_unique<Capacity>(opts, dir, writer_id, nullptr);
    auto fi = env->Lstat(dir);
    if (fi.ok() && (fi->is_symlink || !fi->is_dir))
      return Status::InvalidArgument(dir + ": not a directory (a symlink?); refusing to follow it");
    if (!fi.ok()) {
      // A new entry's small files are charged before they exist.
      auto r = capacity->Reserve(MetaAllowance(key.samples_total));
      if (!r.ok()) return r.status().WithContext("cannot create cache entry " + dir);
      SSDFEED_RETURN_IF_ERROR(env->CreateDir(dir, DirMode(opts)));
    }
    SSDFEED_ASSIGN_OR_RETURN(FileInfo info, env->Lstat(dir));
    bool foreign = info.uid != ::geteuid();
    SSDFEED_RETURN_IF_ERROR(EnsureManifest(env, dir, key, fp, foreign, FileMode(opts)));
    SSDFEED_ASSIGN_OR_RETURN(auto lock, env->LockFile(JoinPath(dir, "use.lock"), false, true));
    // An evictor may have moved the entry away while we waited: start over.
    if (!env->FileExists(JoinPath(dir, "manifest.json"))) continue;
    if (!foreign) TouchLastUsed(env, dir, FileMode(opts));
    auto entry =
        std::make_unique<CacheEntryImpl>(opts, key, dir, foreign, writer_id, std::move(capacity));
    entry->SetUseLock(std::move(lock));
    SSDFEED_RETURN_IF_ERROR(entry->Init());
    return std::unique_ptr<CacheEntry>(std::move(entry));
  }
  return Status::Busy(dir + ": entry keeps being evicted while opening");
}

Status VerifyEntry(CacheEntry* entry, VerifyReport* report) {
  *report = {};
  SSDFEED_RETURN_IF_ERROR(entry->Refresh());
  std::string buf;
  for (uint64_t id = 0; id < entry->samples_total(); ++id) {
    if (!entry->Contains(id)) {
      report->missing++;
      continue;
    }
    CachedSample s;
    Status st = entry->Get(id, &buf, &s);
    if (st.ok()) {
      report->good++;
    } else if (st.IsCorruption()) {
      report->corrupt++;
      report->corrupt_ids.push_back(id);
    } else {
      return st;
    }
  }
  return Status::OK();
}

}  // namespace ssdfeed
