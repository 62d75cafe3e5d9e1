// DirectChunkWriter: a RecordSink that writes with O_DIRECT. Add places the
// record in the open 1 MiB chunk (4 KiB aligned in memory and in the file)
// under the lock, copies it in without the lock, and returns; one writer
// thread writes sealed chunks whose copies are done (up to kWritesInFlight at
// once through Env::WriteMany when they queue up), then, in file order,
// appends the index entries of the records that ended in them and indexes
// them. A chunk is sealed when full, when Flush asks, or when its first
// record has waited kIdleSealMicros; sealing a part-full chunk writes its
// last block padded with zeros, and the next chunk starts with that block's
// bytes and writes it again. A segment's padding is cut when the writer
// moves on to the next one and when the sink closes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/record_sink.h"
#include "util/mutex.h"

namespace ssdfeed {

class DirectChunkWriter final : public RecordSink {
 public:
  // first: the segment staged into first; its `tail` (the bytes records
  // fill of its last block) becomes the open chunk's start.
  DirectChunkWriter(SinkOptions opts, SegmentPair first, SegmentIndex* index,
                    CacheCounters* counters, SinkHooks hooks);
  ~DirectChunkWriter() override;  // writes what is staged, cuts the padding, syncs

  bool StartsSegment(uint64_t rec_len) const override EXCLUDES(mu_);
  // Staged on return; indexed once written (an error writing it is
  // reported to SinkHooks::failed and comes back from a later Add or Sync).
  Status Add(const cache_format::IndexEntry& ie, const char* hdr, const uint8_t* payload,
             uint64_t charged) override EXCLUDES(mu_);
  void Flush() override EXCLUDES(mu_);
  Status Sync() override EXCLUDES(mu_);
  bool FlushIfStaged(uint64_t id) override EXCLUDES(mu_);
  bool ReleaseWhenStored(uint64_t id) override EXCLUDES(mu_);
  size_t staged() const override { return staged_count_.load(std::memory_order_acquire); }

  // How long a part-full chunk waits for more records before it is written.
  static constexpr int64_t kIdleSealMicros = 20000;
  static constexpr size_t kChunkBytes = 1 << 20;
  // Chunks staged at most (Add waits beyond): 8 MiB per writing process.
  static constexpr int kMaxChunks = 8;
  // Chunks written at once (io_uring) when the device falls behind.
  static constexpr int kWritesInFlight = 4;

 private:
  struct Chunk;
  // Where a part of a record goes: `len` bytes from offset `src` of the
  // record (header, then payload) to `at` in chunk.
  struct Piece {
    Chunk* chunk;
    size_t at, src, len;
  };
  // A record staged and not yet indexed: how many Adds of it are in flight,
  // and whether its claim is released when the last is indexed or dropped.
  struct Staged {
    int count = 0;
    bool release_claim = false;
  };

  void RollIfFullLocked(uint64_t rec_len) REQUIRES(mu_);
  // Places the record in the chunks (and seals the full ones); the caller
  // copies the pieces without the lock, then counts them done.
  Status StageLocked(const cache_format::IndexEntry& ie, uint64_t charged,
                     std::vector<Piece>* pieces) REQUIRES(mu_);
  bool RoomLocked(uint64_t rec_len) REQUIRES(mu_);
  std::unique_ptr<Chunk> TakeChunkLocked() REQUIRES(mu_);
  // carry: start the next chunk with a part-full last block.
  void SealLocked(bool carry) REQUIRES(mu_);
  void WriterLoop() EXCLUDES(mu_);
  void TakeBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch) REQUIRES(mu_);
  Status WriteChunks(const std::vector<std::unique_ptr<Chunk>>& batch) EXCLUDES(mu_);
  Status IndexChunk(const Chunk& c) REQUIRES(files_mu_);
  Status RollFiles(int seg) REQUIRES(files_mu_);
  Status SyncFiles() REQUIRES(files_mu_);
  void FinishBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch, const Status& s) REQUIRES(mu_);
  void ForgetStagedLocked(const Chunk& c) REQUIRES(mu_);

  const SinkOptions opts_;
  SegmentIndex* const index_;
  CacheCounters* const counters_;
  const SinkHooks hooks_;

  // The staging: the chunk being filled, the sealed ones in file order,
  // spare buffers, and what is staged but not indexed. Taken before files_mu_.
  mutable Mutex mu_ ACQUIRED_BEFORE(files_mu_);
  int seg_n_ GUARDED_BY(mu_) = 0;          // the segment staged into
  uint64_t end_ GUARDED_BY(mu_) = 0;       // logical end of segment seg_n_
  uint64_t next_off_ GUARDED_BY(mu_) = 0;  // where a chunk opened after a full one starts
  std::unique_ptr<Chunk> open_ GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Chunk>> sealed_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Chunk>> spare_ GUARDED_BY(mu_);
  int chunks_ GUARDED_BY(mu_) = 0;  // allocated, wherever they are
  bool stop_writer_ GUARDED_BY(mu_) = false;
  int flush_waiters_ GUARDED_BY(mu_) = 0;
  int64_t first_staged_us_ GUARDED_BY(mu_) = 0;  // the open chunk's first record
  std::unordered_map<uint64_t, Staged> staged_ GUARDED_BY(mu_);
  uint64_t staged_total_ GUARDED_BY(mu_) = 0;    // records ever staged
  uint64_t finished_total_ GUARDED_BY(mu_) = 0;  // of those, indexed or dropped
  Status error_ GUARDED_BY(mu_);                 // the first write that failed
  std::atomic<size_t> staged_count_{0};
  std::condition_variable work_cv_;  // wakes the writer thread
  std::condition_variable done_cv_;  // a chunk was written (room, flushes)
  std::thread writer_;

  // The open files: the writer thread's. files_mu_ also keeps a Sync from
  // racing a roll-over.
  Mutex files_mu_;
  SegmentPair files_ GUARDED_BY(files_mu_);
  uint64_t file_end_ GUARDED_BY(files_mu_) = 0;  // logical end of what is written
  uint64_t file_unsynced_ GUARDED_BY(files_mu_) = 0;
};

}  // namespace ssdfeed
