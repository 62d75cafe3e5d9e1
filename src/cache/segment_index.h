// SegmentIndex: where each sample's newest intact record lives, across every
// writer's segments of one entry. Refresh() follows the tails of the .idx
// files other writers append to; Get() reads and checks one record.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/record_format.h"
#include "ssdfeed/cache.h"
#include "util/mutex.h"

namespace ssdfeed {

class SegmentIndex {
 public:
  // rules: what every record must be (RulesOf the entry's key); a record
  // that breaks them is Corruption, found before anything is sized from it.
  // Default: raw records of any shape.
  SegmentIndex(Env* env, std::string dir, uint64_t samples_total,
               cache_format::RecordRules rules = {});

  // Reads the index entries appended since the last refresh to every .idx of
  // the entry, except our own writer's segments (applied by its Put). Never
  // follows a symlink; skips non-regular files.
  Status Refresh() EXCLUDES(mu_, refresh_mu_);

  // Reads and checks sample id's record and serves its pixels raw: a record
  // of another codec is decoded into *buf after the record (buf only grows,
  // so a warm reader allocates nothing). NotFound when absent; Corruption
  // (the record is then dropped from the index) when a check or the
  // decoding fails.
  // decode false: the record checked and left coded (out->pixels null for
  // a codec other than raw), *buf grown as by a decoding Get (the loader's
  // reads of yuv420 planes).
  Status Get(uint64_t id, std::string* buf, CachedSample* out, bool decode = true) EXCLUDES(mu_);
  // Get without decoding: *buf is exactly the record, out->stored its
  // stored pixels (out->pixels is null for a codec other than raw). For
  // export, which carries records as they are.
  Status GetStored(uint64_t id, std::string* buf, CachedSample* out) EXCLUDES(mu_);
  // Reads and checks n records, as Get does; with direct reads on, the
  // 4 KiB-aligned window around each record is read with O_DIRECT, all of
  // them in flight together (Env::ReadMany). The reads start here and are
  // checked by the batch's Finish; *direct gets how many went direct.
  std::unique_ptr<CacheReadBatch> StartGetMany(CacheRead* reads, size_t n, ReadBuffers* bufs,
                                               uint64_t* direct) EXCLUDES(mu_);
  // Read records with O_DIRECT from now on (where the filesystem allows).
  void SetDirect(bool on) { direct_.store(on, std::memory_order_relaxed); }
  bool direct() const { return direct_.load(std::memory_order_relaxed); }
  // Bytes of all the entry's .dat files (what warm_read=auto compares with
  // the memory available).
  uint64_t DataBytes() EXCLUDES(mu_);
  bool Contains(uint64_t id) EXCLUDES(mu_);
  // Bytes of id's record (header + payload) as indexed; 0 when absent.
  uint32_t RecordLength(uint64_t id) EXCLUDES(mu_);
  uint64_t present() const { return present_.load(std::memory_order_relaxed); }
  uint64_t max_seq() const { return max_seq_.load(std::memory_order_relaxed); }
  uint64_t size() const { return size_; }
  const cache_format::RecordRules& rules() const { return rules_; }

  // Calls fn with every present record (checked; a bad one is dropped and
  // skipped), one segment at a time in file order, each segment's file
  // closed before the next is opened. For compaction: how an entry of any
  // number of segments is read within any descriptor limit.
  using RecordFn = std::function<Status(uint64_t id, const std::string& record)>;
  Status ForEachRecord(const RecordFn& fn) EXCLUDES(mu_, files_mu_);

  // At most this many segment files open at once (reads in flight may hold
  // a closed one a moment longer). Set from the process's descriptor limit.
  void SetMaxOpenFiles(size_t n) EXCLUDES(files_mu_);
  size_t open_files() EXCLUDES(files_mu_);

  // Marks segment `base` as our own writer's (its records come through
  // Apply, not Refresh) and reads its .dat through `reader` unless one is
  // open already. Returns the segment's slot.
  uint32_t AttachOwn(const std::string& base, std::unique_ptr<RandomAccessFile> reader)
      EXCLUDES(mu_, refresh_mu_);
  // Records a Put of ours (segment slot from AttachOwn).
  void Apply(uint32_t seg, const cache_format::IndexEntry& e) EXCLUDES(mu_);

