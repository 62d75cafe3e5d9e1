#include "cache/direct_chunk_writer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ssdfeed {

namespace cf = cache_format;

struct DirectChunkWriter::Chunk {
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
  uint64_t charged = 0;              // what those records were charged
  int copying = 0;                   // Adds copying into it now (the writer waits for 0)
};

namespace {

uint64_t AlignDown(uint64_t x) { return x & ~static_cast<uint64_t>(kDirectIoAlignment - 1); }
uint64_t AlignUp(uint64_t x) { return AlignDown(x + kDirectIoAlignment - 1); }

}  // namespace

// Stages, as the open chunk, the part of the first segment's last block that
// records already fill (the chunk writes the block again, with more after it).
DirectChunkWriter::DirectChunkWriter(SinkOptions opts, SegmentPair first, SegmentIndex* index,
                                     CacheCounters* counters, SinkHooks hooks)
    : opts_(opts), index_(index), counters_(counters), hooks_(std::move(hooks)) {
  MutexLock l(&mu_);
  MutexLock files(&files_mu_);
  seg_n_ = first.seg;
  file_end_ = end_ = first.end;  // the probe padded the file past it
  open_ = TakeChunkLocked();
  open_->seg = first.seg;
  open_->file_off = AlignDown(first.end);
  open_->filled = first.tail.size();
  std::memcpy(open_->buf, first.tail.data(), first.tail.size());
  files_ = std::move(first);
  writer_ = opts_.env->StartThread([this] { WriterLoop(); });
}

// Writes what is staged, stops the writer thread, cuts the last segment's
// padding and syncs.
DirectChunkWriter::~DirectChunkWriter() {
  {
    MutexLock l(&mu_);
    stop_writer_ = true;
    work_cv_.notify_one();
  }
  writer_.join();
  MutexLock l(&mu_);
  MutexLock files(&files_mu_);
  if (!files_.dat) return;
  Status s = opts_.env->TruncateFile(files_.dat->path(), file_end_);
  if (s.ok()) s = SyncFiles();
  // A failure here loses only the unsynced tail, as a crash would.
  (void)files_.dat->Close();
  (void)files_.idx->Close();
}

bool DirectChunkWriter::StartsSegment(uint64_t rec_len) const {
  MutexLock l(&mu_);
  return end_ + rec_len > opts_.segment_bytes;
}

Status DirectChunkWriter::Add(const cf::IndexEntry& ie, const char* hdr, const uint8_t* payload,
                              uint64_t charged) {
  std::vector<Piece> pieces;
  {
    MutexLock l(&mu_);
    if (!error_.ok()) return Status::NoSpace(error_.message());
    RollIfFullLocked(ie.record_len);
    SSDFEED_RETURN_IF_ERROR(StageLocked(ie, charged, &pieces));
  }
  // The bytes go into the chunks without the lock, so workers copy at once;
  // the writer thread takes a chunk only when its copies are done.
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
    if (n > 0) std::memcpy(to, payload + (from - cf::kRecordHeaderSize), n);
  }
  MutexLock l(&mu_);
  // The writer waits for the last copy into a sealed chunk, or into the
  // open one when a flush wants it sealed; other copies need not wake it.
  for (const Piece& pc : pieces)
    if (--pc.chunk->copying == 0 && (pc.chunk != open_.get() || flush_waiters_ > 0))
      work_cv_.notify_one();
  return Status::OK();
}

// A record that does not fit in the segment starts the next one. Whether it
// pays the new segment's 4 KiB padding was decided by SegmentWriter's
// StartsSegment before this Add, outside this lock: two Puts racing for a
// segment's last bytes can both pay it, or neither, so the files may stray
// from what was reserved by 4 KiB per racing writer per 1 GiB segment. The old
// segment's last chunk carries no block into the next; the writer thread
// closes the old files when it reaches the new segment.
void DirectChunkWriter::RollIfFullLocked(uint64_t rec_len) {
  if (end_ + rec_len <= opts_.segment_bytes) return;
  if (open_ && !open_->ends.empty()) SealLocked(false);
  if (open_) spare_.push_back(std::move(open_));  // a carried block: written already
  seg_n_++;
  end_ = next_off_ = 0;
}

// Whether the record fits in the chunks there are (or may be made) without
// waiting: Add waits for room before it copies a byte, so one record's bytes
// are never split by another's.
bool DirectChunkWriter::RoomLocked(uint64_t rec_len) {
  uint64_t space = open_ ? kChunkBytes - open_->filled : 0;
  uint64_t more = rec_len > space ? (rec_len - space + kChunkBytes - 1) / kChunkBytes : 0;
  // A record larger than the staging limit gets the chunks it needs.
  uint64_t limit = std::max<uint64_t>(kMaxChunks, more + 1);
  uint64_t can = spare_.size() + (chunks_ < static_cast<int>(limit) ? limit - chunks_ : 0);
  return more <= can;
}

