#include "cache/segment_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cache/entry_files.h"

namespace ssdfeed {

namespace cf = cache_format;

struct SegmentWriter::Chunk {
  Chunk() {
    void* p = nullptr;
    if (::posix_memalign(&p, kDirectIoAlignment, kChunkBytes) != 0) std::abort();
    buf = static_cast<char*>(p);
  }
  ~Chunk() { std::free(buf); }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  int seg = 0;
  uint64_t file_off = 0;  // a multiple of kDirectIoAlignment
  size_t filled = 0;
  char* buf = nullptr;               // kChunkBytes, aligned
  std::vector<cf::IndexEntry> ends;  // records whose last byte is here
  uint64_t charged = 0;              // what those records were charged (unwritten_)
  int copying = 0;                   // Puts copying into it now (the writer waits for 0)
};

namespace {

uint64_t AlignDown(uint64_t x) { return x & ~static_cast<uint64_t>(kDirectIoAlignment - 1); }
uint64_t AlignUp(uint64_t x) { return AlignDown(x + kDirectIoAlignment - 1); }

}  // namespace

std::string SegmentBase(uint32_t slot, int n) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "seg-%u-%04d", slot, n);
  return buf;
}

bool ParseSegmentBase(const std::string& base, uint32_t* slot, int* n) {
  unsigned s = 0;
  int k = 0, used = 0;
  if (std::sscanf(base.c_str(), "seg-%u-%d%n", &s, &k, &used) != 2) return false;
  if (static_cast<size_t>(used) != base.size() || k < 0) return false;
  *slot = s;
  *n = k;
  return true;
}

SegmentWriter::SegmentWriter(const CacheOptions& opts, std::string dir, uint32_t slot,
                             std::unique_ptr<Capacity> capacity, SegmentIndex* index,
                             CacheCounters* counters, std::function<bool(uint64_t)> want_direct,
                             std::function<void(uint64_t)> release_claim)
    : opts_(opts),
      dir_(std::move(dir)),
      slot_(slot),
      index_(index),
      counters_(counters),
      want_direct_(std::move(want_direct)),
      release_claim_(std::move(release_claim)),
      capacity_(std::move(capacity)) {}

SegmentWriter::~SegmentWriter() {
  StopWriter();  // writes what is staged first
  {
    std::lock_guard<std::mutex> f(flag_mu_);
    stop_syncer_ = true;
  }
  sync_cv_.notify_one();
  if (syncer_.joinable()) syncer_.join();
  MutexLock l(&mu_);
  if (dat_) {
    (void)SyncLocked();  // a failure here loses only the unsynced tail
    (void)dat_->Close();
    (void)idx_->Close();
  }
  capacity_.reset();  // drops our reservation
}

bool SegmentWriter::admitting() const {
  MutexLock l(&mu_);
  return admitting_;
}

std::string SegmentWriter::warning() const {
  MutexLock l(&mu_);
  return warning_;
}

void SegmentWriter::Disable(const std::string& why) {
  MutexLock l(&mu_);
  admitting_ = false;
  warning_ = why;
}

