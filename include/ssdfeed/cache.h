// The cache store: prepared samples on local SSD, shared by every job on the
// node, crash-safe, bounded by a capacity, checked on every read.
// The on-disk format is described in docs/cache-format.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/counters.h"
#include "ssdfeed/env.h"
#include "ssdfeed/image.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// How warm epochs read records (see docs/cache-format.md, "Reading").
enum class WarmRead {
  // Direct when the entry's records do not fit in the memory available when
  // it is opened (the page cache cannot hold them: every epoch reads the
  // device); buffered otherwise, so a dataset that fits is served from RAM.
  kAuto,
  kBuffered,  // pread through the page cache.
  // O_DIRECT reads of the record's 4 KiB-aligned window, many in flight
  // (io_uring): the device's random-read speed, page cache untouched.
  // Falls back to buffered where the filesystem refuses O_DIRECT.
  kDirect,
};

// How a fill writes records (see docs/cache-format.md, "Writing").
enum class FillWrite {
  // Direct when the entry's records (samples x the first record's size)
  // will not fit in the memory available (min of MemAvailable and the
  // cgroup's limit) when the first record is stored; buffered otherwise, so a
  // dataset that fits is in the page cache for its second epoch.
  kAuto,
  // write(2) through the page cache by the worker that prepared the sample.
  kBuffered,
  // Workers copy records into 1 MiB aligned chunks; one writer thread per
  // entry writes them with O_DIRECT (no page-cache copy or writeback on the
  // workers' cores) and indexes each record once its bytes are written.
  // Falls back to buffered where the filesystem refuses O_DIRECT.
  kDirect,
};

struct CacheOptions {
  // The cache root directory (created 0700, or 0770 with group_shared).
  // Required; the CLI and Python default it to $SSDFEED_CACHE, then
  // ~/.cache/ssdfeed.
  std::string root;
  // Most bytes the whole root may hold, across all entries and processes.
  // 0: the bytes the root holds now plus 80% of the filesystem's free space.
  uint64_t capacity_bytes = 0;
  // Group-sharing mode for nodes where one group's jobs share a cache:
  // directories 02770 and files 0660 instead of 0700 / 0600 (a job's own
  // stats/p-*.stats: 0640, only its owner writes it). Default false.
  bool group_shared = false;
  // Data is fdatasync'ed after this many bytes appended by one writer (and when
  // the entry closes). Smaller loses less on power loss. Default 64 MiB.
  uint64_t sync_bytes = 64ull << 20;
  // Capacity is reserved in chunks of this size. Default 64 MiB.
  uint64_t reserve_chunk = 64ull << 20;
  // A new segment file starts after this many bytes. Default 1 GiB.
  uint64_t segment_bytes = 1ull << 30;
  // How long to wait for a sample another live process is preparing before
  // preparing it too (bounds duplicated work vs. stalls). Default 3 s.
  double claim_wait_seconds = 3.0;
  // How records are read back. Default kAuto.
  WarmRead warm_read = WarmRead::kAuto;
  // How a fill writes records. Default kAuto.
  FillWrite fill_write = FillWrite::kAuto;
  // Opening an entry counts as using it: its last_used (which orders LRU
  // eviction and `gc --older-than`) is refreshed at open, every minute while
  // in use, and at close. Tools that only inspect (verify, ls, export) set
  // false. Default true.
  bool record_use = true;
  // All file access. Default Env::Default().
  Env* env = nullptr;
};

// What identifies an entry, and what is recorded in its manifest.
struct EntryKey {
  std::string source_uri;
  std::string source_identity;  // Source::identity()
  std::string spec;             // PrepareSpec::Canonical()
  uint64_t samples_total = 0;
  // JSON object recorded in the manifest so that `cache verify --repair`
  // can rebuild the preparation and reopen the source. Not fingerprinted.
  // When it holds a PrepareSpec (ToJson) whose Canonical() is `spec`, the
  // entry's records must be of that spec's codec, channels and size;
  // otherwise raw records of any shape (docs/cache-format.md, "What a reader
  // checks before allocating"). Default "{}".
  std::string prepare_json = "{}";
  std::string fingerprint() const;  // hex; the entry's directory name
};

