#include "cache/segment_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cache/buffered_appender.h"
#include "cache/direct_chunk_writer.h"
#include "cache/entry_files.h"
#include "cache/field_section.h"

namespace ssdfeed {

namespace cf = cache_format;

namespace {

uint64_t AlignDown(uint64_t x) { return x & ~static_cast<uint64_t>(kDirectIoAlignment - 1); }

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
  std::unique_ptr<RecordSink> sink;
  {
    MutexLock l(&mu_);
    sink = std::move(owned_sink_);
  }
  sink_.store(nullptr, std::memory_order_release);
  sink.reset();  // writes what is staged and syncs; its failures take mu_
  MutexLock l(&mu_);
  capacity_.reset();  // drops our reservation
}

bool SegmentWriter::admitting() const {
  MutexLock l(&mu_);
  return admission_ == Admission::kAdmitting;
}

Admission SegmentWriter::admission() const {
  MutexLock l(&mu_);
  return admission_;
}

std::string SegmentWriter::warning() const {
  MutexLock l(&mu_);
  return warning_;
}

namespace {

// The payload of a record of another codec than raw: the stored bytes'
// length, the stored bytes, then the field section.
Status CodedPayloadOf(uint64_t id, const CachedSample& s, std::string* joined) {
  if (s.codec != RecordCodec::kZstd && s.codec != RecordCodec::kJpeg &&
      s.codec != RecordCodec::kYuv420)
    return Status::InvalidArgument("sample " + std::to_string(id) + ": unknown codec " +
                                   std::to_string(static_cast<int>(s.codec)));
  if (s.stored.size() > cf::kMaxPayload || (s.stored.empty() && s.bytes() > 0))
    return Status::InvalidArgument("sample " + std::to_string(id) + ": " +
                                   std::to_string(s.stored.size()) + " stored pixel bytes");
  uint32_t n = static_cast<uint32_t>(s.stored.size());
  joined->assign(reinterpret_cast<const char*>(&n), sizeof n);
  joined->append(s.stored);
  joined->append(s.fields);
  return Status::OK();
}

// The record payload of s: its pixels as they are (image-only samples, the
// common case, are never copied), or pixels (stored bytes for a codec) and
// field section joined into *joined, which the checksum and the sinks need
// in one piece.
Status PayloadOf(uint64_t id, const CachedSample& s, std::string* joined, const uint8_t** payload,
                 uint64_t* len, uint8_t* num_fields) {
  if (s.height < 0 || s.width < 0 || s.channels < 0 || s.height > 65535 || s.width > 65535 ||
      s.channels > 255)
    return Status::InvalidArgument("prepared image too large to cache");
  uint64_t pixels = s.bytes();
  *payload = s.pixels;
  *len = pixels;
  *num_fields = 0;
  uint32_t count = 0;
  std::string bad = cf::CheckFields(s.fields, &count);
  if (!bad.empty())
    return Status::InvalidArgument("sample " + std::to_string(id) + ": field section: " + bad);
  if (s.codec != RecordCodec::kRaw) {
    // A section of no fields is stored as none.
    SSDFEED_RETURN_IF_ERROR(CodedPayloadOf(id, s, joined));
    if (count == 0) joined->resize(sizeof(uint32_t) + s.stored.size());
    *payload = reinterpret_cast<const uint8_t*>(joined->data());
    *len = joined->size();
    *num_fields = static_cast<uint8_t>(count);
  } else if (count > 0) {  // a section of no fields is stored as none
    joined->assign(reinterpret_cast<const char*>(s.pixels), pixels);
    joined->append(s.fields);
    *payload = reinterpret_cast<const uint8_t*>(joined->data());
    *len = joined->size();
    *num_fields = static_cast<uint8_t>(count);
  }
  if (*len > cf::kMaxPayload)
    return Status::InvalidArgument("sample " + std::to_string(id) + ": prepared sample of " +
                                   std::to_string(*len) + " bytes too large to cache");
  return Status::OK();
}

}  // namespace

Status SegmentWriter::Put(uint64_t id, uint64_t seq, const CachedSample& s) {
  // Reused by this thread's puts: a sample with fields allocates nothing
  // once its size has been seen.
  thread_local std::string joined;
  const uint8_t* payload = nullptr;
  uint64_t len = 0;
  cf::RecordHeader h;
  SSDFEED_RETURN_IF_ERROR(PayloadOf(id, s, &joined, &payload, &len, &h.num_fields));
  h.payload_len = static_cast<uint32_t>(len);
  h.sample_id = id;
  h.height = static_cast<uint16_t>(s.height);
  h.width = static_cast<uint16_t>(s.width);
  h.channels = static_cast<uint8_t>(s.channels);
  h.codec = static_cast<uint8_t>(s.codec);
  h.label = s.label;
  char hdr[cf::kRecordHeaderSize];
  cf::EncodeRecordHeader(&h, payload, hdr);  // the checksum: outside the lock
  uint32_t rec_len = static_cast<uint32_t>(cf::kRecordHeaderSize + h.payload_len);
  cf::IndexEntry ie{id, 0, rec_len, h.height, h.width, h.channels, seq, h.checksum};
  uint64_t charged = 0;
  RecordSink* sink = nullptr;
  bool direct = false;
  {
    MutexLock l(&mu_);
    SSDFEED_RETURN_IF_ERROR(PlaceLocked(rec_len, &charged));
    sink = owned_sink_.get();
    direct = direct_;
  }
  Status st = sink->Add(ie, hdr, payload, charged);
  if (!st.ok() && direct) unwritten_.fetch_sub(charged);  // never staged: never written
  return st;
}

Status SegmentWriter::PlaceLocked(uint64_t rec_len, uint64_t* charged) {
  if (admission_ != Admission::kAdmitting) return Status::NoSpace(warning_);
  if (!decided_) {
    decided_ = true;
    direct_ = opts_.fill_write == FillWrite::kDirect ||
              (opts_.fill_write == FillWrite::kAuto && want_direct_ && want_direct_(rec_len));
  }
  // A direct segment's last block is padded to 4 KiB while it is written:
  // its first record pays for the padding, so the files stay within what
  // was reserved.
  bool pads = direct_ && (!owned_sink_ || owned_sink_->StartsSegment(rec_len));
  uint64_t need = rec_len + cf::kIndexEntrySize + (pads ? kDirectIoAlignment : 0);
  if (reserved_left_ < need) {
    if (opts_.env->MonotonicMicros() < lock_retry_us_) return Status::Busy(lock_warning_);
    // What is staged but not yet written stays charged: it is on no disk
    // the reservation could see.
    auto r = capacity_->Reserve(need, unwritten_.load());
    if (!r.ok() && capacity_->lock_timed_out()) return BackOffLocked(r.status());
    if (!r.ok()) return StopAdmittingLocked(r.status(), &counters_->capacity_denied);
    reserved_left_ = *r;
  }
  if (!owned_sink_) {
    Status s = FirstSegmentLocked(rec_len);
    if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  }
  // Charged now: a put that fails after this stops admission anyway.
  reserved_left_ -= need;
  *charged = need;
  // Direct: unwritten from here (the sink may wait for room, and another
  // put renew the reservation meanwhile) until its chunk is written.
  if (direct_) unwritten_.fetch_add(need);
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
  SinkOptions so{opts_.env, opts_.segment_bytes, opts_.sync_bytes};
  SegmentPair files;
  if (direct_) {
    Status s = OpenPair(n, takeover, true, &files);
    if (s.ok()) {
      owned_sink_ =
          std::make_unique<DirectChunkWriter>(so, std::move(files), index_, counters_, Hooks(true));
      sink_.store(owned_sink_.get(), std::memory_order_release);
      return s;
    }
    if (!s.IsNotSupported()) return s;
    direct_ = false;  // tmpfs and the like: buffered it is
  }
  SSDFEED_RETURN_IF_ERROR(OpenPair(n, takeover, false, &files));
  owned_sink_ =
      std::make_unique<BufferedAppender>(so, std::move(files), index_, counters_, Hooks(false));
  sink_.store(owned_sink_.get(), std::memory_order_release);
  return Status::OK();
}

// The sink opens later segments (without takeover) and reports failures here.
SinkHooks SegmentWriter::Hooks(bool direct) {
  SinkHooks h;
  h.open_segment = [this, direct](int n, SegmentPair* f) { return OpenPair(n, false, direct, f); };
  h.failed = [this](const Status& why) {
    MutexLock l(&mu_);
    (void)StopAdmittingLocked(why, &counters_->write_errors);
  };
  h.written = [this](uint64_t charged) { unwritten_.fetch_sub(charged); };
  h.release_claim = release_claim_;
  return h;
}

Status SegmentWriter::CutTornTail(const std::string& base) const {
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

Status SegmentWriter::OpenPair(int n, bool takeover, bool direct, SegmentPair* files) const {
  Env* env = opts_.env;
  std::string base = SegmentBase(slot_, n);
  std::string dat_path = JoinPath(dir_, base + ".dat");
  if (takeover) SSDFEED_RETURN_IF_ERROR(CutTornTail(base));
  WritableFileOptions wo;
  wo.truncate = !takeover;
  wo.mode = FileMode(opts_);
  wo.direct = direct;
  // Opened into locals: on any failure the caller's files stay as they were.
  SegmentPair f;
  f.seg = n;
  SSDFEED_ASSIGN_OR_RETURN(f.dat, env->NewWritableFile(dat_path, wo));
  if (direct) SSDFEED_RETURN_IF_ERROR(ProbeDirect(f.dat.get(), &f));
  wo.direct = false;
  SSDFEED_ASSIGN_OR_RETURN(f.idx, env->NewWritableFile(JoinPath(dir_, base + ".idx"), wo));
  if (!takeover) SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir_));
  SSDFEED_ASSIGN_OR_RETURN(auto reader, env->NewRandomAccessFile(dat_path));
  f.index_slot = index_->AttachOwn(base, std::move(reader));
  *files = std::move(f);
  return Status::OK();
}