Status SegmentWriter::Put(uint64_t id, uint64_t seq, int64_t label, const uint8_t* pixels,
                          int height, int width, int channels) {
  if (height > 65535 || width > 65535)
    return Status::InvalidArgument("prepared image too large to cache");
  cf::RecordHeader h;
  h.payload_len = static_cast<uint32_t>(static_cast<size_t>(height) * width * channels);
  h.sample_id = id;
  h.height = static_cast<uint16_t>(height);
  h.width = static_cast<uint16_t>(width);
  h.channels = static_cast<uint8_t>(channels);
  h.label = label;
  char hdr[cf::kRecordHeaderSize];
  cf::EncodeRecordHeader(&h, pixels, hdr);  // the checksum: outside the lock
  uint32_t rec_len = static_cast<uint32_t>(cf::kRecordHeaderSize + h.payload_len);
  cf::IndexEntry ie{id, 0, rec_len, h.height, h.width, h.channels, seq, h.checksum};
  std::vector<Piece> pieces;
  {
    MutexLock l(&mu_);
    uint64_t charged = 0;
    SSDFEED_RETURN_IF_ERROR(PlaceLocked(rec_len, &charged));
    if (!direct_) return AppendLocked(ie, hdr, pixels, h.payload_len);
    Status staged = StageLocked(ie, charged, &pieces);
    if (!staged.ok()) unwritten_ -= charged;  // never staged: never written
    SSDFEED_RETURN_IF_ERROR(staged);
  }
  // Direct: the bytes go into the chunks without the lock, so workers copy
  // at once; the writer thread takes a chunk only when its copies are done.
  for (const Piece& pc : pieces) {
    size_t from = pc.src, n = pc.len;
    char* to = pc.chunk->buf + pc.at;
    if (from < cf::kRecordHeaderSize) {
      size_t k = std::min(n, cf::kRecordHeaderSize - from);
      std::memcpy(to, hdr + from, k);
      to += k;
      from += k;
      n -= k;
    }
    if (n > 0) std::memcpy(to, pixels + (from - cf::kRecordHeaderSize), n);
  }
  MutexLock l(&mu_);
  // The writer waits for the last copy into a sealed chunk, or into the
  // open one when a flush wants it sealed; other copies need not wake it.
  for (const Piece& pc : pieces)
    if (--pc.chunk->copying == 0 && (pc.chunk != open_.get() || flush_waiters_ > 0))
      work_cv_.notify_one();
  return Status::OK();
}

// Admission, capacity and the segment, for a record of rec_len bytes;
// decides buffered or direct at the first put.
Status SegmentWriter::PlaceLocked(uint64_t rec_len, uint64_t* charged) {
  if (!admitting_) return Status::NoSpace(warning_);
  if (!decided_) {
    decided_ = true;
    direct_ = opts_.fill_write == FillWrite::kDirect ||
              (opts_.fill_write == FillWrite::kAuto && want_direct_ && want_direct_(rec_len));
  }
  // A direct segment's last block is padded to 4 KiB while it is written:
  // its first record pays for the padding, so the files stay within what
  // was reserved.
  bool new_segment = direct_ ? (seg_n_ < 0 || end_ + rec_len > opts_.segment_bytes)
                             : (!dat_ || dat_->Size() + rec_len > opts_.segment_bytes);
  uint64_t need = rec_len + cf::kIndexEntrySize + (direct_ && new_segment ? kDirectIoAlignment : 0);
  if (reserved_left_ < need) {
    if (opts_.env->MonotonicMicros() < lock_retry_us_) return Status::Busy(lock_warning_);
    // What is staged but not yet written stays charged: it is on no disk
    // the reservation could see.
    auto r = capacity_->Reserve(need, unwritten_);
    if (!r.ok() && capacity_->lock_timed_out()) return BackOffLocked(r.status());
    if (!r.ok()) return StopAdmittingLocked(r.status(), &counters_->capacity_denied);
    reserved_left_ = *r;
  }
  Status s = EnsureSegmentLocked(rec_len);
  if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  // Charged now: a put that fails after this stops admission anyway.
  reserved_left_ -= need;
  *charged = need;
  // Direct: unwritten from here (StageLocked may wait for room, and another
  // put renew the reservation meanwhile) until its chunk is written.
  if (direct_) unwritten_ += need;
  return Status::OK();
}

// capacity.lock is held by a process that does not let go (stopped,
// frozen): as with a full root, this put is not stored, and no put tries the
// lock again for a while; unlike a full root, storing resumes after that.
Status SegmentWriter::BackOffLocked(const Status& why) {
  int wait_s = static_cast<int>(10 * kCapacityLockWaitSeconds);
  lock_retry_us_ = opts_.env->MonotonicMicros() + wait_s * int64_t{1000000};
  lock_warning_ = why.message();
  opts_.env->Warn("cache entry " + dir_ + " stores nothing for " + std::to_string(wait_s) + " s (" +
                  lock_warning_ + "); those samples come from the origin");
  return why;
}