// Counters of one open entry's store side: the CACHE(member) rows of
// SSDFEED_COUNTERS (ssdfeed/counters.h), copied into the job's metrics.
// Hits and misses are counted once, by the fetcher, in the job's stats, not
// here.
struct CacheCounters {
#define SSDFEED_CACHE_FIELD_LOADER
#define SSDFEED_CACHE_FIELD_PROCESS
#define SSDFEED_CACHE_FIELD_CACHE(member) std::atomic<uint64_t> member{0};
#define SSDFEED_CACHE_FIELD(slot, key, name, help, owner) SSDFEED_CACHE_FIELD_##owner
  SSDFEED_COUNTERS(SSDFEED_CACHE_FIELD)
#undef SSDFEED_CACHE_FIELD
#undef SSDFEED_CACHE_FIELD_LOADER
#undef SSDFEED_CACHE_FIELD_PROCESS
#undef SSDFEED_CACHE_FIELD_CACHE
  // The entry's own view of bad reads (tests); the job's published
  // corrupt_records is counted by the fetcher.
  std::atomic<uint64_t> corrupt_records{0};
};

// CacheCounters' member of each Ctr slot, nullptr where the cache does not
// count it.
inline constexpr std::atomic<uint64_t> CacheCounters::*kCacheCounterOf[] = {
#define SSDFEED_CACHE_MEMBER_LOADER nullptr
#define SSDFEED_CACHE_MEMBER_PROCESS nullptr
#define SSDFEED_CACHE_MEMBER_CACHE(member) &CacheCounters::member
#define SSDFEED_CACHE_MEMBER(slot, key, name, help, owner) SSDFEED_CACHE_MEMBER_##owner,
    SSDFEED_COUNTERS(SSDFEED_CACHE_MEMBER)
#undef SSDFEED_CACHE_MEMBER
#undef SSDFEED_CACHE_MEMBER_LOADER
#undef SSDFEED_CACHE_MEMBER_PROCESS
#undef SSDFEED_CACHE_MEMBER_CACHE
};
static_assert(std::size(kCacheCounterOf) == kNumCounters);

// A prepared sample read from the cache; pixels point into the caller's buffer.
struct CachedSample {
  const uint8_t* pixels = nullptr;
  int height = 0, width = 0, channels = 0;
  int64_t label = -1;
  // The sample's other fields (mask, boxes, arrays, ...) in the record's
  // field section (docs/cache-format.md, "Fields"): empty for a sample of
  // only an image and a label. ParsedFields reads it.
  std::string_view fields;
  // How the record stores the pixels (docs/cache-format.md, "Codecs") and
  // its stored bytes. Every read serves raw HWC `pixels` whatever the codec
  // (decoded into the caller's buffers); `stored` then points into the
  // record. Put stores `stored` as this codec's bytes when codec is not
  // kRaw (its pixels are then not read), else the pixels.
  RecordCodec codec = RecordCodec::kRaw;
  std::string_view stored;
  size_t bytes() const { return static_cast<size_t>(height) * width * channels; }
  // The pixels and every other field: what the cache_*_bytes counters count.
  size_t payload_bytes() const { return bytes() + fields.size(); }
  // `fields` parsed, as views into it (valid as long as it is), into *out,
  // replacing what it held; none for a sample of only an image and a label.
  // Corruption saying what is wrong when the section is malformed: every
  // length is checked against its bounds, so a flipped byte never reads
  // outside it. (The section's layout stays private to src/cache.)
  Status ParsedFields(std::vector<FieldView>* out) const;
};

