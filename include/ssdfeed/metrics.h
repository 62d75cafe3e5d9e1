// Metrics: every process that uses a cache root publishes its counters and
// histograms in a small shared-memory stats file under ROOT/stats, and
// `ssdfeed serve-metrics` (or a Loader's own metrics_port) exports them to
// Prometheus. The metric names are documented in docs/metrics.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/counters.h"
#include "ssdfeed/env.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// Histograms (seconds). Same slot rules as Ctr.
enum class Hist : uint32_t {
  kReadCache,   // one cache read (Get), hit or not
  kReadOrigin,  // one origin read of a sample's encoded bytes
  kPrepare,     // decode + prepare of one sample
  kBatchWait,   // the consumer's wait for one batch in Next()
  kCount
};

// Admission (why an entry stopped admitting) is CacheEntry's: ssdfeed/cache.h.
const char* AdmissionReason(Admission a);  // "capacity", "disk_full", ...

// Upper bounds (seconds) shared by every histogram; buckets = bounds + 1 (+Inf).
const std::vector<double>& HistogramBounds();
constexpr size_t kHistBounds = 19;

struct HistSnapshot {
  std::array<uint64_t, kHistBounds + 1> buckets{};  // per bucket, not cumulative
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  double sum_seconds() const { return static_cast<double>(sum_ns) * 1e-9; }
};

// A copy of one process's (or a sum of several) counters and histograms.
struct StatsSnapshot {
  CounterArray counters{};
  TimerArray times{};  // nanoseconds, Tmr slots
  std::array<HistSnapshot, static_cast<size_t>(Hist::kCount)> hists{};
  Admission admission = Admission::kAdmitting;
  uint64_t operator[](Ctr c) const { return counters[static_cast<size_t>(c)]; }
  uint64_t operator[](Tmr t) const { return times[static_cast<size_t>(t)]; }
  const HistSnapshot& hist(Hist h) const { return hists[static_cast<size_t>(h)]; }
  void Add(const StatsSnapshot& o);  // admission: the first non-admitting wins
};

// One process's live counters. Updates are relaxed atomic adds on a mapping
// (no syscall); when the block is file-backed, the exporter sees them.
class StatsPublisher {
 public:
  // A block in ROOT/stats/ for `entry` (its short id), created 0600 (0660
  // when group_shared). Folds the totals of ended processes first. When the
  // file cannot be made (full disk, read-only root), returns an in-memory
  // block and puts the reason in *warning: training never stops for metrics.
  static std::unique_ptr<StatsPublisher> Create(Env* env, const CacheOptions& cache,
                                                const std::string& entry, std::string* warning);
  // A block only this process sees (no cache, or metrics disabled).
  static std::unique_ptr<StatsPublisher> InMemory(const std::string& entry = "");
  virtual ~StatsPublisher() = default;

  void Add(Ctr c, uint64_t n = 1) {
    __atomic_fetch_add(&counters_[static_cast<size_t>(c)], n, __ATOMIC_RELAXED);
  }
  // Stores a per-process total kept elsewhere (the cache's own counters).
  void Set(Ctr c, uint64_t v) {
    __atomic_store_n(&counters_[static_cast<size_t>(c)], v, __ATOMIC_RELAXED);
  }
  void Observe(Hist h, double seconds);
  // Raises a time total kept elsewhere (the loader's stage clocks) to ns:
  // two publishers racing (the consumer, a stats() call) never move it
  // back, which Prometheus would read as a counter reset.
  void RaiseTime(Tmr t, uint64_t ns) {
    uint64_t* slot = &times_[static_cast<size_t>(t)];
    uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (cur < ns &&
           !__atomic_compare_exchange_n(slot, &cur, ns, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  }
  void AddTime(Tmr t, uint64_t ns) {
    __atomic_fetch_add(&times_[static_cast<size_t>(t)], ns, __ATOMIC_RELAXED);
  }
  void SetAdmission(Admission a) {
    __atomic_store_n(admission_, static_cast<uint64_t>(a), __ATOMIC_RELAXED);
  }
  StatsSnapshot Snapshot() const;
  const std::string& entry() const { return entry_; }
  const std::string& path() const { return path_; }  // empty when in memory

 protected:
  StatsPublisher() = default;
  uint64_t* counters_ = nullptr;  // Ctr slots
  uint64_t* hists_ = nullptr;     // Hist slots, each kHistBounds + 3 words
  uint64_t* times_ = nullptr;     // Tmr slots (ns)
  uint64_t* admission_ = nullptr;
  std::string entry_, path_;
};

// The entry label: the first 12 hex digits of the fingerprint (bounded
// cardinality, never a path).
std::string EntryShortId(const std::string& fingerprint);

// Totals of a cache root, as the exporter sees them.
struct RootStats {
  struct PerEntry {
    StatsSnapshot stats;
    int live_processes = 0;
  };
  std::vector<std::pair<std::string, PerEntry>> entries;  // by short id
  std::vector<std::string> warnings;                      // files skipped, and why
};
// Folds ended processes' files into the per-entry totals (under a lock, so
// two exporters or starting jobs never fold twice), then sums every file.
Result<RootStats> CollectRootStats(Env* env, const CacheOptions& cache);

// An HTTP endpoint serving /metrics in the Prometheus text format.
class MetricsServer {
 public:
  virtual ~MetricsServer() = default;
  // Every job on the root: sums of the stats files, the root's and entries'
  // sizes, and the counters of the block device holding the root.
  // listen: "HOST:PORT" (PORT 0 picks a free one). A port in use is an error.
  static Result<std::unique_ptr<MetricsServer>> ServeRoot(const CacheOptions& cache,
                                                          const std::string& listen);
  // One process's block (the Loader's metrics_port). Not owned; must outlive
  // the server.
  static Result<std::unique_ptr<MetricsServer>> ServeProcess(const StatsPublisher* stats,
                                                             const std::string& listen);
  virtual int port() const = 0;
};

// The Prometheus text of a root (what ServeRoot answers), for tests and CLIs.
Result<std::string> RenderRootMetrics(const CacheOptions& cache);

}  // namespace ssdfeed