Status SegmentWriter::AppendLocked(const cf::IndexEntry& entry, const char* hdr,
                                   const uint8_t* pixels, uint32_t payload_len) {
  cf::IndexEntry ie = entry;
  ie.offset = dat_->Size();
  Status s = dat_->Append(hdr, cf::kRecordHeaderSize);
  if (s.ok()) s = dat_->Append(pixels, payload_len);
  char idx[cf::kIndexEntrySize];
  cf::EncodeIndexEntry(ie, idx);
  // The index entry goes after its record: a record without one is a torn
  // tail nobody reads; an entry without its record fails its checksum.
  if (s.ok()) s = idx_->Append(idx, sizeof(idx));
  if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  unsynced_ += ie.record_len + cf::kIndexEntrySize;
  if (unsynced_ >= opts_.sync_bytes) RequestSyncLocked();
  index_->Apply(seg_index_slot_, ie);
  counters_->puts++;
  counters_->put_bytes += ie.record_len;
  return Status::OK();
}

// rec_len: the bytes the put adds to the .dat (Put's new_segment test).
Status SegmentWriter::EnsureSegmentLocked(uint64_t rec_len) {
  if (seg_n_ < 0) return FirstSegmentLocked(rec_len);
  if (direct_) {
    if (end_ + rec_len <= opts_.segment_bytes) return Status::OK();
    // The old segment's last chunk carries no block into the next; the
    // writer thread closes the old files when it reaches the new segment.
    if (open_ && !open_->ends.empty()) SealLocked(false);
    if (open_) spare_.push_back(std::move(open_));  // a carried block: written already
    seg_n_++;
    end_ = next_off_ = 0;
    return Status::OK();
  }
  if (dat_->Size() + rec_len <= opts_.segment_bytes) return Status::OK();
  return OpenSegmentLocked(seg_n_ + 1, false);
}

// First put: take over the slot's last segment if it has room.
Status SegmentWriter::FirstSegmentLocked(uint64_t rec_len) {
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(opts_.env->GetChildren(dir_, &names));
  int last = -1;
  for (const auto& name : names) {
    std::string base;
    uint32_t s;
    int n;
    if (SegmentBaseOf(name, ".dat", &base) && ParseSegmentBase(base, &s, &n) && s == slot_)
      last = std::max(last, n);
  }
  int n = last < 0 ? 0 : last;
  bool takeover = false;
  if (last >= 0) {
    auto fi = opts_.env->Lstat(JoinPath(dir_, SegmentBase(slot_, last) + ".dat"));
    takeover = fi.ok() && !fi->is_symlink && fi->size + rec_len <= opts_.segment_bytes;
    if (!takeover) n = last + 1;
  }
  if (direct_) {
    Status s = OpenFirstDirectLocked(n, takeover);
    if (!s.IsNotSupported()) return s;
    direct_ = false;  // tmpfs and the like: buffered it is
  }
  return OpenSegmentLocked(n, takeover);
}

Status SegmentWriter::CutTornTail(const std::string& base) {
  Env* env = opts_.env;
  std::string idx_path = JoinPath(dir_, base + ".idx"), dat_path = JoinPath(dir_, base + ".dat");
  SSDFEED_ASSIGN_OR_RETURN(FileInfo dat, env->Lstat(dat_path));
  uint64_t keep_idx = 0, keep_dat = 0, idx_size = 0;
  auto idx = env->NewRandomAccessFile(idx_path);
  if (!idx.ok() && !idx.status().IsNotFound()) return idx.status();
  if (idx.ok()) {
    SSDFEED_ASSIGN_OR_RETURN(idx_size, (*idx)->Size());
    SSDFEED_RETURN_IF_ERROR(LastIntactEntry(**idx, idx_size, dat.size, &keep_idx, &keep_dat));
  }
  if (idx_size > keep_idx) SSDFEED_RETURN_IF_ERROR(env->TruncateFile(idx_path, keep_idx));
  if (dat.size > keep_dat) SSDFEED_RETURN_IF_ERROR(env->TruncateFile(dat_path, keep_dat));
  return Status::OK();
}