 private:
  static constexpr uint32_t kAbsent = 0xffffffffu;
  struct Loc {
    uint32_t seg = kAbsent;
    uint32_t len = 0;
    uint64_t offset = 0;
    uint64_t seq = 0;
  };
  struct Segment {
    std::string base;           // file name without extension
    uint64_t idx_consumed = 0;  // bytes of .idx applied
    uint64_t idx_seen_size = 0;
    bool own = false;  // written by this process: never refreshed
    // Guarded by files_mu_ (not annotated: a nested type cannot name it).
    // The .dat, opened on demand and closed again when more files than the
    // budget are open; a reader copies the pointer, so a closed file lives
    // until its reads are done. `direct`: the .dat opened with O_DIRECT, on
    // the first direct read (null where the filesystem refuses it, which
    // `direct_refused` remembers: those reads stay buffered).
    std::shared_ptr<const RandomAccessFile> dat, direct;
    bool direct_refused = false;
    bool in_lru = false;
    std::list<Segment*>::iterator lru;
  };
  struct Pending;  // a direct read in flight
  class Batch;

  // The segment's .dat (opened again if it was closed), or its O_DIRECT
  // twin (null when refused). Either may close another segment's files.
  Result<std::shared_ptr<const RandomAccessFile>> DatFile(Segment* seg) EXCLUDES(files_mu_);
  std::shared_ptr<const RandomAccessFile> DirectFile(Segment* seg) EXCLUDES(files_mu_);
  void TouchLocked(Segment* seg) REQUIRES(files_mu_);
  void CloseLocked(Segment* seg) REQUIRES(files_mu_);
  void EvictLocked() REQUIRES(files_mu_);
  // Where Check decodes a record's pixels: after the record in str (grown,
  // so rec moves with it), or in bufs->Pixels(slot); neither: not decoded.
  struct PixelsTo {
    std::string* str = nullptr;
    ReadBuffers* bufs = nullptr;
    size_t slot = 0;
  };
  Status Check(uint64_t id, const Loc& loc, const RandomAccessFile* dat, const char* rec,
               size_t got, CachedSample* out, PixelsTo to);
  Status ReadRecord(uint64_t id, std::string* buf, Loc* loc,
                    std::shared_ptr<const RandomAccessFile>* dat, size_t* got) EXCLUDES(mu_);

  Status ReadNewEntries(const std::string& base) REQUIRES(refresh_mu_) EXCLUDES(mu_);
  uint32_t SlotFor(const std::string& base) REQUIRES(refresh_mu_) EXCLUDES(mu_);
  void ApplyLocked(uint32_t seg, const cache_format::IndexEntry& e) REQUIRES(mu_);
  // Applies n bytes of index entries read at .idx offset pos; *consumed:
  // the end of the last one applied. False at one past the data's end.
  bool ApplyEntries(uint32_t slot, const char* buf, size_t n, uint64_t pos, uint64_t dat_size,
                    uint64_t* consumed) REQUIRES(mu_);
  // Most .idx bytes read at once (a whole number of entries).
  static constexpr size_t kIndexReadChunk = 21846 * cache_format::kIndexEntrySize;  // ~1 MiB
  void Drop(uint64_t id, const Loc& seen) EXCLUDES(mu_);

  Env* const env_;
  const std::string dir_;
  const uint64_t size_;
  const cache_format::RecordRules rules_;
  std::atomic<uint64_t> present_{0}, max_seq_{0};
  std::atomic<bool> direct_{false};

  // Taken before mu_. Serialises refreshes; guards the name map and each
  // segment's idx_consumed (only refreshes touch them).
  Mutex refresh_mu_ ACQUIRED_BEFORE(mu_);
  std::map<std::string, uint32_t> slot_by_base_ GUARDED_BY(refresh_mu_);

  // The sample -> record map and the segment table (only appended to; a
  // Segment's dat is set once, before any Loc names it).
  SharedMutex mu_;
  std::vector<Loc> index_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Segment>> segments_ GUARDED_BY(mu_);

  // A leaf lock: nothing else is taken while it is held. Guards the open
  // segment files (most recently used first) and their count.
  Mutex files_mu_;
  std::list<Segment*> lru_ GUARDED_BY(files_mu_);
  size_t open_files_ GUARDED_BY(files_mu_) = 0;
  size_t max_open_ GUARDED_BY(files_mu_);
};

}  // namespace ssdfeed