Status DirectChunkWriter::StageLocked(const cf::IndexEntry& entry, uint64_t charged,
                                      std::vector<Piece>* pieces) {
  uint64_t rec_len = entry.record_len;
  while (!RoomLocked(rec_len)) {
    CondWait(&done_cv_, &mu_);
    if (!error_.ok()) return Status::NoSpace(error_.message());
    // Others' records staged meanwhile may leave this one no room in the
    // segment.
    RollIfFullLocked(rec_len);
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

std::unique_ptr<DirectChunkWriter::Chunk> DirectChunkWriter::TakeChunkLocked() {
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
void DirectChunkWriter::SealLocked(bool carry) {
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

void DirectChunkWriter::WriterLoop() {
  mu_.Lock();
  std::vector<std::unique_ptr<Chunk>> batch;
  while (true) {
    TakeBatchLocked(&batch);
    if (!batch.empty()) {
      mu_.Unlock();
      Status s = WriteChunks(batch);
      // Admission stops before any flush that waits for this batch returns.
      if (!s.ok()) hooks_.failed(s);
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
void DirectChunkWriter::TakeBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch) {
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
Status DirectChunkWriter::WriteChunks(const std::vector<std::unique_ptr<Chunk>>& batch) {
  MutexLock files(&files_mu_);
  if (batch[0]->seg != files_.seg) SSDFEED_RETURN_IF_ERROR(RollFiles(batch[0]->seg));
  std::vector<WriteRequest> reqs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    reqs[i] = {files_.dat.get(), batch[i]->file_off, batch[i]->buf, AlignUp(batch[i]->filled), {}};
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

Status DirectChunkWriter::IndexChunk(const Chunk& c) {
  if (c.ends.empty()) return Status::OK();
  std::string idx(c.ends.size() * cf::kIndexEntrySize, '\0');
  for (size_t i = 0; i < c.ends.size(); ++i)
    cf::EncodeIndexEntry(c.ends[i], idx.data() + i * cf::kIndexEntrySize);
  SSDFEED_RETURN_IF_ERROR(files_.idx->Append(idx.data(), idx.size()));
  for (const cf::IndexEntry& ie : c.ends) {
    index_->Apply(files_.index_slot, ie);
    counters_->puts++;
    counters_->put_bytes += ie.record_len;
    counters_->direct_writes++;
    file_unsynced_ += ie.record_len + cf::kIndexEntrySize;
  }
  return Status::OK();
}

// Closes the segment written so far (its padding cut, synced) and opens the
// next one.
Status DirectChunkWriter::RollFiles(int seg) {
  if (files_.dat) {
    SSDFEED_RETURN_IF_ERROR(opts_.env->TruncateFile(files_.dat->path(), file_end_));
    SSDFEED_RETURN_IF_ERROR(SyncFiles());
    Status s = files_.dat->Close();
    Status t = files_.idx->Close();
    files_.dat.reset();  // closed: nothing else may touch them
    files_.idx.reset();
    SSDFEED_RETURN_IF_ERROR(s);
    SSDFEED_RETURN_IF_ERROR(t);
  }
  SegmentPair next;
  SSDFEED_RETURN_IF_ERROR(hooks_.open_segment(seg, &next));
  files_ = std::move(next);
  file_end_ = 0;
  return Status::OK();
}

// Data first, then the index that points into it.
Status DirectChunkWriter::SyncFiles() {
  if (!files_.dat) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(files_.dat->Sync());
  SSDFEED_RETURN_IF_ERROR(files_.idx->Sync());
  file_unsynced_ = 0;
  return Status::OK();
}

void DirectChunkWriter::FinishBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch,
                                          const Status& s) {
  if (!s.ok()) {
    // What is staged is lost (never indexed, so never read); the samples
    // come from the origin as the rest do once admission stops.
    if (error_.ok()) error_ = s;
    for (auto& x : sealed_) batch->push_back(std::move(x));
    sealed_.clear();
    if (open_) batch->push_back(std::move(open_));
  }
  // Indexed or dropped, each chunk's records are no longer staged.
  uint64_t charged = 0;
  for (auto& c : *batch) {
    ForgetStagedLocked(*c);
    charged += c->charged;  // on disk now, where reservations see it (or dropped)
    c->charged = 0;
    spare_.push_back(std::move(c));
  }
  batch->clear();
  if (charged > 0) hooks_.written(charged);
  // A record larger than the pool grew it: give the extra back.
  for (size_t i = spare_.size(); i-- > 0 && chunks_ > kMaxChunks;)
    if (spare_[i]->copying == 0) {
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
      chunks_--;
    }
  done_cv_.notify_all();
}

// The chunk's records are indexed (or dropped): no longer staged.
void DirectChunkWriter::ForgetStagedLocked(const Chunk& c) {
  for (const cf::IndexEntry& ie : c.ends) {
    finished_total_++;
    auto it = staged_.find(ie.sample_id);
    if (it == staged_.end()) continue;
    staged_count_.fetch_sub(1, std::memory_order_release);
    if (--it->second.count > 0) continue;
    bool release = it->second.release_claim;
    staged_.erase(it);
    if (release && hooks_.release_claim) hooks_.release_claim(ie.sample_id);
  }
}

void DirectChunkWriter::Flush() {
  MutexLock l(&mu_);
  // Records finish in the order they were staged: wait for those staged so
  // far only, so Adds going on meanwhile cannot keep a flush waiting.
  uint64_t target = staged_total_;
  flush_waiters_++;
  work_cv_.notify_one();
  while (finished_total_ < target) CondWait(&done_cv_, &mu_);
  flush_waiters_--;
}

Status DirectChunkWriter::Sync() {
  Flush();
  Status s;
  {
    MutexLock l(&mu_);
    if (!error_.ok()) return error_;  // reported when it happened
    MutexLock files(&files_mu_);
    s = SyncFiles();
  }
  if (!s.ok()) hooks_.failed(s);
  return s;
}

bool DirectChunkWriter::FlushIfStaged(uint64_t id) {
  if (staged() == 0) return false;
  {
    MutexLock l(&mu_);
    if (staged_.find(id) == staged_.end()) return false;
  }
  Flush();
  return true;
}

bool DirectChunkWriter::ReleaseWhenStored(uint64_t id) {
  if (staged() == 0) return false;
  MutexLock l(&mu_);
  auto it = staged_.find(id);
  if (it == staged_.end()) return false;
  it->second.release_claim = true;
  return true;
}

}  // namespace ssdfeed
