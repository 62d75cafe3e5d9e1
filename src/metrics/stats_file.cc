#include "metrics/stats_file.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "util/sigbus_guard.h"

namespace ssdfeed {

namespace {

uint32_t DirModeOf(const CacheOptions& c) { return c.group_shared ? 02770 : 0700; }
// A process's own stats file: only its owner writes it. The group reads it
// (the exporter, a folder running as another member); nobody else can cut
// it short under the owner's mapping.
uint32_t OwnFileModeOf(const CacheOptions& c) { return c.group_shared ? 0640 : 0600; }

template <typename T>
T LoadAt(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

uint64_t AtomicLoad(const uint8_t* p, size_t off) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p + off), __ATOMIC_RELAXED);
}

// A block in memory only (no cache, metrics off, or no room for the file).
class MemoryPublisher final : public StatsPublisher {
 public:
  explicit MemoryPublisher(const std::string& entry) : block_(metrics::kBlockBytes / 8, 0) {
    Bind(reinterpret_cast<uint8_t*>(block_.data()), entry, "");
  }
  void Bind(uint8_t* b, const std::string& entry, const std::string& path) {
    counters_ = reinterpret_cast<uint64_t*>(b + metrics::kCountersOffset);
    hists_ = reinterpret_cast<uint64_t*>(b + metrics::kHistsOffset);
    times_ = reinterpret_cast<uint64_t*>(b + metrics::kTimesOffset);
    admission_ = reinterpret_cast<uint64_t*>(b + metrics::kAdmissionOffset);
    entry_ = entry;
    path_ = path;
  }

 private:
  std::vector<uint64_t> block_;  // 8-byte aligned
};

// A block in ROOT/stats/p-<id>.stats, mapped shared. The open descriptor
// holds flock(LOCK_SH) until the process ends: that is how the exporter
// tells live files from ended ones, across PID namespaces.
class FilePublisher final : public StatsPublisher {
 public:
  ~FilePublisher() override {
    SigbusGuard::Release(guard_);  // before file_ unmaps
    file_.reset();                 // releases the lock: the file now counts as ended
    std::vector<std::string> ignored;
    // Opportunistic: a file not folded now is folded by the next job or
    // exporter; metrics never fail a job.
    metrics::FoldEnded(env_, cache_, false, &ignored).IgnoreError();
  }
  static Result<std::unique_ptr<StatsPublisher>> Make(Env* env, const CacheOptions& c,
                                                      const std::string& entry);

 private:
  FilePublisher() = default;
  Env* env_ = nullptr;
  CacheOptions cache_;
  // The mapping's SIGBUS guard (util/sigbus_guard.h): the mode keeps other
  // users from cutting the file, the guard keeps anyone who still can (its
  // owner's other processes, root) from killing the job. A fault zeroes
  // the mapping: the job goes on counting into private zeros, and the
  // exporter skips the cut file with a warning.
  SigbusGuard* guard_ = nullptr;
  std::unique_ptr<MappedFile> file_;
};

Result<std::unique_ptr<StatsPublisher>> FilePublisher::Make(Env* env, const CacheOptions& c,
                                                            const std::string& entry) {
  std::string dir = metrics::StatsDir(c.root);
  SSDFEED_RETURN_IF_ERROR(env->CreateDir(dir, DirModeOf(c)));
  std::string raw(16, '\0');
  if (::getrandom(raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size()))
    return Status::FromErrno(errno, "getrandom");
  std::string id = metrics::HexId(raw);
  // Created under a hidden name and renamed once locked, so no exporter ever
  // sees an unlocked new file and folds it as ended.
  std::string tmp = dir + "/.new-" + id, path = dir + "/p-" + id + ".stats";
  MappedFileOptions mo;
  mo.exclusive = true;
  mo.mode = OwnFileModeOf(c);
  // Allocated up front (NewMappedFile does): a store into a mapping of a
  // file the disk cannot back would be SIGBUS, not an error.
  auto mapped = env->NewMappedFile(tmp, metrics::kBlockBytes, mo);
  if (!mapped.ok()) {
    (void)env->RemoveFile(tmp);  // created, then no room to allocate it
    return mapped.status();
  }
  std::unique_ptr<MappedFile> file = std::move(*mapped);
  SigbusGuard* guard = SigbusGuard::Acquire(file->data(), file->size());
  Status s = guard != nullptr ? file->Lock(/*exclusive=*/false, /*blocking=*/true)
                              : Status::Aborted("too many guarded mappings in this process");
  uint8_t* b = file->data();
  if (s.ok()) {
    metrics::InitBlock(b, raw, EntryShortId(entry), env->NowMicros());
    s = env->RenameFile(tmp, path);
  }
  if (!s.ok()) {
    SigbusGuard::Release(guard);
    file.reset();
    (void)env->RemoveFile(tmp);
    return s;
  }
  std::unique_ptr<FilePublisher> p(new FilePublisher());
  p->env_ = env;
  p->cache_ = c;
  p->guard_ = guard;
  p->file_ = std::move(file);
  p->counters_ = reinterpret_cast<uint64_t*>(b + metrics::kCountersOffset);
  p->hists_ = reinterpret_cast<uint64_t*>(b + metrics::kHistsOffset);
  p->times_ = reinterpret_cast<uint64_t*>(b + metrics::kTimesOffset);
  p->admission_ = reinterpret_cast<uint64_t*>(b + metrics::kAdmissionOffset);
  p->entry_ = EntryShortId(entry);
  p->path_ = path;
  return std::unique_ptr<StatsPublisher>(std::move(p));
}

}  // namespace

