// RecordSink: where SegmentWriter's admitted records go. SegmentWriter keeps
// the policy (admission, capacity, which segment a slot starts in, taking
// over a torn one); a sink only writes bytes, as leveldb's log::Writer and
// rocksdb's WritableFileWriter sit apart from what decides to write:
// - BufferedAppender: write(2) through the page cache, indexed on return;
// - DirectChunkWriter: O_DIRECT chunks written by a thread of its own.
// Each sink has its own mutex; SegmentWriter's is always taken before it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "ssdfeed/env.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// One segment's two files, opened by SegmentWriter (named, takeover cut,
// attached to the index).
struct SegmentPair {
  int seg = -1;
  std::unique_ptr<WritableFile> dat, idx;
  uint32_t index_slot = 0;  // the index's handle for this segment
  // Direct only: where records end, and the bytes they fill of the last
  // 4 KiB block (written again, padded, by the first chunk).
  uint64_t end = 0;
  std::string tail;
};

struct SinkOptions {
  Env* env = nullptr;
  uint64_t segment_bytes = 0;  // a segment's records end within this
  uint64_t sync_bytes = 0;     // fdatasync after this many unsynced bytes
};

// What a sink asks of SegmentWriter. `failed` takes SegmentWriter's mutex,
// which comes before the sink's: it is never called with the sink's held.
// The others take no lock of SegmentWriter's.
struct SinkHooks {
  // Opens the new, empty segment n (a roll-over).
  std::function<Status(int n, SegmentPair* files)> open_segment;
  // A write or sync failed: admission stops (counted and warned there).
  // Called once per failure, before any Flush that covered it returns.
  std::function<void(const Status& why)> failed;
  // Capacity charged to records now written or dropped (direct): no longer
  // pending for a reservation. Must not block.
  std::function<void(uint64_t charged)> written;
  // The claim of a record ReleaseWhenStored took over: indexed or dropped.
  std::function<void(uint64_t id)> release_claim;
};

class RecordSink {
 public:
  virtual ~RecordSink() = default;  // writes what is staged, syncs, closes

  // Whether a record of rec_len bytes would start a new segment (and so
  // pay for a direct segment's padding).
  virtual bool StartsSegment(uint64_t rec_len) const = 0;
  // Stores the record (header hdr, then payload) and its index entry (the
  // sink sets ie.offset). `charged`: the capacity it was charged, reported
  // back through SinkHooks::written (direct) once written or dropped; not
  // when Add fails (the record was never staged).
  virtual Status Add(const cache_format::IndexEntry& ie, const char* hdr, const uint8_t* payload,
                     uint64_t charged) = 0;
  // Writes and indexes everything staged.
  virtual void Flush() = 0;
  // Flush, then fdatasync data and index. A failure is reported to
  // SinkHooks::failed once (a write failure found earlier: only returned).
  virtual Status Sync() = 0;
  // Flushes when id is staged and says so.
  virtual bool FlushIfStaged(uint64_t id) = 0;
  // True (the claim is then released when the record is indexed or
  // dropped) when id is staged.
  virtual bool ReleaseWhenStored(uint64_t id) = 0;
  // Records staged and not yet indexed.
  virtual size_t staged() const = 0;
};

}  // namespace ssdfeed
