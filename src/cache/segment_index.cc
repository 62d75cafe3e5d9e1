#include "cache/segment_index.h"

#include "cache/entry_files.h"

namespace ssdfeed {

namespace cf = cache_format;

SegmentIndex::SegmentIndex(Env* env, std::string dir, uint64_t samples_total)
    : env_(env), dir_(std::move(dir)), size_(samples_total), index_(samples_total) {}

Status SegmentIndex::Refresh() {
  MutexLock rl(&refresh_mu_);
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(env_->GetChildren(dir_, &names));
  for (const auto& n : names) {
    std::string base;
    if (!SegmentBaseOf(n, ".idx", &base)) continue;
    SSDFEED_RETURN_IF_ERROR(ReadNewEntries(base));
  }
  return Status::OK();
}

uint32_t SegmentIndex::SlotFor(const std::string& base) {
  auto it = slot_by_base_.find(base);
  if (it != slot_by_base_.end()) return it->second;
  WriterLock l(&mu_);
  auto seg = std::make_unique<Segment>();
  seg->base = base;
  segments_.push_back(std::move(seg));
  uint32_t slot = static_cast<uint32_t>(segments_.size() - 1);
  slot_by_base_[base] = slot;
  return slot;
}

Status SegmentIndex::ReadNewEntries(const std::string& base) {
  std::string idx_path = JoinPath(dir_, base + ".idx");
  auto fi = env_->Lstat(idx_path);
  if (!fi.ok()) return fi.status().IsNotFound() ? Status::OK() : fi.status();
  // Planted links are never followed; a FIFO would block the open.
  if (!fi->is_regular) return Status::OK();
  uint32_t slot = SlotFor(base);
  Segment* seg;
  {
    ReaderLock l(&mu_);
    seg = segments_[slot].get();
  }
  if (seg->own) return Status::OK();
  // Unchanged since we last looked: no open, no read (refreshes stay cheap).
  if (fi->size == seg->idx_seen_size) return Status::OK();
  auto idx = env_->NewRandomAccessFile(idx_path);
  if (!idx.ok()) return idx.status().IsNotFound() ? Status::OK() : idx.status();
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, (*idx)->Size());
  seg->idx_seen_size = size;
  uint64_t whole = size / cf::kIndexEntrySize * cf::kIndexEntrySize;  // torn tail: end of file
  if (whole <= seg->idx_consumed) return Status::OK();
  std::unique_ptr<RandomAccessFile> dat;
  if (!seg->dat) {
    std::string dat_path = JoinPath(dir_, base + ".dat");
    auto dfi = env_->Lstat(dat_path);
    if (!dfi.ok() || !dfi->is_regular) return Status::OK();  // missing, or planted
    auto d = env_->NewRandomAccessFile(dat_path);
    if (!d.ok()) return d.status().IsNotFound() ? Status::OK() : d.status();
    dat = std::move(*d);
  }
  // The .dat size is read after the .idx size: every entry read below was
  // appended after its record, so a live writer's entries are all in bounds.
  SSDFEED_ASSIGN_OR_RETURN(uint64_t dat_size, (seg->dat ? seg->dat : dat)->Size());
  std::string buf(whole - seg->idx_consumed, '\0');
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR((*idx)->Read(seg->idx_consumed, buf.size(), buf.data(), &got));
  got = got / cf::kIndexEntrySize * cf::kIndexEntrySize;
  WriterLock l(&mu_);
  if (dat) seg->dat = std::move(dat);
  uint64_t consumed = 0;
  for (size_t off = 0; off < got; off += cf::kIndexEntrySize) {
    cf::IndexEntry e;
    if (!cf::DecodeIndexEntry(buf.data() + off, &e)) continue;  // flipped: skip it
    // Past the data (lost in a power cut): not consumed, so that when the
    // slot's next writer cuts this tail and appends, we read what it writes.
    if (e.offset + e.record_len > dat_size) break;
    ApplyLocked(slot, e);
    consumed = off + cf::kIndexEntrySize;
  }
  seg->idx_consumed += consumed;
  return Status::OK();
}