const char* AdmissionReason(Admission a) {
  switch (a) {
    case Admission::kAdmitting:
      return "none";
    case Admission::kCapacity:
      return "capacity";
    case Admission::kDiskFull:
      return "disk_full";
    case Admission::kIOError:
      return "io_error";
    case Admission::kReadOnly:
      return "read_only";
  }
  return "unknown";
}

const std::vector<double>& HistogramBounds() {
  // 10 us to 10 s: cache reads sit at the bottom, consumer waits anywhere.
  static const std::vector<double> kBounds = {1e-5,   2.5e-5, 5e-5, 1e-4,  2.5e-4, 5e-4, 1e-3,
                                              2.5e-3, 5e-3,   0.01, 0.025, 0.05,   0.1,  0.25,
                                              0.5,    1.0,    2.5,  5.0,   10.0};
  return kBounds;
}

std::string EntryShortId(const std::string& fingerprint) {
  std::string b = fingerprint.substr(fingerprint.find_last_of('/') + 1);
  return b.substr(0, 12);
}

void StatsSnapshot::Add(const StatsSnapshot& o) {
  for (size_t i = 0; i < counters.size(); ++i) counters[i] += o.counters[i];
  for (size_t i = 0; i < times.size(); ++i) times[i] += o.times[i];
  for (size_t h = 0; h < hists.size(); ++h) {
    for (size_t i = 0; i < hists[h].buckets.size(); ++i)
      hists[h].buckets[i] += o.hists[h].buckets[i];
    hists[h].count += o.hists[h].count;
    hists[h].sum_ns += o.hists[h].sum_ns;
  }
  if (admission == Admission::kAdmitting) admission = o.admission;
}

void StatsPublisher::Observe(Hist h, double seconds) {
  const auto& bounds = HistogramBounds();
  size_t b = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  uint64_t* slot = hists_ + static_cast<size_t>(h) * metrics::kHistWords;
  __atomic_fetch_add(&slot[b], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&slot[kHistBounds + 1], 1, __ATOMIC_RELAXED);
  uint64_t ns = seconds > 0 ? static_cast<uint64_t>(seconds * 1e9) : 0;
  __atomic_fetch_add(&slot[kHistBounds + 2], ns, __ATOMIC_RELAXED);
}

StatsSnapshot StatsPublisher::Snapshot() const {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(counters_) - metrics::kCountersOffset;
  return metrics::ReadBlock(base);
}

std::unique_ptr<StatsPublisher> StatsPublisher::InMemory(const std::string& entry) {
  return std::make_unique<MemoryPublisher>(EntryShortId(entry));
}

std::unique_ptr<StatsPublisher> StatsPublisher::Create(Env* env, const CacheOptions& cache,
                                                       const std::string& entry,
                                                       std::string* warning) {
  if (env == nullptr) env = Env::Default();
  std::vector<std::string> fold_warnings;
  // Opportunistic, as in ~FilePublisher.
  metrics::FoldEnded(env, cache, false, &fold_warnings).IgnoreError();
  auto p = FilePublisher::Make(env, cache, entry);
  if (p.ok()) return std::move(*p);
  if (warning != nullptr)
    *warning = "no stats file for metrics (" + p.status().message() + "); counting in memory";
  return InMemory(entry);
}

