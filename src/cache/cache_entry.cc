// CacheEntry: opening an entry safely (against eviction, damage, untrusted
// roots) and tying together its index, its writer and its claims.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cache/capacity.h"
#include "cache/claims.h"
#include "cache/entry_files.h"
#include "cache/memory_fit.h"
#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "cache/segment_writer.h"
#include "cache/writer_slot.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "util/fd_limit.h"
#include "util/hash.h"

namespace ssdfeed {

// The spellings of WarmRead, FillWrite (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(WarmRead, "warm_read", {WarmRead::kAuto, "auto"},
                   {WarmRead::kBuffered, "buffered"}, {WarmRead::kDirect, "direct"})
SSDFEED_ENUM_TABLE(FillWrite, "fill_write", {FillWrite::kAuto, "auto"},
                   {FillWrite::kBuffered, "buffered"}, {FillWrite::kDirect, "direct"})

namespace cf = cache_format;

std::string EntryKey::fingerprint() const {
  Fingerprinter fp;
  fp.Add("ssdfeed-cache-v" + std::to_string(cf::kFormatVersion));
  fp.Add(source_identity);
  fp.Add(spec);
  fp.Add(std::to_string(samples_total));
  return fp.HexDigest();
}

namespace {

// last_used is refreshed at most this often while the entry is in use.
constexpr int64_t kTouchEveryMicros = 60ll * 1000000;
// warm_read=auto looks again this often whether the entry fits in memory.
constexpr int64_t kRedecideEveryMicros = 10ll * 1000000;

// Counts the corrupt records a batch found, as Get does.
class CountingBatch final : public CacheReadBatch {
 public:
  CountingBatch(std::unique_ptr<CacheReadBatch> inner, CacheRead* reads, size_t n, CacheCounters* c)
      : inner_(std::move(inner)), reads_(reads), n_(n), counters_(c) {}
  ~CountingBatch() override { Finish(); }
  void Finish() override {
    if (!inner_) return;
    inner_->Finish();
    inner_.reset();
    for (size_t i = 0; i < n_; ++i)
      if (reads_[i].status.IsCorruption()) counters_->corrupt_records++;
  }

 private:
  std::unique_ptr<CacheReadBatch> inner_;
  CacheRead* reads_;
  size_t n_;
  CacheCounters* counters_;
};

class CacheEntryImpl final : public CacheEntry {
 public:
  CacheEntryImpl(const CacheOptions& opts, const EntryKey& key, std::string dir, bool foreign,
                 std::unique_ptr<FileLock> use_lock)
      : opts_(opts),
        key_(key),
        dir_(std::move(dir)),
        foreign_(foreign),
        use_lock_(std::move(use_lock)),
        index_(opts.env, dir_, key.samples_total, RulesOf(key)) {}

  ~CacheEntryImpl() override {
    writer_.reset();  // syncs; drops the reservation
    if (foreign_) return;
    if (opts_.record_use) TouchLastUsed(opts_.env, dir_, FileMode(opts_));
    WriteStatus(opts_.env, dir_, index_.present(), key_.samples_total, FileMode(opts_));
  }

  // Takes a writer slot, maps the claims; a failure there only means this
  // process reads (and fills without coordination, or not at all).
  Status Init(std::unique_ptr<Capacity> capacity) {
    if (!foreign_) {
      Env* env = opts_.env;
      auto slot = WriterSlot::Acquire(env, dir_, kEntrySlotPrefix, FileMode(opts_));
      if (slot.ok()) {
        slot_ = std::move(*slot);
        // An entry made without its claims (an import) gets them now: charge
        // them first, they are allocated in full.
        Status c;
        if (!env->FileExists(JoinPath(dir_, "claims")))
          c = capacity->Reserve(MetaAllowance(key_.samples_total)).status();
        std::string dir = dir_;
        if (c.ok())  // no room for the claims: no coordination, never over capacity
          c = claims_.Open(env, JoinPath(dir_, "claims"), key_.samples_total, FileMode(opts_),
                           slot_->id(), [env, dir, mode = FileMode(opts_)](uint32_t s) {
                             return SlotAlive(env, dir, kEntrySlotPrefix, s, mode);
                           });
        if (!c.ok())
          env->Warn(c.message() + "; filling without coordination (samples may be prepared twice)");
        capacity->SetCounters(&counters_);
        uint64_t samples = key_.samples_total;
        writer_ = std::make_unique<SegmentWriter>(
            opts_, dir_, slot_->id(), std::move(capacity), &index_, &counters_,
            [env, samples](uint64_t record_bytes) {
              return !FitsInMemory(env, samples * record_bytes);
            },
            [this](uint64_t id) { claims_.Release(id); });
      } else {
        env->Warn(slot.status().message() + "; this process only reads the cache");
      }
    }
    last_touch_us_ = opts_.env->NowMicros();
    SSDFEED_RETURN_IF_ERROR(index_.Refresh());
    index_.SetDirect(UseDirect(opts_.env, opts_.warm_read, index_.DataBytes(), false));
    last_decide_us_ = last_touch_us_.load();
    return Status::OK();
  }