uint32_t SegmentIndex::AttachOwn(const std::string& base,
                                 std::unique_ptr<RandomAccessFile> reader) {
  MutexLock rl(&refresh_mu_);
  uint32_t slot = SlotFor(base);
  WriterLock l(&mu_);
  // Get copies the reader pointer and reads without the lock: a reader of
  // this file (taken over from a dead writer) must stay alive, and it reads
  // the same inode, which the takeover only cut at its torn tail.
  if (!segments_[slot]->dat) segments_[slot]->dat = std::move(reader);
  segments_[slot]->own = true;
  return slot;
}

void SegmentIndex::Apply(uint32_t seg, const cf::IndexEntry& e) {
  WriterLock l(&mu_);
  ApplyLocked(seg, e);
}

void SegmentIndex::ApplyLocked(uint32_t seg, const cf::IndexEntry& e) {
  if (e.sample_id >= index_.size()) return;
  Loc& cur = index_[e.sample_id];
  if (cur.seg != kAbsent && cur.seq > e.stamp) return;  // the newest record wins
  if (cur.seg == kAbsent) present_.fetch_add(1, std::memory_order_relaxed);
  cur = Loc{seg, e.record_len, e.offset, e.stamp};
  if (e.stamp > max_seq_.load(std::memory_order_relaxed))
    max_seq_.store(e.stamp, std::memory_order_relaxed);
}

void SegmentIndex::Drop(uint64_t id, const Loc& seen) {
  WriterLock l(&mu_);
  Loc& cur = index_[id];
  if (cur.seg == seen.seg && cur.offset == seen.offset) {
    cur = Loc{};
    present_.fetch_sub(1, std::memory_order_relaxed);
  }
}

bool SegmentIndex::Contains(uint64_t id) {
  ReaderLock l(&mu_);
  return id < index_.size() && index_[id].seg != kAbsent;
}

uint32_t SegmentIndex::RecordLength(uint64_t id) {
  ReaderLock l(&mu_);
  return id < index_.size() && index_[id].seg != kAbsent ? index_[id].len : 0;
}

Status SegmentIndex::Check(uint64_t id, const Loc& loc, const RandomAccessFile* dat,
                           const char* rec, size_t got, CachedSample* out) {
  cf::RecordHeader h;
  std::string bad =
      got >= loc.len ? cf::CheckRecord(rec, loc.len, id, &h) : std::string("record cut short");
  if (!bad.empty()) {
    Drop(id, loc);
    return Status::Corruption(dat->path() + " offset " + std::to_string(loc.offset) + ": sample " +
                              std::to_string(id) + ": " + bad);
  }
  out->pixels = reinterpret_cast<const uint8_t*>(rec) + cf::kRecordHeaderSize;
  out->height = h.height;
  out->width = h.width;
  out->channels = h.channels;
  out->label = h.label;
  return Status::OK();
}

Status SegmentIndex::Get(uint64_t id, std::string* buf, CachedSample* out) {
  if (id >= size_) return Status::InvalidArgument("sample id out of range");
  Loc loc;
  const RandomAccessFile* dat = nullptr;
  {
    ReaderLock l(&mu_);
    loc = index_[id];
    if (loc.seg == kAbsent) return Status::NotFound("not cached");
    dat = segments_[loc.seg]->dat.get();
  }
  buf->resize(loc.len);
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(dat->Read(loc.offset, loc.len, buf->data(), &got));
  return Check(id, loc, dat, buf->data(), got, out);
}

const RandomAccessFile* SegmentIndex::DirectFile(Segment* seg) {
  std::call_once(seg->direct_once, [&] {
    RandomAccessFileOptions o;
    o.direct = true;
    auto f = env_->NewRandomAccessFile(JoinPath(dir_, seg->base + ".dat"), o);
    if (f.ok()) seg->direct = std::move(*f);
  });
  return seg->direct.get();
}

struct SegmentIndex::Pending {
  size_t read = 0;  // index into the caller's reads
  Loc loc;
  const RandomAccessFile* buffered = nullptr;  // names the file in errors
  size_t skew = 0;                             // record offset - aligned offset
};

