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
//
// Records go to one of two RecordSinks (CacheOptions::fill_write), chosen at
// the first Put: a BufferedAppender (write(2), indexed before Put returns) or
// a DirectChunkWriter (O_DIRECT chunks, staged and indexed once written).
// SegmentWriter keeps the policy: admission (and why it stopped), the
// capacity reservation, the first segment and its takeover, and opening
// every segment's files; the sink only writes. Readers of this process (Get,
// Contains) flush a record they ask for that is not yet written.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "cache/capacity.h"
#include "cache/record_format.h"
#include "cache/record_sink.h"
#include "cache/segment_index.h"
#include "util/mutex.h"

namespace ssdfeed {

class SegmentWriter {
 public:
  // want_direct(record_bytes), called once at the first Put of kAuto, says
  // whether to write directly. release_claim(id) is called for a record
  // whose claim ReleaseWhenStored took over, once it is indexed or dropped.
  SegmentWriter(const CacheOptions& opts, std::string dir, uint32_t slot,
                std::unique_ptr<Capacity> capacity, SegmentIndex* index, CacheCounters* counters,
                std::function<bool(uint64_t)> want_direct = nullptr,
                std::function<void(uint64_t)> release_claim = nullptr);
  ~SegmentWriter();  // writes what is staged, syncs and closes; releases the reservation

  // Stores one record and its index entry. Buffered: indexed on return.
  // Direct: staged; indexed once written (an error writing it stops
  // admission and comes back from a later Put or Sync).
  // The record's payload is s's pixels, then s.fields (a field section,
  // checked here: a malformed one is InvalidArgument, never stored).
  Status Put(uint64_t id, uint64_t seq, const CachedSample& s) EXCLUDES(mu_);
  // Writes and indexes everything staged, then fdatasyncs data and index.
  Status Sync() EXCLUDES(mu_);
  // Writes and indexes everything staged when id is among it (direct mode)
  // and says so; false otherwise. For readers of this process that must see
  // their own Put.
  bool FlushIfStaged(uint64_t id);
  // Records staged and not yet indexed (0 in buffered mode).
  size_t staged() const;
  // Writes and indexes everything staged.
  void Flush();
  // True (and the claim is then released when the record is indexed or
  // dropped) when id is staged; false: release it now.
  bool ReleaseWhenStored(uint64_t id);
  bool admitting() const EXCLUDES(mu_);
  // Why admission stopped (kAdmitting while it admits): the first reason.
  Admission admission() const EXCLUDES(mu_);
  std::string warning() const EXCLUDES(mu_);

 private:
  // Admission, capacity and, at the first put, the sink, for a record of
  // rec_len bytes. *charged: the capacity the record takes (its bytes,
  // index entry and any padding of a new direct segment).
  Status PlaceLocked(uint64_t rec_len, uint64_t* charged) REQUIRES(mu_);
  Status BackOffLocked(const Status& why) REQUIRES(mu_);
  // Decides the first segment (taking over the slot's last one when it has
  // room) and opens the sink on it.
  Status FirstSegmentLocked(uint64_t rec_len) REQUIRES(mu_);
  // Opens seg-<slot>-<n>'s two files; `takeover`: cut a torn tail first and
  // append after it. Touches no member but index_.
  Status OpenPair(int n, bool takeover, bool direct, SegmentPair* files) const;
  Status ProbeDirect(WritableFile* f, SegmentPair* files) const;
  Status CutTornTail(const std::string& base) const;
  static Status LastIntactEntry(const RandomAccessFile& idx, uint64_t idx_size, uint64_t dat_size,
                                uint64_t* keep_idx, uint64_t* keep_dat);
  SinkHooks Hooks(bool direct);
  Status StopAdmittingLocked(const Status& why, std::atomic<uint64_t>* counter) REQUIRES(mu_);
  RecordSink* sink() const { return sink_.load(std::memory_order_acquire); }

  const CacheOptions opts_;
  const std::string dir_;
  const uint32_t slot_;
  SegmentIndex* const index_;
  CacheCounters* const counters_;
  const std::function<bool(uint64_t)> want_direct_;
  const std::function<void(uint64_t)> release_claim_;

  // The policy's state. Taken before the sink's mutexes: Put asks a direct
  // sink whether a record starts a segment while holding it (never the other
  // way round), calls the sink's Add after letting go of it, and the sink
  // reports failures through a hook that takes it with no sink lock held.
  mutable Mutex mu_;
  std::unique_ptr<Capacity> capacity_ GUARDED_BY(mu_);
  uint64_t reserved_left_ GUARDED_BY(mu_) = 0;
  int64_t lock_retry_us_ GUARDED_BY(mu_) = 0;  // capacity.lock timed out: no Reserve before
  std::string lock_warning_ GUARDED_BY(mu_);
  Admission admission_ GUARDED_BY(mu_) = Admission::kAdmitting;
  std::string warning_ GUARDED_BY(mu_);
  bool decided_ GUARDED_BY(mu_) = false;  // buffered or direct, at the first Put
  bool direct_ GUARDED_BY(mu_) = false;
  std::unique_ptr<RecordSink> owned_sink_ GUARDED_BY(mu_);  // from the first Put
  std::atomic<RecordSink*> sink_{nullptr};                  // owned_sink_, set once
  // Charged for records staged and not yet written (direct mode): kept in
  // our ledger row when the reservation is renewed.
  std::atomic<uint64_t> unwritten_{0};
};

// "seg-<slot>-<nnnn>"
std::string SegmentBase(uint32_t slot, int n);
// Parses a segment base name; false for anything else.
bool ParseSegmentBase(const std::string& base, uint32_t* slot, int* n);

}  // namespace ssdfeed