  Status Get(uint64_t id, std::string* buf, CachedSample* out) override {
    Periodic(/*redecide=*/true);  // the loader looks at direct_reads() at each epoch
    // Our own Put, staged for a direct write: written first. (Staged is
    // looked at before the index: a record is indexed before it stops being
    // staged, so this order never misses one in between.)
    if (writer_ && writer_->staged() > 0) writer_->FlushIfStaged(id);
    return Counted(index_.Get(id, buf, out));
  }
  Status GetStored(uint64_t id, std::string* buf, CachedSample* out) override {
    Periodic(/*redecide=*/true);
    if (writer_ && writer_->staged() > 0) writer_->FlushIfStaged(id);  // as Get
    return Counted(index_.Get(id, buf, out, /*decode=*/false));
  }
  Status Counted(Status s) {
    if (s.IsCorruption()) counters_.corrupt_records++;
    return s;
  }

  std::unique_ptr<CacheReadBatch> StartGetMany(CacheRead* reads, size_t n,
                                               ReadBuffers* bufs) override {
    Periodic(/*redecide=*/true);
    if (writer_ && writer_->staged() > 0)
      for (size_t i = 0; i < n && !writer_->FlushIfStaged(reads[i].id); ++i) {
      }
    uint64_t direct = 0;
    auto inner = index_.StartGetMany(reads, n, bufs, &direct);
    counters_.direct_reads += direct;
    return std::make_unique<CountingBatch>(std::move(inner), reads, n, &counters_);
  }
  bool direct_reads() const override { return index_.direct(); }

  bool Contains(uint64_t id) override {
    if (writer_ && writer_->staged() > 0) writer_->FlushIfStaged(id);  // as Get
    return index_.Contains(id);
  }

  using CacheEntry::Put;
  Status Put(uint64_t id, const CachedSample& s) override {
    if (id >= key_.samples_total) return Status::InvalidArgument("sample id out of range");
    SSDFEED_RETURN_IF_ERROR(CheckRulesOnPut(id, s));
    if (!writer_) return Status::NotSupported(warning());
    Periodic(/*redecide=*/false);
    return writer_->Put(id, claims_.NextSeq(index_.max_seq()), s);
  }

  // What every read would refuse as damage (RulesOf the key: another codec,
  // a shape the prepare spec never makes, yuv420 bytes that are not the
  // planes) is refused before it is written.
  // A shape no record can hold at all is the writer's to refuse.
  Status CheckRulesOnPut(uint64_t id, const CachedSample& s) const {
    if (s.height < 0 || s.width < 0 || s.channels < 0 || s.height > 65535 || s.width > 65535 ||
        s.channels > 255)
      return Status::OK();
    cf::RecordHeader h;
    h.height = static_cast<uint16_t>(s.height);
    h.width = static_cast<uint16_t>(s.width);
    h.channels = static_cast<uint8_t>(s.channels);
    h.codec = static_cast<uint8_t>(s.codec);
    std::string bad = cf::CheckRules(h, index_.rules());
    if (bad.empty() && s.codec != RecordCodec::kRaw)
      bad = cf::CheckStoredLength(h, s.stored.size());
    if (bad.empty()) return Status::OK();
    return Status::InvalidArgument(dir_ + ": sample " + std::to_string(id) + ": " + bad);
  }

  bool admitting() const override { return writer_ && writer_->admitting(); }
  Admission admission() const override {
    if (foreign_ || !writer_) return Admission::kReadOnly;
    return writer_->admission();
  }

  bool TryClaim(uint64_t id, bool* released) override {
    if (released != nullptr) *released = false;
    return !writer_ || claims_.TryClaim(id, released);
  }
  void ReleaseClaim(uint64_t id) override {
    // A staged record keeps its claim until it is indexed: another process
    // waiting for it then finds it instead of preparing it again.
    if (writer_ && !writer_->ReleaseWhenStored(id)) claims_.Release(id);
  }

  Status Refresh() override { return index_.Refresh(); }
  Status Sync() override { return writer_ ? writer_->Sync() : Status::OK(); }

  uint64_t samples_present() override {
    if (writer_ && writer_->staged() > 0) writer_->Flush();
    return index_.present();
  }
  uint64_t samples_total() const override { return key_.samples_total; }
  bool read_only() const override { return foreign_; }
  const std::string& dir() const override { return dir_; }
  std::string warning() const override {
    if (foreign_) return "entry owned by another user: read only";
    if (!writer_) return "no writer slot: read only";
    return writer_->warning();
  }
  CacheCounters& counters() override { return counters_; }