class SegmentIndex::Batch final : public CacheReadBatch {
 public:
  Batch(SegmentIndex* index, CacheRead* reads) : index_(index), reads_(reads) {}
  ~Batch() override { Finish(); }

  void Start(Env* env) {
    if (!reqs_.empty()) inflight_ = env->StartReads(reqs_.data(), reqs_.size());
  }

  void Finish() override {
    if (inflight_ == nullptr) return;
    inflight_->Wait();
    inflight_.reset();
    for (size_t k = 0; k < pend_.size(); ++k) {
      const Pending& p = pend_[k];
      CacheRead& r = reads_[p.read];
      r.status = reqs_[k].status;
      if (!r.status.ok()) continue;
      // A window past the end of the file comes back short: only the
      // record's own bytes must be there.
      size_t got = reqs_[k].got > p.skew ? reqs_[k].got - p.skew : 0;
      r.status = index_->Check(r.id, p.loc, p.buffered, reqs_[k].scratch + p.skew, got, &r.sample);
    }
  }

  std::vector<Pending> pend_;
  std::vector<ReadRequest> reqs_;

 private:
  SegmentIndex* index_;
  CacheRead* reads_;
  std::unique_ptr<PendingReads> inflight_;
};

std::unique_ptr<CacheReadBatch> SegmentIndex::StartGetMany(CacheRead* reads, size_t n,
                                                           ReadBuffers* bufs, uint64_t* direct) {
  auto batch = std::make_unique<Batch>(this, reads);
  std::vector<Segment*> segs(n, nullptr);
  std::vector<Loc> locs(n);
  {
    ReaderLock l(&mu_);
    for (size_t i = 0; i < n; ++i) {
      if (reads[i].id >= size_) continue;
      locs[i] = index_[reads[i].id];
      if (locs[i].seg != kAbsent) segs[i] = segments_[locs[i].seg].get();
    }
  }
  const bool use_direct = direct_.load(std::memory_order_relaxed);
  constexpr uint64_t kAlign = kDirectIoAlignment;
  for (size_t i = 0; i < n; ++i) {
    CacheRead& r = reads[i];
    if (r.id >= size_) {
      r.status = Status::InvalidArgument("sample id out of range");
      continue;
    }
    if (segs[i] == nullptr) {
      r.status = Status::NotFound("not cached");
      continue;
    }
    const Loc& loc = locs[i];
    const RandomAccessFile* df = use_direct ? DirectFile(segs[i]) : nullptr;
    // Records are packed, not aligned: read the aligned window holding one.
    uint64_t start = loc.offset / kAlign * kAlign;
    uint64_t end = (loc.offset + loc.len + kAlign - 1) / kAlign * kAlign;
    char* buf = bufs->Get(i, df ? end - start : loc.len);
    if (buf == nullptr) {
      r.status = Status::IOError("out of memory for a read buffer");
      continue;
    }
    if (df == nullptr) {
      size_t got = 0;
      r.status = segs[i]->dat->Read(loc.offset, loc.len, buf, &got);
      if (r.status.ok()) r.status = Check(r.id, loc, segs[i]->dat.get(), buf, got, &r.sample);
      continue;
    }
    Pending p;
    p.read = i;
    p.loc = loc;
    p.buffered = segs[i]->dat.get();
    p.skew = static_cast<size_t>(loc.offset - start);
    batch->pend_.push_back(p);
    ReadRequest q;
    q.file = df;
    q.offset = start;
    q.n = static_cast<size_t>(end - start);
    q.scratch = buf;
    batch->reqs_.push_back(q);
  }
  *direct = batch->reqs_.size();
  batch->Start(env_);
  return batch;
}

uint64_t SegmentIndex::DataBytes() {
  std::vector<const RandomAccessFile*> files;
  {
    ReaderLock l(&mu_);
    for (const auto& s : segments_)
      if (s->dat) files.push_back(s->dat.get());
  }
  uint64_t total = 0;
  for (const RandomAccessFile* f : files) {
    auto sz = f->Size();
    if (sz.ok()) total += *sz;
  }
  return total;
}

}  // namespace ssdfeed
