#include "cache/buffered_appender.h"

namespace ssdfeed {

namespace cf = cache_format;

BufferedAppender::BufferedAppender(SinkOptions opts, SegmentPair first, SegmentIndex* index,
                                   CacheCounters* counters, SinkHooks hooks)
    : opts_(opts), index_(index), counters_(counters), hooks_(std::move(hooks)) {
  MutexLock l(&mu_);
  files_ = std::move(first);
}

BufferedAppender::~BufferedAppender() {
  {
    MutexLock f(&flag_mu_);
    stop_syncer_ = true;
  }
  sync_cv_.notify_one();
  std::thread syncer;
  {
    MutexLock l(&mu_);
    syncer = std::move(syncer_);
  }
  if (syncer.joinable()) syncer.join();
  MutexLock l(&mu_);
  MutexLock files(&files_mu_);
  if (!files_.dat) return;
  (void)SyncFiles();  // a failure here loses only the unsynced tail
  (void)files_.dat->Close();
  (void)files_.idx->Close();
}

bool BufferedAppender::StartsSegment(uint64_t rec_len) const {
  MutexLock l(&mu_);
  return files_.dat->Size() + rec_len > opts_.segment_bytes;
}

Status BufferedAppender::Add(const cf::IndexEntry& ie, const char* hdr, const uint8_t* payload,
                             uint64_t /*charged*/) {
  Status s;
  {
    MutexLock l(&mu_);
    if (!error_.ok()) return Status::NoSpace(error_.message());
    if (files_.dat->Size() + ie.record_len > opts_.segment_bytes) s = RollLocked();
    if (s.ok()) s = AppendLocked(ie, hdr, payload);
    if (s.ok()) return s;
    error_ = s;
  }
  hooks_.failed(s);
  return s;
}

Status BufferedAppender::AppendLocked(const cf::IndexEntry& entry, const char* hdr,
                                      const uint8_t* payload) {
  cf::IndexEntry ie = entry;
  ie.offset = files_.dat->Size();
  uint32_t payload_len = ie.record_len - static_cast<uint32_t>(cf::kRecordHeaderSize);
  SSDFEED_RETURN_IF_ERROR(files_.dat->Append(hdr, cf::kRecordHeaderSize));
  SSDFEED_RETURN_IF_ERROR(files_.dat->Append(payload, payload_len));
  char idx[cf::kIndexEntrySize];
  cf::EncodeIndexEntry(ie, idx);
  // The index entry goes after its record: a record without one is a torn
  // tail nobody reads; an entry without its record fails its checksum.
  SSDFEED_RETURN_IF_ERROR(files_.idx->Append(idx, sizeof(idx)));
  unsynced_ += ie.record_len + cf::kIndexEntrySize;
  if (unsynced_ >= opts_.sync_bytes) RequestSyncLocked();
  index_->Apply(files_.index_slot, ie);
  counters_->puts++;
  counters_->put_bytes += ie.record_len;
  return Status::OK();
}

// Syncs and closes the segment, then opens the next one.
Status BufferedAppender::RollLocked() {
  MutexLock files(&files_mu_);  // the syncer must not hold old files
  SSDFEED_RETURN_IF_ERROR(SyncFiles());
  SSDFEED_RETURN_IF_ERROR(files_.dat->Close());
  SSDFEED_RETURN_IF_ERROR(files_.idx->Close());
  SegmentPair next;
  SSDFEED_RETURN_IF_ERROR(hooks_.open_segment(files_.seg + 1, &next));
  files_ = std::move(next);
  return Status::OK();
}

Status BufferedAppender::Sync() {
  Status s;
  {
    MutexLock l(&mu_);
    MutexLock files(&files_mu_);
    unsynced_ = 0;
    s = SyncFiles();
  }
  if (!s.ok()) hooks_.failed(s);
  return s;
}

Status BufferedAppender::SyncFiles() {
  SSDFEED_RETURN_IF_ERROR(files_.dat->Sync());
  return files_.idx->Sync();
}

void BufferedAppender::RequestSyncLocked() {
  unsynced_ = 0;
  {
    MutexLock f(&flag_mu_);
    sync_requested_ = true;
  }
  sync_cv_.notify_one();
  if (!syncer_.joinable()) syncer_ = opts_.env->StartThread([this] { SyncLoop(); });
}

void BufferedAppender::SyncLoop() {
  while (true) {
    {
      MutexLock f(&flag_mu_);
      while (!sync_requested_ && !stop_syncer_) CondWait(&sync_cv_, &flag_mu_);
      if (stop_syncer_) return;  // the destructor syncs what is left
      sync_requested_ = false;
    }
    Status s;
    {
      MutexLock files(&files_mu_);
      s = SyncFiles();
    }
    if (!s.ok()) hooks_.failed(s);
  }
}

}  // namespace ssdfeed