// Everything up to the last intact entry whose record is all there is kept.
// Read in bounded chunks, and only as far as the .dat could have entries
// (each follows its own record): an .idx of any size (a sparse one planted
// in a group-shared root) is never one allocation.
Status SegmentWriter::LastIntactEntry(const RandomAccessFile& idx, uint64_t idx_size,
                                      uint64_t dat_size, uint64_t* keep_idx, uint64_t* keep_dat) {
  uint64_t end = std::min(idx_size, (dat_size / cf::kRecordHeaderSize + 1) * cf::kIndexEntrySize);
  std::string buf;
  for (uint64_t pos = 0; pos + cf::kIndexEntrySize <= end;) {
    buf.resize(std::min<uint64_t>(end - pos, 21846 * cf::kIndexEntrySize));  // ~1 MiB
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(idx.Read(pos, buf.size(), buf.data(), &got));
    for (size_t off = 0; off + cf::kIndexEntrySize <= got; off += cf::kIndexEntrySize) {
      cf::IndexEntry e;
      if (!cf::DecodeIndexEntry(buf.data() + off, &e) || e.offset > dat_size ||
          e.record_len > dat_size - e.offset)
        continue;
      *keep_idx = pos + off + cf::kIndexEntrySize;
      *keep_dat = std::max(*keep_dat, e.offset + e.record_len);
    }
    if (got < buf.size()) break;
    pos += got;
  }
  return Status::OK();
}

Status SegmentWriter::OpenPair(int n, bool takeover, bool direct,
                               std::unique_ptr<WritableFile>* dat,
                               std::unique_ptr<WritableFile>* idx, uint32_t* index_slot,
                               DirectTail* tail) {
  Env* env = opts_.env;
  std::string base = SegmentBase(slot_, n);
  std::string dat_path = JoinPath(dir_, base + ".dat");
  if (takeover) SSDFEED_RETURN_IF_ERROR(CutTornTail(base));
  WritableFileOptions wo;
  wo.truncate = !takeover;
  wo.mode = FileMode(opts_);
  wo.direct = direct;
  // Opened into locals: on any failure the caller's files stay as they were.
  SSDFEED_ASSIGN_OR_RETURN(auto d, env->NewWritableFile(dat_path, wo));
  if (direct) SSDFEED_RETURN_IF_ERROR(ProbeDirect(d.get(), tail));
  wo.direct = false;
  SSDFEED_ASSIGN_OR_RETURN(auto x, env->NewWritableFile(JoinPath(dir_, base + ".idx"), wo));
  if (!takeover) SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir_));
  SSDFEED_ASSIGN_OR_RETURN(auto reader, env->NewRandomAccessFile(dat_path));
  *index_slot = index_->AttachOwn(base, std::move(reader));
  *dat = std::move(d);
  *idx = std::move(x);
  return Status::OK();
}

// Reads back the part of the last block that records fill, and writes that
// block again (zero-padded) with O_DIRECT: some filesystems take O_DIRECT at
// open and refuse it at the first write (NotSupported then, and the fill
// writes buffered). The padding is cut as any is.
Status SegmentWriter::ProbeDirect(WritableFile* f, DirectTail* tail) {
  tail->end = f->Size();
  uint64_t start = AlignDown(tail->end);
  std::string& bytes = tail->bytes;
  bytes.assign(tail->end - start, '\0');
  if (!bytes.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(auto r, opts_.env->NewRandomAccessFile(f->path()));
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(r->Read(start, bytes.size(), bytes.data(), &got));
    if (got != bytes.size()) return Status::IOError(f->path() + ": shorter than it was just now");
  }
  std::unique_ptr<Chunk> block = std::make_unique<Chunk>();
  std::memset(block->buf, 0, kDirectIoAlignment);
  std::memcpy(block->buf, bytes.data(), bytes.size());
  return f->WriteAt(start, block->buf, kDirectIoAlignment);
}