namespace metrics {

std::string HexId(const std::string& raw) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string RawId(const std::string& hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    raw += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
  return raw;
}

void InitBlock(uint8_t* b, const std::string& id_raw16, const std::string& entry,
               int64_t start_us) {
  std::memset(b, 0, kBlockBytes);
  std::memcpy(b, kMagic, 8);
  uint32_t words[2] = {kVersion, kBlockBytes};
  std::memcpy(b + 8, words, 8);
  std::memcpy(b + 16, id_raw16.data(), std::min<size_t>(16, id_raw16.size()));
  std::memcpy(b + 32, &start_us, 8);
  std::memcpy(b + 40, entry.data(), std::min<size_t>(16, entry.size()));
  uint32_t shape[3] = {kCounterSlots, kHistSlots, static_cast<uint32_t>(kHistBounds)};
  std::memcpy(b + 64, shape, sizeof shape);
}

Status ValidateBlock(const uint8_t* b, size_t size, BlockHeader* h) {
  if (size < 8 || std::memcmp(b, kMagic, 8) != 0) return Status::Corruption("not a stats file");
  if (size < 16)
    return Status::Corruption("truncated stats file: " + std::to_string(size) + " bytes");
  uint32_t version = LoadAt<uint32_t>(b, 8), bytes = LoadAt<uint32_t>(b, 12);
  if (version != kVersion)
    return Status::NotSupported("stats file version " + std::to_string(version) +
                                " (this ssdfeed reads version " + std::to_string(kVersion) + ")");
  if (bytes != kBlockBytes || size < bytes)
    return Status::Corruption("truncated stats file: " + std::to_string(size) + " of " +
                              std::to_string(kBlockBytes) + " bytes");
  if (LoadAt<uint32_t>(b, 64) != kCounterSlots || LoadAt<uint32_t>(b, 68) != kHistSlots ||
      LoadAt<uint32_t>(b, 72) != kHistBounds)
    return Status::NotSupported("stats file with another slot layout");
  if (h != nullptr) {
    h->id = HexId(std::string(reinterpret_cast<const char*>(b + 16), 16));
    h->start_us = LoadAt<int64_t>(b, 32);
    const char* e = reinterpret_cast<const char*>(b + 40);
    h->entry.assign(e, strnlen(e, 16));
  }
  return Status::OK();
}

Status CheckEnded(const uint8_t* b, size_t got, uint64_t file_size, uint32_t* n) {
  SSDFEED_RETURN_IF_ERROR(ValidateBlock(b, got, nullptr));
  if (got < kBlockBytes + 4) return Status::Corruption("truncated list of folded ids");
  *n = LoadAt<uint32_t>(b, kBlockBytes);
  if (*n > kMaxFoldedIds)
    return Status::Corruption(std::to_string(*n) + " folded ids (at most " +
                              std::to_string(kMaxFoldedIds) + ")");
  uint64_t want = uint64_t{kBlockBytes} + 4 + uint64_t{*n} * 16;
  if (file_size != want)
    return Status::Corruption(std::to_string(file_size) + " bytes, expected " +
                              std::to_string(want) + " for " + std::to_string(*n) + " folded ids");
  return Status::OK();
}

StatsSnapshot ReadBlock(const uint8_t* b) {
  StatsSnapshot s;
  for (size_t i = 0; i < s.counters.size(); ++i)
    s.counters[i] = AtomicLoad(b, kCountersOffset + i * 8);
  for (size_t i = 0; i < s.times.size(); ++i) s.times[i] = AtomicLoad(b, kTimesOffset + i * 8);
  for (size_t h = 0; h < s.hists.size(); ++h) {
    size_t off = kHistsOffset + h * kHistWords * 8;
    for (size_t i = 0; i <= kHistBounds; ++i) s.hists[h].buckets[i] = AtomicLoad(b, off + i * 8);
    s.hists[h].count = AtomicLoad(b, off + (kHistBounds + 1) * 8);
    s.hists[h].sum_ns = AtomicLoad(b, off + (kHistBounds + 2) * 8);
  }
  uint64_t a = AtomicLoad(b, kAdmissionOffset);
  s.admission = a <= 4 ? static_cast<Admission>(a) : Admission::kIOError;
  return s;
}

void WriteBlock(const StatsSnapshot& s, uint8_t* b) {
  for (size_t i = 0; i < s.counters.size(); ++i)
    std::memcpy(b + kCountersOffset + i * 8, &s.counters[i], 8);
  for (size_t i = 0; i < s.times.size(); ++i) std::memcpy(b + kTimesOffset + i * 8, &s.times[i], 8);
  for (size_t h = 0; h < s.hists.size(); ++h) {
    size_t off = kHistsOffset + h * kHistWords * 8;
    std::memcpy(b + off, s.hists[h].buckets.data(), (kHistBounds + 1) * 8);
    std::memcpy(b + off + (kHistBounds + 1) * 8, &s.hists[h].count, 8);
    std::memcpy(b + off + (kHistBounds + 2) * 8, &s.hists[h].sum_ns, 8);
  }
}

}  // namespace metrics

}  // namespace ssdfeed
