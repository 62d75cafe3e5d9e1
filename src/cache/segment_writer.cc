#include "cache/segment_writer.h"

#include <cstdio>

#include "cache/entry_files.h"

namespace ssdfeed {

namespace cf = cache_format;

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
                             CacheCounters* counters)
    : opts_(opts),
      dir_(std::move(dir)),
      slot_(slot),
      index_(index),
      counters_(counters),
      capacity_(std::move(capacity)) {}

SegmentWriter::~SegmentWriter() {
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
  MutexLock l(&mu_);
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
    if (!r.ok()) return StopAdmittingLocked(r.status(), &counters_->capacity_denied);
    reserved_left_ = *r;
  }
  Status s = EnsureSegmentLocked(need);
  if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  char hdr[cf::kRecordHeaderSize];
  cf::EncodeRecordHeader(&h, pixels, hdr);
  uint64_t offset = dat_->Size();
  s = dat_->Append(hdr, sizeof(hdr));
  if (s.ok()) s = dat_->Append(pixels, h.payload_len);
  cf::IndexEntry ie{id, offset, rec_len, h.height, h.width, h.channels, seq, h.checksum};
  char idx[cf::kIndexEntrySize];
  cf::EncodeIndexEntry(ie, idx);
  // The index entry goes after its record: a record without one is a torn
  // tail nobody reads; an entry without its record fails its checksum.
  if (s.ok()) s = idx_->Append(idx, sizeof(idx));
  if (!s.ok()) return StopAdmittingLocked(s, &counters_->write_errors);
  reserved_left_ -= need;
  unsynced_ += need;
  if (unsynced_ >= opts_.sync_bytes) RequestSyncLocked();
  index_->Apply(seg_index_slot_, ie);
  counters_->puts++;
  counters_->put_bytes += rec_len;
  return Status::OK();
}

Status SegmentWriter::EnsureSegmentLocked(uint64_t need) {
  if (dat_ && dat_->Size() + need <= opts_.segment_bytes) return Status::OK();
  if (dat_) return OpenSegmentLocked(seg_n_ + 1, false);
  // First put: take over the slot's last segment if it has room.
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
  if (last < 0) return OpenSegmentLocked(0, false);
  auto fi = opts_.env->Lstat(JoinPath(dir_, SegmentBase(slot_, last) + ".dat"));
  if (fi.ok() && !fi->is_symlink && fi->size + need <= opts_.segment_bytes)
    return OpenSegmentLocked(last, true);
  return OpenSegmentLocked(last + 1, false);
}

Status SegmentWriter::CutTornTail(const std::string& base) {
  Env* env = opts_.env;
  std::string idx_path = JoinPath(dir_, base + ".idx"), dat_path = JoinPath(dir_, base + ".dat");
  std::string text;
  Status s = env->ReadFileToString(idx_path, &text);
  if (!s.ok() && !s.IsNotFound()) return s;
  SSDFEED_ASSIGN_OR_RETURN(FileInfo dat, env->Lstat(dat_path));
  // Keep everything up to the last intact entry whose record is all there.
  uint64_t keep_idx = 0, keep_dat = 0;
  for (size_t off = 0; off + cf::kIndexEntrySize <= text.size(); off += cf::kIndexEntrySize) {
    cf::IndexEntry e;
    if (!cf::DecodeIndexEntry(text.data() + off, &e) || e.offset + e.record_len > dat.size)
      continue;
    keep_idx = off + cf::kIndexEntrySize;
    keep_dat = std::max(keep_dat, e.offset + e.record_len);
  }
  if (text.size() > keep_idx) SSDFEED_RETURN_IF_ERROR(env->TruncateFile(idx_path, keep_idx));
  if (dat.size > keep_dat) SSDFEED_RETURN_IF_ERROR(env->TruncateFile(dat_path, keep_dat));
  return Status::OK();
}

Status SegmentWriter::OpenSegmentLocked(int n, bool takeover) {
  Env* env = opts_.env;
  std::string base = SegmentBase(slot_, n);
  if (takeover) SSDFEED_RETURN_IF_ERROR(CutTornTail(base));
  MutexLock files(&files_mu_);  // the syncer must not hold old files
  if (dat_) {
    SSDFEED_RETURN_IF_ERROR(SyncFiles());
    SSDFEED_RETURN_IF_ERROR(dat_->Close());
    SSDFEED_RETURN_IF_ERROR(idx_->Close());
  }
  WritableFileOptions wo;
  wo.truncate = !takeover;
  wo.mode = FileMode(opts_);
  SSDFEED_ASSIGN_OR_RETURN(dat_, env->NewWritableFile(JoinPath(dir_, base + ".dat"), wo));
  SSDFEED_ASSIGN_OR_RETURN(idx_, env->NewWritableFile(JoinPath(dir_, base + ".idx"), wo));
  if (!takeover) SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir_));
  SSDFEED_ASSIGN_OR_RETURN(auto reader, env->NewRandomAccessFile(JoinPath(dir_, base + ".dat")));
  seg_index_slot_ = index_->AttachOwn(base, std::move(reader));
  seg_n_ = n;
  return Status::OK();
}

Status SegmentWriter::Sync() {
  MutexLock l(&mu_);
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
  if (!dat_) return Status::OK();
  // Data first, then the index that points into it.
  SSDFEED_RETURN_IF_ERROR(dat_->Sync());
  return idx_->Sync();
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

}  // namespace ssdfeed