Status SegmentWriter::OpenSegmentLocked(int n, bool takeover) {
  MutexLock files(&files_mu_);  // the syncer must not hold old files
  if (dat_) {
    SSDFEED_RETURN_IF_ERROR(SyncFiles());
    SSDFEED_RETURN_IF_ERROR(dat_->Close());
    SSDFEED_RETURN_IF_ERROR(idx_->Close());
  }
  DirectTail unused;
  SSDFEED_RETURN_IF_ERROR(OpenPair(n, takeover, false, &dat_, &idx_, &seg_index_slot_, &unused));
  seg_n_ = n;
  return Status::OK();
}

Status SegmentWriter::Sync() {
  Flush();
  MutexLock l(&mu_);
  if (!write_error_.ok()) return write_error_;  // counted when it happened
  Status s = SyncLocked();
  // Counted and warned like a failed background sync: callers that cannot
  // return it (a loader stopping) leave a trace in the metrics.
  if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  return s;
}

Status SegmentWriter::SyncLocked() {
  MutexLock files(&files_mu_);
  unsynced_ = 0;
  return SyncFiles();
}

Status SegmentWriter::SyncFiles() {
  // Data first, then the index that points into it.
  if (dat_) {
    SSDFEED_RETURN_IF_ERROR(dat_->Sync());
    SSDFEED_RETURN_IF_ERROR(idx_->Sync());
  }
  if (wdat_) {
    SSDFEED_RETURN_IF_ERROR(wdat_->Sync());
    SSDFEED_RETURN_IF_ERROR(widx_->Sync());
    file_unsynced_ = 0;
  }
  return Status::OK();
}

void SegmentWriter::RequestSyncLocked() {
  unsynced_ = 0;
  {
    std::lock_guard<std::mutex> f(flag_mu_);
    sync_requested_ = true;
  }
  sync_cv_.notify_one();
  if (!syncer_.joinable()) syncer_ = opts_.env->StartThread([this] { SyncLoop(); });
}

void SegmentWriter::SyncLoop() {
  while (true) {
    {
      std::unique_lock<std::mutex> f(flag_mu_);
      sync_cv_.wait(f, [&] { return sync_requested_ || stop_syncer_; });
      if (stop_syncer_) return;  // the destructor syncs what is left
      sync_requested_ = false;
    }
    Status s;
    {
      MutexLock files(&files_mu_);
      s = SyncFiles();
    }
    if (!s.ok()) {
      MutexLock l(&mu_);
      (void)StopAdmittingLocked(s, &counters_->write_errors);
    }
  }
}

Status SegmentWriter::StopAdmittingLocked(const Status& why, std::atomic<uint64_t>* counter) {
  (*counter)++;
  if (admitting_) {
    admitting_ = false;
    warning_ = why.message();
    opts_.env->Warn("cache entry " + dir_ + " stops admitting samples (" + warning_ +
                    "); what it holds is still served, the rest comes from the origin");
  }
  return why;
}

// ---- Direct mode ----

// Opens the first segment for direct writes and stages, as the open chunk,
// the part of its last block that records already fill (the chunk writes
// the block again, with more after it).
Status SegmentWriter::OpenFirstDirectLocked(int n, bool takeover) {
  MutexLock files(&files_mu_);
  DirectTail tail;
  SSDFEED_RETURN_IF_ERROR(OpenPair(n, takeover, true, &wdat_, &widx_, &file_index_slot_, &tail));
  file_seg_ = seg_n_ = n;
  file_end_ = end_ = tail.end;  // the probe padded the file past it
  open_ = TakeChunkLocked();
  open_->seg = n;
  open_->file_off = AlignDown(tail.end);
  open_->filled = tail.bytes.size();
  std::memcpy(open_->buf, tail.bytes.data(), tail.bytes.size());
  writer_ = opts_.env->StartThread([this] { WriterLoop(); });
  writer_running_ = true;
  return Status::OK();
}

