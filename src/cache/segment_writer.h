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
// Records are written one of two ways (CacheOptions::fill_write), chosen at
// the first Put:
// - buffered: Put appends the record and its index entry itself (write(2),
//   the page cache), and indexes it before returning;
// - direct: Put places the record in the open 1 MiB chunk (4 KiB aligned in
//   memory and in the file) under the lock, copies it in without the lock,
//   and returns; one writer thread writes sealed chunks whose copies are
//   done with O_DIRECT (up to kWritesInFlight at once through io_uring when
//   they queue up), then, in file order, appends the index entries of the
//   records that ended in them and indexes them. A chunk is sealed when
//   full, when Flush asks, or when its first record has waited
//   kIdleSealMicros; sealing a part-full chunk writes its last block padded
//   with zeros, and the next chunk starts with that block's bytes and writes
//   it again. Readers of this process (Get, Contains) flush a record they
//   ask for that is not yet written.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/capacity.h"
#include "cache/record_format.h"
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
  Status Put(uint64_t id, uint64_t seq, int64_t label, const uint8_t* pixels, int height, int width,
             int channels) EXCLUDES(mu_);
  // Writes and indexes everything staged, then fdatasyncs data and index.
  Status Sync() EXCLUDES(mu_);
  // Writes and indexes everything staged when id is among it (direct mode)
  // and says so; false otherwise. For readers of this process that must see
  // their own Put.
  bool FlushIfStaged(uint64_t id) EXCLUDES(mu_);
  // Records staged and not yet indexed (0 in buffered mode).
  size_t staged() const { return staged_count_.load(std::memory_order_acquire); }
  // Writes and indexes everything staged.
  void Flush() EXCLUDES(mu_);
  // True (and the claim is then released when the record is indexed or
  // dropped) when id is staged; false: release it now.
  bool ReleaseWhenStored(uint64_t id) EXCLUDES(mu_);
  bool admitting() const EXCLUDES(mu_);
  std::string warning() const EXCLUDES(mu_);
  // Stops admission for a reason found outside (read-only entry, ...).
  void Disable(const std::string& why) EXCLUDES(mu_);

  // How long a part-full chunk waits for more records before it is written.
  static constexpr int64_t kIdleSealMicros = 20000;
  static constexpr size_t kChunkBytes = 1 << 20;
  // Chunks staged at most (Put waits beyond): 8 MiB per writing process.
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
  // A record staged and not yet indexed: how many Puts of it are in flight,
  // and whether its claim is released when the last is indexed or dropped.
  struct Staged {
    int count = 0;
    bool release_claim = false;
  };

  Status EnsureSegmentLocked(uint64_t rec_len) REQUIRES(mu_);
  Status FirstSegmentLocked(uint64_t rec_len) REQUIRES(mu_);
  // Where a direct file's records end, and the bytes they fill of its
  // last 4 KiB block.
  struct DirectTail {
    uint64_t end = 0;
    std::string bytes;
  };
  // Opens seg-<slot>-<n>'s two files; `takeover`: cut a torn tail first and
  // append after it. Touches no member but index_.
  Status OpenPair(int n, bool takeover, bool direct, std::unique_ptr<WritableFile>* dat,
                  std::unique_ptr<WritableFile>* idx, uint32_t* index_slot, DirectTail* tail);
  Status ProbeDirect(WritableFile* f, DirectTail* tail);
  Status OpenSegmentLocked(int n, bool takeover) REQUIRES(mu_);
  Status CutTornTail(const std::string& base);
  static Status LastIntactEntry(const RandomAccessFile& idx, uint64_t idx_size, uint64_t dat_size,
                                uint64_t* keep_idx, uint64_t* keep_dat);
  Status SyncLocked() REQUIRES(mu_);
  Status SyncFiles() REQUIRES(files_mu_) NO_THREAD_SAFETY_ANALYSIS;
  void RequestSyncLocked() REQUIRES(mu_);
  void SyncLoop();
  Status StopAdmittingLocked(const Status& why, std::atomic<uint64_t>* counter) REQUIRES(mu_);

  // Buffered mode: the record's bytes and index entry, appended now.
  Status AppendLocked(const cache_format::IndexEntry& ie, const char* hdr, const uint8_t* pixels,
                      uint32_t payload_len) REQUIRES(mu_);

  // Direct mode.
  Status OpenFirstDirectLocked(int n, bool takeover) REQUIRES(mu_);
  // *charged: the capacity the record takes (its bytes, index entry and
  // any padding of a new segment).
  Status PlaceLocked(uint64_t rec_len, uint64_t* charged) REQUIRES(mu_);
  Status BackOffLocked(const Status& why) REQUIRES(mu_);
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
  void FinishBatchLocked(std::vector<std::unique_ptr<Chunk>>* batch, const Status& s) REQUIRES(mu_);
  void ForgetStagedLocked(const Chunk& c) REQUIRES(mu_);
  void StopWriter() EXCLUDES(mu_);

  const CacheOptions opts_;
  const std::string dir_;
  const uint32_t slot_;
  SegmentIndex* const index_;
  CacheCounters* const counters_;
  const std::function<bool(uint64_t)> want_direct_;
  const std::function<void(uint64_t)> release_claim_;

  // The writer state. Taken before files_mu_.
  mutable Mutex mu_ ACQUIRED_BEFORE(files_mu_);
  std::unique_ptr<Capacity> capacity_ GUARDED_BY(mu_);
  int seg_n_ GUARDED_BY(mu_) = -1;  // which segment of our slot is open (direct: staged into)
  uint32_t seg_index_slot_ GUARDED_BY(mu_) = 0;
  uint64_t unsynced_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_left_ GUARDED_BY(mu_) = 0;
  // Charged for records staged and not yet written (direct mode): kept in
  // our ledger row when the reservation is renewed.
  uint64_t unwritten_ GUARDED_BY(mu_) = 0;
  int64_t lock_retry_us_ GUARDED_BY(mu_) = 0;  // capacity.lock timed out: no Reserve before
  std::string lock_warning_ GUARDED_BY(mu_);
  bool admitting_ GUARDED_BY(mu_) = true;
  bool decided_ GUARDED_BY(mu_) = false;  // buffered or direct, at the first Put
  bool direct_ GUARDED_BY(mu_) = false;
  std::string warning_ GUARDED_BY(mu_);
  Status write_error_ GUARDED_BY(mu_);  // a direct write that failed

  // Buffered mode's open files. Put appends holding mu_ only; they are
  // swapped (segment roll-over) holding mu_ and files_mu_, and the background
  // syncer reads them holding files_mu_ only, so a put never waits for an
  // fdatasync.
  Mutex files_mu_;
  std::unique_ptr<WritableFile> dat_ GUARDED_BY(mu_);
  std::unique_ptr<WritableFile> idx_ GUARDED_BY(mu_);

  std::mutex flag_mu_;  // sync_requested_, stop_syncer_
  std::condition_variable sync_cv_;
  bool sync_requested_ = false;
  bool stop_syncer_ = false;
  std::thread syncer_;

  // Direct mode's staging (mu_): the chunk being filled, the sealed ones in
  // file order, spare buffers, and what is staged but not indexed.
  uint64_t end_ GUARDED_BY(mu_) = 0;       // logical end of segment seg_n_
  uint64_t next_off_ GUARDED_BY(mu_) = 0;  // where a chunk opened after a full one starts
  std::unique_ptr<Chunk> open_ GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Chunk>> sealed_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Chunk>> spare_ GUARDED_BY(mu_);
  int chunks_ GUARDED_BY(mu_) = 0;  // allocated, wherever they are
  bool stop_writer_ GUARDED_BY(mu_) = false;
  int flush_waiters_ GUARDED_BY(mu_) = 0;
  int64_t first_staged_us_ GUARDED_BY(mu_) = 0;  // the open chunk's first record
  bool writer_running_ GUARDED_BY(mu_) = false;
  std::unordered_map<uint64_t, Staged> staged_ GUARDED_BY(mu_);
  uint64_t staged_total_ GUARDED_BY(mu_) = 0;    // records ever staged
  uint64_t finished_total_ GUARDED_BY(mu_) = 0;  // of those, indexed or dropped
  std::atomic<size_t> staged_count_{0};
  std::condition_variable work_cv_;  // wakes the writer thread
  std::condition_variable done_cv_;  // a chunk was written (room, flushes)
  std::thread writer_;

  // Direct mode's open files: the writer thread's (and, before it starts,
  // the first Put's). files_mu_ also keeps a Sync from racing a roll-over.
  std::unique_ptr<WritableFile> wdat_ GUARDED_BY(files_mu_);
  std::unique_ptr<WritableFile> widx_ GUARDED_BY(files_mu_);
  int file_seg_ GUARDED_BY(files_mu_) = -1;
  uint32_t file_index_slot_ GUARDED_BY(files_mu_) = 0;
  uint64_t file_end_ GUARDED_BY(files_mu_) = 0;  // logical end of what is written
  uint64_t file_unsynced_ GUARDED_BY(files_mu_) = 0;
};

// "seg-<slot>-<nnnn>"
std::string SegmentBase(uint32_t slot, int n);
// Parses a segment base name; false for anything else.
bool ParseSegmentBase(const std::string& base, uint32_t* slot, int* n);

}  // namespace ssdfeed