 private:
  // Upkeep on the read and write paths, one clock read per call: last_used
  // is refreshed every kTouchEveryMicros (an entry in use for weeks must not
  // look weeks old to `gc --older-than`), and with warm_read=auto, Gets look
  // again every 10 s whether the entry (filled after it was opened, in the
  // cold epoch) has outgrown memory.
  void Periodic(bool redecide) {
    int64_t now = opts_.env->NowMicros();
    if (!foreign_ && opts_.record_use && Due(&last_touch_us_, now, kTouchEveryMicros))
      TouchLastUsed(opts_.env, dir_, FileMode(opts_));
    if (redecide && opts_.warm_read == WarmRead::kAuto &&
        Due(&last_decide_us_, now, kRedecideEveryMicros))
      index_.SetDirect(UseDirect(opts_.env, opts_.warm_read, index_.DataBytes(), index_.direct()));
  }

  // True for the one thread that finds *last at least every micros old and
  // moves it to now; the others go on.
  static bool Due(std::atomic<int64_t>* last, int64_t now, int64_t every) {
    int64_t seen = last->load(std::memory_order_relaxed);
    return now - seen >= every && last->compare_exchange_strong(seen, now);
  }

  const CacheOptions opts_;
  const EntryKey key_;
  const std::string dir_;
  const bool foreign_;
  CacheCounters counters_;
  std::unique_ptr<FileLock> use_lock_;
  std::unique_ptr<WriterSlot> slot_;
  Claims claims_;
  SegmentIndex index_;
  std::unique_ptr<SegmentWriter> writer_;
  std::atomic<int64_t> last_touch_us_{0};
  std::atomic<int64_t> last_decide_us_{0};
};

// Makes the entry directory with its manifest in trash/ and renames it into
// place, so no process ever sees an entry without a manifest (a kill in
// between leaves only trash, which is charged and emptied). Losing the
// rename to another process is fine: its entry is the same one.
Status CreateEntryDir(const CacheOptions& opts, const EntryKey& key, const std::string& fp,
                      const std::string& dir, Capacity* capacity) {
  Env* env = opts.env;
  RootPaths paths(opts.root);
  // A new entry's small files are charged before they exist.
  auto r = capacity->Reserve(MetaAllowance(key.samples_total));
  if (!r.ok()) return r.status().WithContext("cannot create cache entry " + dir);
  static std::atomic<uint64_t> n{0};
  std::string staging =
      JoinPath(paths.trash, std::string(kStagingPrefix) + std::to_string(capacity->slot()) + "." +
                                fp + "." + std::to_string(::getpid()) + "." + std::to_string(n++));
  auto maker = CreateStagingDir(env, opts, staging);
  if (!maker.ok()) {
    // Cleanup after the error returned below; EmptyTrash removes leftovers.
    env->RemoveDirAndFiles(staging).IgnoreError();
    return maker.status().IsNoSpace() ? maker.status() : Status::NotFound("retry");
  }
  Status s = EnsureManifest(env, staging, key, fp, false, FileMode(opts));
  if (s.ok()) s = env->RenameFile(staging, dir);
  // In place: no longer staging. A lock file left behind is an empty file
  // nobody locks again.
  if (s.ok()) env->RemoveFile(JoinPath(dir, kMakerLock)).IgnoreError();
  if (!s.ok()) {
    env->RemoveDirAndFiles(staging).IgnoreError();  // as above
    // Another process put its entry in place first (or emptied our staging
    // dir from the trash): look again.
    return s.IsNoSpace() || s.code() == Status::Code::kInvalidArgument ? s
                                                                       : Status::NotFound("retry");
  }
  return env->SyncDir(paths.entries);  // the new entry survives a power cut
}

struct Opened {
  std::unique_ptr<FileLock> use_lock;
  bool foreign = false;
};

// One attempt at creating (if needed), locking and checking the entry dir.
// NotFound means "moved away meanwhile: try again".
Result<Opened> TryOpenDir(const CacheOptions& opts, const EntryKey& key, const std::string& fp,
                          const std::string& dir, Capacity* capacity) {
  Env* env = opts.env;
  RootPaths paths(opts.root);
  auto fi = env->Lstat(dir);
  if (fi.ok() && (fi->is_symlink || !fi->is_dir))
    return Status::InvalidArgument(dir + ": not a directory (a symlink?); refusing to follow it");
  if (!fi.ok()) {
    if (!fi.status().IsNotFound()) return fi.status();
    SSDFEED_RETURN_IF_ERROR(CreateEntryDir(opts, key, fp, dir, capacity));
    SSDFEED_ASSIGN_OR_RETURN(fi, env->Lstat(dir));
  }
  // Never serve what someone we do not trust put there under our fingerprint.
  SSDFEED_RETURN_IF_ERROR(CheckEntryOwner(env, opts, dir, *fi));
  Opened o;
  o.foreign = IsForeignEntry(*fi, opts);
  // Bounded: a process stopped while it holds the lock exclusively (an
  // evictor, a compaction's swap) must cost a miss, not a hang; Busy, and
  // the loader trains from the origin.
  auto lock = LockEntryUse(env, dir, false, FileMode(opts));
  if (!lock.ok()) return lock.status();
  // An evictor may have moved the entry into trash/ (and another opener made
  // a new one) between our look and the lock: only the same directory counts.
  auto after = env->Lstat(dir);
  if (!after.ok() || after->inode != fi->inode) return Status::NotFound(dir + ": moved away");
  // The directory's inode may have been reused by a new entry at this path
  // after ours was deleted; the lock file we hold must be the one there now.
  auto lf = env->Lstat(JoinPath(dir, "use.lock"));
  if ((*lock)->inode() != 0 && (!lf.ok() || lf->inode != (*lock)->inode()))
    return Status::NotFound(dir + ": moved away");
  o.use_lock = std::move(*lock);
  Status m = EnsureManifest(env, dir, key, fp, o.foreign, FileMode(opts));
  if (m.IsCorruption() && !o.foreign) {
    // A damaged manifest is a damaged entry: rebuild it, once nobody uses it.
    env->Warn(m.message() + "; rebuilding the entry");
    o.use_lock.reset();
    EntryDirInfo e;
    e.name = fp;
    e.dir = dir;
    e.file_mode = FileMode(opts);
    SSDFEED_RETURN_IF_ERROR(DeleteEntryIfUnused(env, paths, e));
    return Status::NotFound(dir + ": rebuilt");
  }
  SSDFEED_RETURN_IF_ERROR(m);
  return o;
}

}  // namespace