// Whether the record fits in the chunks there are (or may be made) without
// waiting: Put waits for room before it copies a byte, so one record's bytes
// are never split by another's.
bool SegmentWriter::RoomLocked(uint64_t rec_len) {
  uint64_t space = open_ ? kChunkBytes - open_->filled : 0;
  uint64_t more = rec_len > space ? (rec_len - space + kChunkBytes - 1) / kChunkBytes : 0;
  // A record larger than the staging limit gets the chunks it needs.
  uint64_t limit = std::max<uint64_t>(kMaxChunks, more + 1);
  uint64_t can = spare_.size() + (chunks_ < static_cast<int>(limit) ? limit - chunks_ : 0);
  return more <= can;
}

Status SegmentWriter::StageLocked(const cf::IndexEntry& entry, uint64_t charged,
                                  std::vector<Piece>* pieces) {
  uint64_t rec_len = entry.record_len;
  while (!RoomLocked(rec_len)) {
    CondWait(&done_cv_, &mu_);
    if (!admitting_) return Status::NoSpace(warning_);
    // Others' records staged meanwhile may leave this one no room in the
    // segment. (Its padding is then not reserved: 4 KiB over, at most, for
    // a roll-over that needs two Puts to race for the last bytes.)
    SSDFEED_RETURN_IF_ERROR(EnsureSegmentLocked(rec_len));
  }
  cf::IndexEntry ie = entry;
  ie.offset = end_;
  for (size_t src = 0; src < rec_len;) {
    if (open_ && open_->filled == kChunkBytes) SealLocked(true);
    if (!open_) {
      // Only a full chunk or a segment's start leaves none open.
      open_ = TakeChunkLocked();
      open_->seg = seg_n_;
      open_->file_off = next_off_;
    }
    size_t k = std::min<size_t>(rec_len - src, kChunkBytes - open_->filled);
    pieces->push_back(Piece{open_.get(), open_->filled, src, k});
    open_->copying++;
    open_->filled += k;
    src += k;
  }
  if (open_->ends.empty()) {
    // The writer may sleep untimed (no records were waiting): its clock for
    // the idle seal starts now.
    first_staged_us_ = opts_.env->MonotonicMicros();
    work_cv_.notify_one();
  }
  open_->ends.push_back(ie);
  open_->charged += charged;
  end_ += rec_len;
  staged_[ie.sample_id].count++;
  staged_total_++;
  staged_count_.fetch_add(1, std::memory_order_release);
  if (open_->filled == kChunkBytes) SealLocked(true);
  return Status::OK();
}

