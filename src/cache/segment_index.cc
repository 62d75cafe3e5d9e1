#include "cache/segment_index.h"

#include <algorithm>

#include "cache/entry_files.h"
#include "image/pixel_codec.h"
#include "util/fd_limit.h"
#include "util/stage_clock.h"

namespace ssdfeed {

namespace cf = cache_format;

SegmentIndex::SegmentIndex(Env* env, std::string dir, uint64_t samples_total, cf::RecordRules rules)
    : env_(env),
      dir_(std::move(dir)),
      size_(samples_total),
      rules_(rules),
      index_(samples_total),
      max_open_(SegmentFileBudget()) {}

void SegmentIndex::SetMaxOpenFiles(size_t n) {
  MutexLock l(&files_mu_);
  max_open_ = std::max<size_t>(n, 1);
  EvictLocked();
}

size_t SegmentIndex::open_files() {
  MutexLock l(&files_mu_);
  return open_files_;
}

void SegmentIndex::TouchLocked(Segment* seg) {
  if (seg->in_lru) {
    lru_.splice(lru_.begin(), lru_, seg->lru);
  } else {
    lru_.push_front(seg);
    seg->lru = lru_.begin();
    seg->in_lru = true;
  }
  EvictLocked();
}

void SegmentIndex::CloseLocked(Segment* seg) {
  open_files_ -= (seg->dat ? 1 : 0) + (seg->direct ? 1 : 0);
  seg->dat.reset();
  seg->direct.reset();
  if (seg->in_lru) lru_.erase(seg->lru);
  seg->in_lru = false;
}

// The most recently used segment keeps its files: its caller reads them next.
void SegmentIndex::EvictLocked() {
  while (open_files_ > max_open_ && lru_.size() > 1) CloseLocked(lru_.back());
}

Result<std::shared_ptr<const RandomAccessFile>> SegmentIndex::DatFile(Segment* seg) {
  MutexLock l(&files_mu_);
  if (!seg->dat) {
    SSDFEED_ASSIGN_OR_RETURN(auto f, env_->NewRandomAccessFile(JoinPath(dir_, seg->base + ".dat")));
    seg->dat = std::move(f);
    ++open_files_;
  }
  TouchLocked(seg);
  return seg->dat;
}

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
  std::string dat_path = JoinPath(dir_, base + ".dat");
  auto dfi = env_->Lstat(dat_path);
  if (!dfi.ok() || !dfi->is_regular) return Status::OK();  // missing, or planted
  auto dat = DatFile(seg);
  if (!dat.ok()) return dat.status().IsNotFound() ? Status::OK() : dat.status();
  // The .dat size is read after the .idx size: every entry read below was
  // appended after its record, so a live writer's entries are all in bounds.
  SSDFEED_ASSIGN_OR_RETURN(uint64_t dat_size, (*dat)->Size());
  // Each entry follows its own record (at least a header) in the .dat: an
  // .idx longer than that (a sparse one any member of a group-shared root
  // may plant) is read only that far, and in bounded chunks, so its size
  // never becomes an allocation.
  whole = std::min(whole, (dat_size / cf::kRecordHeaderSize + 1) * cf::kIndexEntrySize);
  uint64_t consumed = seg->idx_consumed;
  std::string buf;
  for (uint64_t pos = seg->idx_consumed; pos < whole;) {
    buf.resize(std::min<uint64_t>(whole - pos, kIndexReadChunk));
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR((*idx)->Read(pos, buf.size(), buf.data(), &got));
    got = got / cf::kIndexEntrySize * cf::kIndexEntrySize;
    bool more;
    {
      WriterLock l(&mu_);
      more = ApplyEntries(slot, buf.data(), got, pos, dat_size, &consumed) && got == buf.size();
    }
    if (!more) break;
    pos += got;
  }
  seg->idx_consumed = consumed;
  return Status::OK();
}

bool SegmentIndex::ApplyEntries(uint32_t slot, const char* buf, size_t n, uint64_t pos,
                                uint64_t dat_size, uint64_t* consumed) {
  for (size_t off = 0; off < n; off += cf::kIndexEntrySize) {
    cf::IndexEntry e;
    if (!cf::DecodeIndexEntry(buf + off, &e)) continue;  // flipped: skip it
    // Past the data (lost in a power cut): not consumed, so that when the
    // slot's next writer cuts this tail and appends, we read what it writes.
    if (e.offset > dat_size || e.record_len > dat_size - e.offset) return false;
    ApplyLocked(slot, e);
    *consumed = pos + off + cf::kIndexEntrySize;
  }
  return true;
}