// Buffers for CacheEntry::GetMany, kept between calls (the hot path
// allocates nothing): one per read, aligned for O_DIRECT, grown as needed.
class ReadBuffers {
 public:
  char* Get(size_t i, size_t n) {
    if (i >= bufs_.size()) bufs_.resize(i + 1);
    Buf& b = bufs_[i];
    if (b.cap < n) {
      size_t cap = (n + 4095) / 4096 * 4096;
      b.p.reset(static_cast<char*>(std::aligned_alloc(4096, cap)));
      b.cap = b.p ? cap : 0;
    }
    return b.p.get();
  }
  // Where read i's pixels are decoded when its record is not raw.
  uint8_t* Pixels(size_t i, size_t n) {
    if (i >= pixels_.size()) pixels_.resize(i + 1);
    Buf& b = pixels_[i];
    if (b.cap < n) {
      b.p.reset(static_cast<char*>(std::malloc(n > 0 ? n : 1)));
      b.cap = b.p ? n : 0;
    }
    return reinterpret_cast<uint8_t*>(b.p.get());
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  struct Buf {
    std::unique_ptr<char, Free> p;
    size_t cap = 0;
  };
  std::vector<Buf> bufs_;
  std::vector<Buf> pixels_;
};

// One read of CacheEntry::GetMany.
struct CacheRead {
  uint64_t id = 0;
  CachedSample sample;  // out: pixels point into the ReadBuffers
  Status status;        // out: as Get's
  bool stored = false;  // in: read as GetStored (pixels not decoded)
};

// The reads of CacheEntry::StartGetMany, in flight until Finish.
class CacheReadBatch {
 public:
  virtual ~CacheReadBatch() = default;
  // Waits for the reads and checks every record (the CacheReads' status and
  // sample). Called once; the destructor waits if it was not.
  virtual void Finish() = 0;
};

// Why an entry stopped admitting new samples (0: it admits). The values are
// stored in stats files: append only.
enum class Admission : uint64_t {
  kAdmitting = 0,
  kCapacity = 1,  // the root's capacity is reached
  kDiskFull = 2,  // ENOSPC (or EDQUOT) from the filesystem
  kIOError = 3,   // EIO or another write/sync error
  kReadOnly = 4,  // the entry belongs to another user, or this process has no writer slot
};

class CacheEntry {
 public:
  virtual ~CacheEntry() = default;

  // Opens (creating if needed) the entry for key under opts.root. Holds a
  // shared "in use" lock until destroyed, so no other process evicts it.
  // Refuses a root other users may write to (InvalidArgument); rebuilds an
  // entry whose manifest is damaged; retries when an evictor moves the entry
  // away meanwhile. A key of more than 2^32 samples (the format's bound) is
  // InvalidArgument, before anything is made.
  static Result<std::unique_ptr<CacheEntry>> Open(const CacheOptions& opts, const EntryKey& key);

  // Reads sample id into *buf. NotFound when absent; Corruption when the
  // record fails its checks, its codec and shape against the key's
  // (EntryKey::prepare_json) included (it is then dropped from the index:
  // Put repairs).
  virtual Status Get(uint64_t id, std::string* buf, CachedSample* out) = 0;
  // Get, but a record whose codec is not raw is checked and left coded:
  // out->pixels is null and out->stored its bytes (for a renderer that
  // reads them as they are, as the loader crops yuv420's planes). *buf
  // holds the record in its first bytes and, as with Get, only grows.
  virtual Status GetStored(uint64_t id, std::string* buf, CachedSample* out) = 0;
  // Reads n samples at once, each checked as Get checks it; with direct
  // reads (CacheOptions::warm_read) they are all in flight together.
  void GetMany(CacheRead* reads, size_t n, ReadBuffers* bufs) {
    StartGetMany(reads, n, bufs)->Finish();
  }
  // GetMany in two halves: with direct reads the device works between them
  // (a worker renders the previous group meanwhile). reads and bufs must
  // live until Finish.
  virtual std::unique_ptr<CacheReadBatch> StartGetMany(CacheRead* reads, size_t n,
                                                       ReadBuffers* bufs) = 0;
  // True when records are read with O_DIRECT (warm_read, resolved at open).
  virtual bool direct_reads() const = 0;
  virtual bool Contains(uint64_t id) = 0;