std::unique_ptr<SegmentWriter::Chunk> SegmentWriter::TakeChunkLocked() {
  std::unique_ptr<Chunk> c;
  // (A spare chunk may still be copied into after a failed write dropped
  // it: never reused then.)
  for (size_t i = spare_.size(); i-- > 0 && !c;)
    if (spare_[i]->copying == 0) {
      c = std::move(spare_[i]);
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  if (!c) {
    c = std::make_unique<Chunk>();
    chunks_++;
  }
  c->filled = 0;
  c->ends.clear();
  c->charged = 0;
  return c;
}

// Hands the open chunk to the writer thread. A part-full last block is
// padded with zeros and carried into a new open chunk, which writes that
// block again with the records that follow.
void SegmentWriter::SealLocked(bool carry) {
  std::unique_ptr<Chunk> c = std::move(open_);
  size_t tail = c->filled % kDirectIoAlignment;
  if (tail != 0) std::memset(c->buf + c->filled, 0, kDirectIoAlignment - tail);
  if (tail != 0 && carry) {
    // The block's bytes are all copied in: the writer seals a part-full
    // chunk only when no copy into it is under way.
    open_ = TakeChunkLocked();
    open_->seg = c->seg;
    open_->file_off = c->file_off + (c->filled - tail);
    std::memcpy(open_->buf, c->buf + (c->filled - tail), tail);
    open_->filled = tail;
  } else {
    next_off_ = c->file_off + c->filled;
  }
  bool ready = c->copying == 0;  // else the last copy into it wakes the writer
  sealed_.push_back(std::move(c));
  if (ready) work_cv_.notify_one();
}

void SegmentWriter::WriterLoop() {
  mu_.Lock();
  std::vector<std::unique_ptr<Chunk>> batch;
  while (true) {
    TakeBatchLocked(&batch);
    if (!batch.empty()) {
      mu_.Unlock();
      Status s = WriteChunks(batch);
      mu_.Lock();
      FinishBatchLocked(&batch, s);
      continue;
    }
    bool waiting_records = open_ && !open_->ends.empty();
    // Sealed when the chunk's first record has waited kIdleSealMicros,
    // however fast others follow it (and only with no copy into it under
    // way: the carried block must be whole).
    int64_t left = first_staged_us_ + kIdleSealMicros - opts_.env->MonotonicMicros();
    if (waiting_records && open_->copying == 0 &&
        (flush_waiters_ > 0 || stop_writer_ || left <= 0)) {
      SealLocked(true);
      continue;
    }
    if (stop_writer_ && sealed_.empty() && !waiting_records) break;
    if (waiting_records)  // (a copy under way when due: look again in 1 ms)
      CondWaitFor(&work_cv_, &mu_, std::max<int64_t>(left, 1000));
    else
      CondWait(&work_cv_, &mu_);
  }
  mu_.Unlock();
}

// The sealed chunks at the front whose copies are done, in file order, that
// can be in flight together: one segment, and no block written twice (a
// carried block must land after the write it was carried from).
void SegmentWriter::TakeBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch) {
  batch->clear();
  while (!sealed_.empty() && batch->size() < static_cast<size_t>(kWritesInFlight)) {
    const Chunk& c = *sealed_.front();
    if (c.copying > 0) break;
    if (!batch->empty()) {
      const Chunk& prev = *batch->back();
      if (c.seg != prev.seg || c.file_off < AlignUp(prev.file_off + prev.filled)) break;
    }
    batch->push_back(std::move(sealed_.front()));
    sealed_.pop_front();
  }
}

// Writes the chunks together, then indexes, in order, the records that end
// in each, up to the first that failed: every byte of those records, and of
// every chunk before them, is in the file.
Status SegmentWriter::WriteChunks(const std::vector<std::unique_ptr<Chunk>>& batch) {
  MutexLock files(&files_mu_);
  if (batch[0]->seg != file_seg_) SSDFEED_RETURN_IF_ERROR(RollFiles(batch[0]->seg));
  std::vector<WriteRequest> reqs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    reqs[i] = {wdat_.get(), batch[i]->file_off, batch[i]->buf, AlignUp(batch[i]->filled), {}};
  opts_.env->WriteMany(reqs.data(), reqs.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    SSDFEED_RETURN_IF_ERROR(reqs[i].status);
    file_end_ = batch[i]->file_off + batch[i]->filled;
    SSDFEED_RETURN_IF_ERROR(IndexChunk(*batch[i]));
  }
  // The writer thread syncs in the background itself: no worker waits.
  if (file_unsynced_ >= opts_.sync_bytes) return SyncFiles();
  return Status::OK();
}

Status SegmentWriter::IndexChunk(const Chunk& c) {
  if (c.ends.empty()) return Status::OK();
  std::string idx(c.ends.size() * cf::kIndexEntrySize, '\0');
  for (size_t i = 0; i < c.ends.size(); ++i)
    cf::EncodeIndexEntry(c.ends[i], idx.data() + i * cf::kIndexEntrySize);
  SSDFEED_RETURN_IF_ERROR(widx_->Append(idx.data(), idx.size()));
  for (const cf::IndexEntry& ie : c.ends) {
    index_->Apply(file_index_slot_, ie);
    counters_->puts++;
    counters_->put_bytes += ie.record_len;
    counters_->direct_writes++;
    file_unsynced_ += ie.record_len + cf::kIndexEntrySize;
  }
  return Status::OK();
}