uint32_t SegmentIndex::AttachOwn(const std::string& base,
                                 std::unique_ptr<RandomAccessFile> reader) {
  MutexLock rl(&refresh_mu_);
  uint32_t slot = SlotFor(base);
  Segment* seg;
  {
    WriterLock l(&mu_);
    seg = segments_[slot].get();
    seg->own = true;
  }
  // A reader of this file (taken over from a dead writer) may be reading
  // it: it holds its own copy, and reads the same inode, which the takeover
  // only cut at its torn tail. A later reopen by name finds that inode too.
  MutexLock fl(&files_mu_);
  if (!seg->dat) {
    seg->dat = std::move(reader);
    ++open_files_;
  }
  TouchLocked(seg);
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
                           const char* rec, size_t got, CachedSample* out, PixelsTo to) {
  cf::RecordHeader h;
  std::string bad = got >= loc.len ? cf::CheckRecord(rec, loc.len, id, rules_, &h)
                                   : std::string("record cut short");
  uint8_t* dst = nullptr;
  if (bad.empty() && h.codec != 0) {
    size_t n = h.pixel_bytes();
    if (to.str != nullptr) {
      if (to.str->size() < loc.len + n) to.str->resize(loc.len + n);
      rec = to.str->data();
      dst = reinterpret_cast<uint8_t*>(to.str->data()) + loc.len;
    } else if (to.bufs != nullptr) {
      dst = to.bufs->Pixels(to.slot, n);
      if (dst == nullptr) return Status::IOError("out of memory for decoded pixels");
    }
  }
  if (bad.empty()) {
    cf::SampleOf(rec, h, out);
    // A record that fails to decode is damage like any other: the checksum
    // only vouches for the stored bytes.
    if (dst != nullptr) {
      MarkStage(Tmr::kCacheRead);  // read and checked; the codec's decode follows
      Status d = cf::DecodeSample(out, dst, ThisThreadCodecScratch());
      MarkStage(Tmr::kRecordDecode);
      if (!d.ok()) bad = d.message();
    }
  }
  if (!bad.empty()) {
    Drop(id, loc);
    return Status::Corruption(dat->path() + " offset " + std::to_string(loc.offset) + ": sample " +
                              std::to_string(id) + ": " + bad);
  }
  return Status::OK();
}

Status SegmentIndex::ReadRecord(uint64_t id, std::string* buf, Loc* loc,
                                std::shared_ptr<const RandomAccessFile>* dat, size_t* got) {
  if (id >= size_) return Status::InvalidArgument("sample id out of range");
  Segment* seg;
  {
    ReaderLock l(&mu_);
    *loc = index_[id];
    if (loc->seg == kAbsent) return Status::NotFound("not cached");
    seg = segments_[loc->seg].get();
  }
  SSDFEED_ASSIGN_OR_RETURN(*dat, DatFile(seg));
  // Grown, never shrunk: decoded pixels follow the record, and a buffer
  // that keeps its size is not zero-filled again by the next read.
  if (buf->size() < loc->len) buf->resize(loc->len);
  *got = 0;
  return (*dat)->Read(loc->offset, loc->len, buf->data(), got);
}

Status SegmentIndex::Get(uint64_t id, std::string* buf, CachedSample* out, bool decode) {
  Loc loc;
  std::shared_ptr<const RandomAccessFile> dat;
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(ReadRecord(id, buf, &loc, &dat, &got));
  PixelsTo to;
  to.str = decode ? buf : nullptr;
  return Check(id, loc, dat.get(), buf->data(), got, out, to);
}

Status SegmentIndex::GetStored(uint64_t id, std::string* buf, CachedSample* out) {
  Loc loc;
  std::shared_ptr<const RandomAccessFile> dat;
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(ReadRecord(id, buf, &loc, &dat, &got));
  buf->resize(loc.len);
  return Check(id, loc, dat.get(), buf->data(), got, out, PixelsTo());
}

std::shared_ptr<const RandomAccessFile> SegmentIndex::DirectFile(Segment* seg) {
  MutexLock l(&files_mu_);
  if (!seg->direct && !seg->direct_refused) {
    RandomAccessFileOptions o;
    o.direct = true;
    auto f = env_->NewRandomAccessFile(JoinPath(dir_, seg->base + ".dat"), o);
    if (f.ok()) {
      seg->direct = std::move(*f);
      ++open_files_;
    } else {
      seg->direct_refused = true;
    }
  }
  if (seg->direct) TouchLocked(seg);
  return seg->direct;
}

struct SegmentIndex::Pending {
  size_t read = 0;  // index into the caller's reads
  Loc loc;
  std::shared_ptr<const RandomAccessFile> file;  // kept open until checked
  size_t skew = 0;                               // record offset - aligned offset
};

