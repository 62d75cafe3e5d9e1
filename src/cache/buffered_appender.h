// BufferedAppender: a RecordSink that appends each record and then its index
// entry with write(2) (the page cache) and indexes it before returning. A
// thread of its own fdatasyncs every SinkOptions::sync_bytes, so an Add never
// waits for a sync.
#pragma once

#include <condition_variable>
#include <thread>

#include "cache/record_sink.h"
#include "util/mutex.h"

namespace ssdfeed {

class BufferedAppender final : public RecordSink {
 public:
  BufferedAppender(SinkOptions opts, SegmentPair first, SegmentIndex* index,
                   CacheCounters* counters, SinkHooks hooks);
  ~BufferedAppender() override;

  bool StartsSegment(uint64_t rec_len) const override EXCLUDES(mu_);
  Status Add(const cache_format::IndexEntry& ie, const char* hdr, const uint8_t* payload,
             uint64_t charged) override EXCLUDES(mu_);
  void Flush() override {}
  Status Sync() override EXCLUDES(mu_);
  bool FlushIfStaged(uint64_t) override { return false; }
  bool ReleaseWhenStored(uint64_t) override { return false; }
  size_t staged() const override { return 0; }

 private:
  Status AppendLocked(const cache_format::IndexEntry& ie, const char* hdr, const uint8_t* payload)
      REQUIRES(mu_);
  Status RollLocked() REQUIRES(mu_);
  // Data first, then the index that points into it.
  Status SyncFiles() REQUIRES(files_mu_) NO_THREAD_SAFETY_ANALYSIS;
  void RequestSyncLocked() REQUIRES(mu_);
  void SyncLoop() EXCLUDES(mu_);

  const SinkOptions opts_;
  SegmentIndex* const index_;
  CacheCounters* const counters_;
  const SinkHooks hooks_;

  // The open segment. Add appends holding mu_ only; files are swapped
  // (roll-over) holding mu_ and files_mu_, and the syncer reads them holding
  // files_mu_ only, so an Add never waits for an fdatasync.
  mutable Mutex mu_ ACQUIRED_BEFORE(files_mu_);
  Mutex files_mu_;
  SegmentPair files_ GUARDED_BY(mu_);
  uint64_t unsynced_ GUARDED_BY(mu_) = 0;  // bytes since the last sync request
  // The first append or roll-over that failed: nothing is appended after it.
  Status error_ GUARDED_BY(mu_);

  Mutex flag_mu_;  // taken last, briefly
  bool sync_requested_ GUARDED_BY(flag_mu_) = false;
  bool stop_syncer_ GUARDED_BY(flag_mu_) = false;
  std::condition_variable sync_cv_;
  std::thread syncer_ GUARDED_BY(mu_);  // started at the first sync request
};

}  // namespace ssdfeed