// Closes the segment written so far (its padding cut, synced) and opens the
// next one.
Status SegmentWriter::RollFiles(int seg) {
  if (wdat_) {
    SSDFEED_RETURN_IF_ERROR(opts_.env->TruncateFile(wdat_->path(), file_end_));
    SSDFEED_RETURN_IF_ERROR(SyncFiles());
    Status s = wdat_->Close();
    Status t = widx_->Close();
    wdat_.reset();  // closed: nothing else may touch them
    widx_.reset();
    SSDFEED_RETURN_IF_ERROR(s);
    SSDFEED_RETURN_IF_ERROR(t);
  }
  DirectTail tail;  // empty: a new file
  std::unique_ptr<WritableFile> d, x;
  uint32_t slot = 0;
  SSDFEED_RETURN_IF_ERROR(OpenPair(seg, false, true, &d, &x, &slot, &tail));
  wdat_ = std::move(d);
  widx_ = std::move(x);
  file_index_slot_ = slot;
  file_seg_ = seg;
  file_end_ = 0;
  return Status::OK();
}

void SegmentWriter::FinishBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch, const Status& s) {
  if (!s.ok()) {
    // What is staged is lost (never indexed, so never read); the samples
    // come from the origin as the rest do once admission stops.
    if (write_error_.ok()) write_error_ = s;
    (void)StopAdmittingLocked(s, &counters_->write_errors);
    for (auto& x : sealed_) batch->push_back(std::move(x));
    sealed_.clear();
    if (open_) batch->push_back(std::move(open_));
  }
  // Indexed or dropped, each chunk's records are no longer staged.
  for (auto& c : *batch) {
    ForgetStagedLocked(*c);
    unwritten_ -= c->charged;  // on disk now, where reservations see it (or dropped)
    c->charged = 0;
    spare_.push_back(std::move(c));
  }
  batch->clear();
  // A record larger than the pool grew it: give the extra back.
  for (size_t i = spare_.size(); i-- > 0 && chunks_ > kMaxChunks;)
    if (spare_[i]->copying == 0) {
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
      chunks_--;
    }
  done_cv_.notify_all();
}

// The chunk's records are indexed (or dropped): no longer staged.
void SegmentWriter::ForgetStagedLocked(const Chunk& c) {
  for (const cf::IndexEntry& ie : c.ends) {
    finished_total_++;
    auto it = staged_.find(ie.sample_id);
    if (it == staged_.end()) continue;
    staged_count_.fetch_sub(1, std::memory_order_release);
    if (--it->second.count > 0) continue;
    bool release = it->second.release_claim;
    staged_.erase(it);
    if (release && release_claim_) release_claim_(ie.sample_id);
  }
}

void SegmentWriter::Flush() {
  MutexLock l(&mu_);
  if (!writer_running_) return;
  // Records finish in the order they were staged: wait for those staged so
  // far only, so Puts going on meanwhile cannot keep a flush waiting.
  uint64_t target = staged_total_;
  flush_waiters_++;
  work_cv_.notify_one();
  while (finished_total_ < target) CondWait(&done_cv_, &mu_);
  flush_waiters_--;
}

bool SegmentWriter::FlushIfStaged(uint64_t id) {
  if (staged() == 0) return false;
  {
    MutexLock l(&mu_);
    if (staged_.find(id) == staged_.end()) return false;
  }
  Flush();
  return true;
}

bool SegmentWriter::ReleaseWhenStored(uint64_t id) {
  if (staged() == 0) return false;
  MutexLock l(&mu_);
  auto it = staged_.find(id);
  if (it == staged_.end()) return false;
  it->second.release_claim = true;
  return true;
}

// Writes what is staged, stops the writer thread, cuts the last segment's
// padding and syncs.
void SegmentWriter::StopWriter() {
  {
    MutexLock l(&mu_);
    if (!writer_running_) return;
    stop_writer_ = true;
    work_cv_.notify_one();
  }
  writer_.join();
  MutexLock l(&mu_);
  writer_running_ = false;
  MutexLock files(&files_mu_);
  if (!wdat_) return;
  Status s = opts_.env->TruncateFile(wdat_->path(), file_end_);
  if (s.ok()) s = SyncFiles();
  // A failure here loses only the unsynced tail, as a crash would.
  (void)wdat_->Close();
  (void)widx_->Close();
  wdat_.reset();
  widx_.reset();
}

}  // namespace ssdfeed