class SegmentIndex::Batch final : public CacheReadBatch {
 public:
  Batch(SegmentIndex* index, CacheRead* reads, ReadBuffers* bufs)
      : index_(index), reads_(reads), bufs_(bufs) {}
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
      PixelsTo to;
      to.bufs = r.stored ? nullptr : bufs_;
      to.slot = p.read;
      r.status =
          index_->Check(r.id, p.loc, p.file.get(), reqs_[k].scratch + p.skew, got, &r.sample, to);
    }
  }

  std::vector<Pending> pend_;
  std::vector<ReadRequest> reqs_;

 private:
  SegmentIndex* index_;
  CacheRead* reads_;
  ReadBuffers* bufs_;
  std::unique_ptr<PendingReads> inflight_;
};

std::unique_ptr<CacheReadBatch> SegmentIndex::StartGetMany(CacheRead* reads, size_t n,
                                                           ReadBuffers* bufs, uint64_t* direct) {
  auto batch = std::make_unique<Batch>(this, reads, bufs);
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
    std::shared_ptr<const RandomAccessFile> df = use_direct ? DirectFile(segs[i]) : nullptr;
    // Records are packed, not aligned: read the aligned window holding one.
    uint64_t start = loc.offset / kAlign * kAlign;
    uint64_t end = (loc.offset + loc.len + kAlign - 1) / kAlign * kAlign;
    char* buf = bufs->Get(i, df ? end - start : loc.len);
    if (buf == nullptr) {
      r.status = Status::IOError("out of memory for a read buffer");
      continue;
    }
    if (df == nullptr) {
      auto dat = DatFile(segs[i]);
      if (!dat.ok()) {
        r.status = dat.status();
        continue;
      }
      size_t got = 0;
      r.status = (*dat)->Read(loc.offset, loc.len, buf, &got);
      PixelsTo to;
      to.bufs = r.stored ? nullptr : bufs;
      to.slot = i;
      if (r.status.ok()) r.status = Check(r.id, loc, dat->get(), buf, got, &r.sample, to);
      continue;
    }
    Pending p;
    p.read = i;
    p.loc = loc;
    p.file = df;
    p.skew = static_cast<size_t>(loc.offset - start);
    batch->pend_.push_back(std::move(p));
    ReadRequest q;
    q.file = df.get();
    q.offset = start;
    q.n = static_cast<size_t>(end - start);
    q.scratch = buf;
    batch->reqs_.push_back(q);
  }
  *direct = batch->reqs_.size();
  batch->Start(env_);
  return batch;
}

// By name: a closed segment file is not opened just to be measured.
uint64_t SegmentIndex::DataBytes() {
  std::vector<std::string> bases;
  {
    ReaderLock l(&mu_);
    for (const auto& s : segments_) bases.push_back(s->base);
  }
  uint64_t total = 0;
  for (const auto& b : bases) {
    auto fi = env_->Lstat(JoinPath(dir_, b + ".dat"));
    if (fi.ok() && fi->is_regular) total += fi->size;
  }
  return total;
}

Status SegmentIndex::ForEachRecord(const RecordFn& fn) {
  std::vector<uint64_t> ids;
  std::vector<Segment*> segs;
  {
    ReaderLock l(&mu_);
    for (uint64_t id = 0; id < size_; ++id)
      if (index_[id].seg != kAbsent) ids.push_back(id);
    std::sort(ids.begin(), ids.end(), [&](uint64_t a, uint64_t b) NO_THREAD_SAFETY_ANALYSIS {
      const Loc &x = index_[a], &y = index_[b];
      return x.seg != y.seg ? x.seg < y.seg : x.offset < y.offset;
    });
    for (const auto& s : segments_) segs.push_back(s.get());
  }
  std::string buf;
  CachedSample unused;
  for (size_t i = 0; i < ids.size();) {
    Loc first;
    {
      ReaderLock l(&mu_);
      first = index_[ids[i]];
    }
    if (first.seg >= segs.size()) {  // dropped meanwhile
      ++i;
      continue;
    }
    Segment* seg = segs[first.seg];
    SSDFEED_ASSIGN_OR_RETURN(auto dat, DatFile(seg));
    for (; i < ids.size(); ++i) {
      Loc loc;
      {
        ReaderLock l(&mu_);
        loc = index_[ids[i]];
      }
      if (loc.seg != first.seg) break;
      buf.resize(loc.len);
      size_t got = 0;
      SSDFEED_RETURN_IF_ERROR(dat->Read(loc.offset, loc.len, buf.data(), &got));
      Status st = Check(ids[i], loc, dat.get(), buf.data(), got, &unused, PixelsTo());
      if (st.IsCorruption()) continue;  // a bad record is not carried over
      SSDFEED_RETURN_IF_ERROR(st);
      SSDFEED_RETURN_IF_ERROR(fn(ids[i], buf));
    }
    dat.reset();
    MutexLock l(&files_mu_);
    CloseLocked(seg);
  }
  return Status::OK();
}

}  // namespace ssdfeed
