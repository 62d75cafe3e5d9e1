// SegmentWriter: this process's appends to one entry. It owns the writer
// slot's segment files ("seg-<slot>-<n>.dat" + ".idx"), reserves capacity
// before each append, syncs in the background, and stops admitting (keeping
// what is stored) on a full root, a full disk or an I/O error.
//
// A slot is reused after its writer dies, so the writer first takes over the
// slot's last segment: it cuts what a crash left torn at its tail (index
// entries pointing past the data, a record without an index entry) and
// appends after it. Sequential jobs therefore keep adding to the same files
// instead of adding files.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "cache/capacity.h"
#include "cache/segment_index.h"
#include "util/mutex.h"

namespace ssdfeed {

class SegmentWriter {
 public:
  SegmentWriter(const CacheOptions& opts, std::string dir, uint32_t slot,
                std::unique_ptr<Capacity> capacity, SegmentIndex* index, CacheCounters* counters);
  ~SegmentWriter();  // syncs and closes; releases the reservation

  // Appends one record and its index entry, then applies it to the index.
  Status Put(uint64_t id, uint64_t seq, int64_t label, const uint8_t* pixels, int height, int width,
             int channels) EXCLUDES(mu_);
  Status Sync() EXCLUDES(mu_);
  bool admitting() const EXCLUDES(mu_);
  std::string warning() const EXCLUDES(mu_);
  // Stops admission for a reason found outside (read-only entry, ...).
  void Disable(const std::string& why) EXCLUDES(mu_);

 private:
  Status EnsureSegmentLocked(uint64_t need) REQUIRES(mu_);
  // Opens seg-<slot>-<n> for appending; `takeover`: cut a torn tail first.
  Status OpenSegmentLocked(int n, bool takeover) REQUIRES(mu_);
  Status CutTornTail(const std::string& base);
  Status SyncLocked() REQUIRES(mu_);
  Status SyncFiles() REQUIRES(files_mu_) NO_THREAD_SAFETY_ANALYSIS;
  void RequestSyncLocked() REQUIRES(mu_);
  void SyncLoop();
  Status StopAdmittingLocked(const Status& why, std::atomic<uint64_t>* counter) REQUIRES(mu_);

  const CacheOptions opts_;
  const std::string dir_;
  const uint32_t slot_;
  SegmentIndex* const index_;
  CacheCounters* const counters_;

  // The writer state. Taken before files_mu_.
  mutable Mutex mu_ ACQUIRED_BEFORE(files_mu_);
  std::unique_ptr<Capacity> capacity_ GUARDED_BY(mu_);
  int seg_n_ GUARDED_BY(mu_) = -1;  // which segment of our slot is open
  uint32_t seg_index_slot_ GUARDED_BY(mu_) = 0;
  uint64_t unsynced_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_left_ GUARDED_BY(mu_) = 0;
  bool admitting_ GUARDED_BY(mu_) = true;
  std::string warning_ GUARDED_BY(mu_);

  // The open files. Put appends holding mu_ only; they are swapped (segment
  // roll-over) holding mu_ and files_mu_, and the background syncer reads
  // them holding files_mu_ only, so a put never waits for an fdatasync.
  Mutex files_mu_;
  std::unique_ptr<WritableFile> dat_ GUARDED_BY(mu_);
  std::unique_ptr<WritableFile> idx_ GUARDED_BY(mu_);

  std::mutex flag_mu_;  // sync_requested_, stop_syncer_
  std::condition_variable sync_cv_;
  bool sync_requested_ = false;
  bool stop_syncer_ = false;
  std::thread syncer_;
};

// "seg-<slot>-<nnnn>"
std::string SegmentBase(uint32_t slot, int n);
// Parses a segment base name; false for anything else.
bool ParseSegmentBase(const std::string& base, uint32_t* slot, int* n);

}  // namespace ssdfeed