Result<std::unique_ptr<CacheEntry>> CacheEntry::Open(const CacheOptions& in, const EntryKey& key) {
  RaiseFdLimit();  // an entry may hold a segment per writer that ever ran at once
  CacheOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  if (opts.root.empty()) return Status::InvalidArgument("cache root not set");
  // Refused before anything is made: the claims file and the index are
  // sized by it, and no reader opens a manifest declaring more.
  if (key.samples_total > kMaxSamplesTotal)
    return Status::InvalidArgument(key.source_uri + ": " + std::to_string(key.samples_total) +
                                   " samples is more than a cache entry holds (at most " +
                                   std::to_string(kMaxSamplesTotal) + ", 2^32)");
  Env* env = opts.env;
  RootPaths paths(opts.root);
  SSDFEED_RETURN_IF_ERROR(PrepareRoot(env, opts));
  EmptyTrash(env, paths);  // what a killed gc or evictor left
  std::string fp = key.fingerprint();
  std::string dir = JoinPath(paths.entries, fp);
  // A race lost to an evictor (it moved the entry away between our look and
  // our lock) is retried. Bounded by time, not by a count: on a loaded
  // machine an evictor that runs while this thread is descheduled wins most
  // races (CI saw 3 of 300 opens lose 20 in a row to one spinning evictor),
  // while each retry is cheap and a real evictor removes an entry only once.
  const int64_t give_up = env->NowMicros() + 2'000'000;
  for (int attempt = 0; attempt < 20 || env->NowMicros() < give_up; ++attempt) {
    auto capacity = std::make_unique<Capacity>(opts, dir, nullptr);
    auto o = TryOpenDir(opts, key, fp, dir, capacity.get());
    if (!o.ok() && o.status().IsNotFound()) continue;
    if (!o.ok()) return o.status();
    if (!o->foreign && opts.record_use) TouchLastUsed(env, dir, FileMode(opts));
    auto entry =
        std::make_unique<CacheEntryImpl>(opts, key, dir, o->foreign, std::move(o->use_lock));
    SSDFEED_RETURN_IF_ERROR(entry->Init(std::move(capacity)));
    return std::unique_ptr<CacheEntry>(std::move(entry));
  }
  return Status::Busy(dir + ": entry keeps being evicted while opening");
}

Status VerifyEntry(CacheEntry* entry, VerifyReport* report) {
  *report = {};
  SSDFEED_RETURN_IF_ERROR(entry->Refresh());
  std::string buf;
  for (uint64_t id = 0; id < entry->samples_total(); ++id) {
    if (!entry->Contains(id)) {
      report->missing++;
      continue;
    }
    CachedSample s;
    Status st = entry->Get(id, &buf, &s);
    if (st.ok()) {
      report->good++;
    } else if (st.IsCorruption()) {
      report->corrupt++;
      report->corrupt_ids.push_back(id);
    } else {
      return st;
    }
  }
  return Status::OK();
}

}  // namespace ssdfeed