  // Stores a prepared sample: its pixels, label and fields (s.fields, a
  // field section as cache_format::EncodeFields writes it; empty for none).
  // NoSpace once the capacity is reached or the disk is full (the entry then
  // keeps a fixed subset and stops admitting); IOError on EIO. Neither harms
  // what is stored. InvalidArgument for a sample no record can hold (a
  // malformed field section, a side over 65535, over 1 GiB in all) or that
  // a read would refuse (another codec or shape than the key's spec makes).
  virtual Status Put(uint64_t id, const CachedSample& s) = 0;
  // Put of an image and a label only.
  Status Put(uint64_t id, int64_t label, const uint8_t* pixels, int height, int width,
             int channels) {
    CachedSample s;
    s.pixels = pixels;
    s.height = height;
    s.width = width;
    s.channels = channels;
    s.label = label;
    return Put(id, s);
  }
  // False once Put has failed for space or I/O, or the entry is read-only.
  virtual bool admitting() const = 0;
  // Why admission stopped; kAdmitting while it admits. Set where the failure
  // happens, from its Status code (never read back from the message).
  virtual Admission admission() const = 0;

  // Claims the right to prepare id (true), or says another live process is
  // preparing it (false). Release after Put (or on failure). *released (if
  // given) is set when the claim had another owner before (one that let go
  // of it, died, or is another thread of this process): that one may have
  // stored id after your last look, so Refresh and look again before
  // preparing it. Unset, a claim nobody held needs no second look.
  virtual bool TryClaim(uint64_t id, bool* released = nullptr) = 0;
  virtual void ReleaseClaim(uint64_t id) = 0;

  // Picks up records other processes appended since the last refresh.
  virtual Status Refresh() = 0;
  // Makes everything put so far durable.
  virtual Status Sync() = 0;