// Reads back the part of the last block that records fill, and writes that
// block again (zero-padded) with O_DIRECT: some filesystems take O_DIRECT at
// open and refuse it at the first write (NotSupported then, and the fill
// writes buffered). The padding is cut as any is.
Status SegmentWriter::ProbeDirect(WritableFile* f, SegmentPair* files) const {
  files->end = f->Size();
  uint64_t start = AlignDown(files->end);
  std::string& bytes = files->tail;
  bytes.assign(files->end - start, '\0');
  if (!bytes.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(auto r, opts_.env->NewRandomAccessFile(f->path()));
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(r->Read(start, bytes.size(), bytes.data(), &got));
    if (got != bytes.size()) return Status::IOError(f->path() + ": shorter than it was just now");
  }
  void* p = nullptr;
  if (::posix_memalign(&p, kDirectIoAlignment, kDirectIoAlignment) != 0) std::abort();
  std::unique_ptr<char, decltype(&std::free)> block(static_cast<char*>(p), &std::free);
  std::memset(block.get(), 0, kDirectIoAlignment);
  std::memcpy(block.get(), bytes.data(), bytes.size());
  return f->WriteAt(start, block.get(), kDirectIoAlignment);
}

Status SegmentWriter::Sync() {
  RecordSink* s = sink();
  return s ? s->Sync() : Status::OK();  // a failure is counted through Hooks
}

Status SegmentWriter::StopAdmittingLocked(const Status& why, std::atomic<uint64_t>* counter) {
  (*counter)++;
  if (admission_ == Admission::kAdmitting) {
    admission_ = counter == &counters_->capacity_denied ? Admission::kCapacity
                 : why.IsNoSpace()                      ? Admission::kDiskFull
                                                        : Admission::kIOError;
    warning_ = why.message();
    opts_.env->Warn("cache entry " + dir_ + " stops admitting samples (" + warning_ +
                    "); what it holds is still served, the rest comes from the origin");
  }
  return why;
}

size_t SegmentWriter::staged() const {
  RecordSink* s = sink();
  return s ? s->staged() : 0;
}

void SegmentWriter::Flush() {
  if (RecordSink* s = sink()) s->Flush();
}

bool SegmentWriter::FlushIfStaged(uint64_t id) {
  RecordSink* s = sink();
  return s && s->FlushIfStaged(id);
}

bool SegmentWriter::ReleaseWhenStored(uint64_t id) {
  RecordSink* s = sink();
  return s && s->ReleaseWhenStored(id);
}

}  // namespace ssdfeed