  virtual uint64_t samples_present() = 0;
  virtual uint64_t samples_total() const = 0;
  virtual bool read_only() const = 0;  // owned by another user
  virtual const std::string& dir() const = 0;
  virtual std::string warning() const = 0;  // why admission stopped (empty if admitting)
  virtual CacheCounters& counters() = 0;
};

// What `ssdfeed cache ls` shows of an entry.
struct EntryInfo {
  std::string name;  // fingerprint
  std::string dir;
  std::string source_uri, spec;  // spec: PrepareSpec::Canonical()
  uint64_t samples_total = 0, samples_present = 0, bytes = 0;
  int64_t last_used = 0;  // unix seconds
  int64_t created = 0;
  bool in_use = false;
  bool foreign = false;  // owned by another user: never deleted
  // Samples `warm --on-error skip` found bad (listed in skipped.json).
  uint64_t skipped = 0;
  std::string state;  // "complete" | "complete (N skipped)" | "partial" | "broken: ..."
};

// Raises the soft RLIMIT_NOFILE to the hard limit (as many servers do at
// start): an entry that many writers filled at once holds a segment file per
// writer, and a default soft limit of 1024 must not make it unusable. The
// library calls it at each entry open and compaction; a program may call it
// at start. Failing to raise it is no error: readers stay within whatever
// limit there is.
void RaiseFdLimit();

Result<std::vector<EntryInfo>> ListEntries(const CacheOptions& opts);
// The key an entry's manifest recorded (EntryInfo::dir), so that a tool can
// reopen the entry and its source.
Result<EntryKey> ReadEntryKey(Env* env, const std::string& dir);
// Refuses a root (or its entries/ directory) that other users may write to:
// they could plant entries that would be served. The sticky bit (as on /tmp)
// makes a world-writable root acceptable; group-writable is fine when the
// cache is group-shared.
Status CheckRootTrusted(Env* env, const CacheOptions& opts);
// Deletes an entry not in use and owned by us. Busy if in use.
Status RemoveEntry(const CacheOptions& opts, const std::string& name);
// Evicts unused entries, least recently used first, until the root holds at
// most max_bytes (0: no size target) and none is older than max_age_seconds
// (0: no age target). Returns the names removed.
Result<std::vector<std::string>> CollectGarbage(const CacheOptions& opts, uint64_t max_bytes,
                                                int64_t max_age_seconds);
// Bytes the cache root holds (every file under entries/).
Result<uint64_t> RootBytes(const CacheOptions& opts);
// The most bytes the root may hold under opts: opts.capacity_bytes when set;
// when 0, what the root holds now, counted as writers count it (each entry
// charged at least its small files' allowance, plus trash/ and stats/),
// plus 80% of the filesystem's free space. The one computation writers,
// `ssdfeed doctor` and the exporter's ssdfeed_cache_capacity_bytes share.
Result<uint64_t> EffectiveCapacity(const CacheOptions& opts);

// Rewrites an entry nobody uses into few segment files (its current, intact
// records only) and deletes the old ones; Busy while the entry is in use.
// Writer slots keep an entry's files bounded by how many writers ran at
// once; this folds what many concurrent writers left behind.
struct CompactReport {
  uint64_t files_before = 0, files_after = 0, records = 0, bytes_before = 0, bytes_after = 0;
};
Status CompactEntry(const CacheOptions& opts, const std::string& name, CompactReport* report);

// Checks every record of an entry; counts good, corrupt (dropped) and absent.
struct VerifyReport {
  uint64_t good = 0, corrupt = 0, missing = 0;
  std::vector<uint64_t> corrupt_ids;
};
Status VerifyEntry(CacheEntry* entry, VerifyReport* report);

// Portable entries: one entry as a tar stream, to build it once (in CI) and
// ship it to every node. See docs/cache-format.md "Portable entries".
struct ExportOptions {
  // Also export an entry that lacks samples. Default false: a partial entry
  // is refused, naming how many samples it holds.
  bool partial = false;
  // Compress the stream with zstd (libarchive's filter). Default false.
  bool zstd = false;
};

// What an export or an import did.
struct TransferReport {
  std::string entry;  // the entry's fingerprint (import: on this node)
  std::string source_uri;
  uint64_t samples_total = 0;
  uint64_t records = 0, record_bytes = 0;  // in the stream
  uint64_t added = 0;                      // import: records now in the entry
  uint64_t already_present = 0;            // import: merged, skipped
  bool merged = false;                     // import: into an entry that existed
};

// Writes entry `name` (a full fingerprint) of opts.root to fd as a tar
// stream. Reads a snapshot (what the entry's index holds when the export
// starts) without stopping the processes that fill or read it; every record
// is checked before it goes out. Does not refresh the entry's last_used.
Status ExportEntry(const CacheOptions& opts, const std::string& name, int fd,
                   const ExportOptions& eo, TransferReport* report);

struct ImportOptions {
  // Maps the exported entry's key to the key it gets on this node (another
  // source URI and the identity of the files there). Empty: the key is kept
  // as exported. Default empty.
  std::function<Result<EntryKey>(const EntryKey& exported)> rebind;
  // Called on every record read (already checked against its checksum); an
  // error refuses the whole import (e.g. the node's origin prepares the
  // sample differently: not the same dataset). Default empty: none.
  std::function<Status(uint64_t id, const CachedSample& record)> check_record;
};

// Reads an export stream from fd (plain or zstd) into opts.root. Charges the
// capacity first, checks every record and the stream's checksum table, and
// stages inside the root (trash/): only a complete, intact stream becomes an
// entry, renamed into place; into an entry that exists, the records it lacks
// are added. On any error nothing is left behind.
Status ImportEntry(const CacheOptions& opts, int fd, const ImportOptions& io,
                   TransferReport* report);

}  // namespace ssdfeed
