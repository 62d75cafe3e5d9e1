// The Loader: source -> prepare -> cache -> augment -> batches. The first
// epoch fills the cache; later epochs (and later jobs) read from it. Every
// epoch gets a fresh permutation and fresh augmentation, keyed by
// (seed, epoch, sample id), so output never depends on worker count/timing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssdfeed/augment.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/counters.h"
#include "ssdfeed/image.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

// How the samples are split over ranks from one epoch to the next.
enum class ShardMode {
  // A fresh global permutation every epoch, dealt over ranks (torch's
  // DistributedSampler): every rank eventually reads every sample.
  kGlobal,
  // Each rank keeps the same 1/world_size of the samples every epoch
  // (a fixed partition from the seed), shuffled within it per epoch: a node
  // caches only what its ranks read.
  kSticky,
  // Sticky shards that move to the next rank every rotate_every epochs:
  // rank r reads shard (r + epoch / rotate_every) % world_size.
  kRotate,
};

struct LoaderOptions {
  // Source URI. Required, unless source_object is set: then only its name.
  std::string source;
  // A source built by the caller (a Python dataset's items, a test's own):
  // when set, the loader reads it instead of opening `source`, and shares
  // it. A source whose fields() list no image serves batches of its fields
  // only (no augment). Default null.
  std::shared_ptr<const Source> source_object;
  SourceOptions source_options;
  // The cached preparation. Default: DefaultPrepareSpec() (full size, RGB),
  // the same default as `ssdfeed warm` and the Python Prepare().
  PrepareSpec prepare;
  // Cache root; empty: no cache (prepare from the origin every epoch).
  // Callers that want the shared default pass DefaultCacheRoot().
  CacheOptions cache;
  AugmentSpec augment;
  OutputSpec output;
  size_t batch_size = 1;         // Default 1.
  bool shuffle = false;          // Default false (canonical order).
  uint64_t seed = 0;             // Default 0.
  int workers = 0;               // Threads, >= 0; 0: DefaultWorkers(). Default 0.
  int prefetch = 2;              // Batches prepared ahead of the consumer, >= 1. Default 2.
  int rank = 0, world_size = 1;  // DistributedSampler semantics. Default 0 / 1.
  // DataLoader's drop_last: drop the epoch's last batch when it is short.
  // Default false.
  bool drop_last = false;
  // DistributedSampler's drop_last: drop the tail that does not split
  // evenly over ranks (else pad by repeating from the start). Default false.
  bool sampler_drop_last = false;
  ShardMode shard = ShardMode::kGlobal;  // Default kGlobal (DistributedSampler).
  int rotate_every = 1;                  // kRotate: epochs per shard move, >= 1. Default 1.
  // Serve only source ids [id_begin, id_end) (a read task of a distributed
  // engine takes one range). id_end 0: to the end of the source. Default all.
  uint64_t id_begin = 0, id_end = 0;
  // Keras' validation_split: > 0 serves one part of a seeded random split
  // of those ids: the validation part (validation_subset) holds
  // floor(validation_split * n) of them, the training part the rest. The
  // parts depend on split_seed only, so two loaders with the same seed
  // never overlap. Default 0 (no split).
  double validation_split = 0;
  bool validation_subset = false;
  uint64_t split_seed = 0;
  // With source_options.on_error = kSkip, a bad sample is replaced in place
  // by the next good sample after it in this rank's plan of the epoch
  // (cyclically), so every rank serves exactly num_batches() full batches
  // whatever is bad (DDP ranks stay in step); which samples form a batch
  // depends only on which are bad, never on workers or timing.

  // Publish counters and stage-time histograms in a stats file under the
  // cache root (read by `ssdfeed serve-metrics`). false: counters stay in
  // memory (stats() still works) and stages are not timed. Default true.
  bool metrics = true;
  // > 0: also serve this process's metrics over HTTP on
  // metrics_host:metrics_port (for users without the node exporter).
  // Default 0 (off), host 127.0.0.1.
  int metrics_port = 0;
  std::string metrics_host = "127.0.0.1";
};

// One field of a batch other than the images and labels (docs/python.md,
// "Sample fields"). Stacked when every sample's field has one shape and
// dtype: shape (N, ...) and data hold them all. boxes (N,B,4) and classes
// (N,B) are always stacked, padded to the batch's most boxes B (boxes 0,
// classes -1), with a "num_boxes" field (N,) beside them. Else (arrays of
// unequal shapes, bytes) one Field per sample in items.
struct BatchField {
  std::string name;
  FieldKind kind = FieldKind::kBytes;
  std::string dtype;  // numpy's dtype.str
  bool stacked = true;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;
  std::vector<Field> items;
};

// Storage of one batch. Reused through a pool once nobody holds it.
struct BatchBuffer {
  std::vector<uint8_t> images;  // dtype-sized elements
  std::vector<int64_t> labels;
  std::vector<BatchField> fields;  // empty for a source of images and labels only
};

struct Batch {
  std::shared_ptr<BatchBuffer> buffer;  // keeps the memory alive
  size_t size = 0;                      // samples in this batch
  std::array<size_t, 4> shape{};        // N,H,W,C or N,C,H,W
  DType dtype = DType::kUint8;
  const void* images() const { return buffer->images.data(); }
  const int64_t* labels() const { return buffer->labels.data(); }
};

struct LoaderStats {
  // One field per row of SSDFEED_COUNTERS (ssdfeed/counters.h), named by
  // its stats key: cache_hits, cache_misses, cache_bytes, ...
#define SSDFEED_LOADER_STATS_FIELD(slot, key, name, help, owner) uint64_t key = 0;
  SSDFEED_COUNTERS(SSDFEED_LOADER_STATS_FIELD)
#undef SSDFEED_LOADER_STATS_FIELD
  // 1 when the cache entry could not be opened (I/O error, no space, no file
  // descriptors): the loader then serves everything from the origin.
  uint64_t cache_open_errors = 0;
  double wait_seconds = 0;                    // consumer time spent waiting for batches
  std::vector<double> wait_histogram_bounds;  // seconds (upper bounds)
  std::vector<uint64_t> wait_histogram;       // one more than bounds (+Inf)
  std::string cache_dir, cache_warning;
  bool cache_admitting = false;
  std::string stats_file;  // this process's stats file under the root; empty: in memory

  // Where the time went (the timer table of ssdfeed/counters.h), seconds:
  // each stage summed over the workers (and the consumer's collate and
  // handoff), the workers' busy time, the steps' time, the slowest rank's
  // wait. Zeros with metrics off (stages are not timed then).
  std::array<double, kNumTimers> times{};
  // The same per worker (index = worker), its stages adding up to its busy
  // time (kWorkerBusy) but for bookkeeping between samples.
  std::vector<std::array<double, kNumTimers>> worker_times;
  // The consumer's wait for each of the last kStepWaitWindow batches
  // (steps): the last one's, and the median and 99th percentile of the
  // window (nearest rank), seconds; step_wait_steps: how many it holds.
  static constexpr size_t kStepWaitWindow = 1000;
  double step_wait_last = 0, step_wait_p50 = 0, step_wait_p99 = 0;
  uint64_t step_wait_steps = 0;

  uint64_t operator[](Ctr c) const;
  double operator[](Tmr t) const { return times[static_cast<size_t>(t)]; }
  void SetCounters(const CounterArray& c);  // every counter field from a snapshot
};

// LoaderStats' field of each Ctr slot.
inline constexpr uint64_t LoaderStats::*kLoaderStatsCounterOf[] = {
#define SSDFEED_LOADER_STATS_MEMBER(slot, key, name, help, owner) &LoaderStats::key,
    SSDFEED_COUNTERS(SSDFEED_LOADER_STATS_MEMBER)
#undef SSDFEED_LOADER_STATS_MEMBER
};
static_assert(std::size(kLoaderStatsCounterOf) == kNumCounters);

inline uint64_t LoaderStats::operator[](Ctr c) const {
  return this->*kLoaderStatsCounterOf[static_cast<size_t>(c)];
}
inline void LoaderStats::SetCounters(const CounterArray& c) {
  for (size_t i = 0; i < kNumCounters; ++i) this->*kLoaderStatsCounterOf[i] = c[i];
}

// The numeric fields of LoaderStats by name (the counters' stats keys,
// wait_seconds, step_wait_{last,p50,p99}_seconds, step_wait_steps, then
// "<key>_seconds" of each timer): the one list that Loader.stats() in Python and `ssdfeed
// bench loader --json` print, so both say the same thing. docs/metrics.md
// maps each name to its Prometheus metric.
std::vector<std::pair<std::string, double>> LoaderStatsFields(const LoaderStats& s);

// Plan positions consumed in an interrupted epoch by each rank of the worlds
// that ran it: layers[0][r] by rank r of the world that started the epoch,
// layers[1][r] by rank r of the world that resumed it from merged states
// (reading the rest ResumedEpochOrder dealt it), and so on.
using ResumeLayers = std::vector<std::vector<uint64_t>>;

struct LoaderState {
  uint64_t epoch = 0;
  uint64_t batches_consumed = 0;  // within epoch
  // Plan positions consumed within the epoch (more than batches_consumed *
  // batch_size when samples were skipped). 0: batches_consumed * batch_size.
  uint64_t position = 0;
  uint64_t seed = 0;
  int rank = 0, world_size = 1;
  uint64_t num_samples = 0;
  size_t batch_size = 1;
  ShardMode shard = ShardMode::kGlobal;  // states saved before shard modes: global
  int rotate_every = 1;
  // The epoch was resumed from merged states (elastic resume): what the
  // earlier worlds consumed of it. Empty otherwise.
  ResumeLayers resumed_from;
  // Made by MergeStates: no rank's position of its own; it loads into a
  // loader of any rank and world_size, which reads the rest of the epoch.
  bool merged = false;
};

// Merges the states of all ranks of one world (saved at batch boundaries,
// not necessarily the same batch) into one that loads into a loader of any
// world size: the rest of the interrupted epoch is dealt over the new ranks
// (ResumedEpochOrder), so no sample is read twice or missed. A rank that
// finished the epoch may have a state at the next epoch's start.
Result<LoaderState> MergeStates(const std::vector<LoaderState>& states);

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Open(const LoaderOptions& opts);
  virtual ~Loader() = default;

  // Chooses the epoch of the next pass, from its first batch.
  virtual void SetEpoch(uint64_t epoch) = 0;
  // Next batch of the current epoch; false at its end. The next call then
  // starts the following epoch (a fresh permutation and augmentation)
  // unless SetEpoch or LoadState is called first: passes without SetEpoch
  // go through epochs 0, 1, 2, ... A sample that failed under
  // on_error=raise comes back as an error naming it; calling Next again
  // retries from the start of that batch.
  virtual Result<bool> Next(Batch* out) = 0;
  // Stops the workers mid-epoch (also done by the destructor); the next
  // Next continues after the last batch returned.
  virtual void Stop() = 0;

  virtual size_t num_batches() const = 0;  // per epoch, for this rank
  virtual size_t num_samples() const = 0;  // per epoch, for this rank
  virtual size_t source_size() const = 0;
  virtual LoaderStats stats() const = 0;
  virtual LoaderState state() const = 0;
  virtual Status LoadState(const LoaderState& s) = 0;
  // The slowest rank's data wait over steps this process has not recorded
  // yet (a torch.distributed all-gather of every rank's waits, done by the
  // caller: ssdfeed.torch.Loader's rank_wait_every): added to the stats
  // file's ssdfeed_rank_max_wait_seconds_total. Only one rank of a job
  // records it, so summing over nodes counts each step once.
  virtual void RecordRankMaxWait(double seconds) { (void)seconds; }
  // The source's fields (Source::fields()): what each batch holds.
  virtual std::vector<FieldSpec> fields() const {
    return {{"image", FieldKind::kImage, ""}, {"label", FieldKind::kLabel, ""}};
  }
};

// A schema of just an image and a class label: batches are served as
// (images, labels); any other schema as a dict of fields.
bool IsClassicSchema(const std::vector<FieldSpec>& fields);

// The ids rank `rank` reads in epoch `epoch` (padded or truncated as
// DistributedSampler does).
std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last);
// The same under a shard mode; with kGlobal identical to the above.
std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last, ShardMode shard,
                                 int rotate_every = 1);
// The ids rank `rank` of a world of world_size reads in the rest of an epoch
// whose earlier worlds consumed what `layers` records: the unconsumed ids in
// the epoch's global order, dealt in equal counts (padding repeats at most
// world_size - 1 ids; drop_last drops the uneven tail instead). Under sticky
// and rotate a rank first takes the rest of its own shard for this epoch.
// With no layers, EpochOrder.
std::vector<uint64_t> ResumedEpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch,
                                        int rank, int world_size, bool drop_last, ShardMode shard,
                                        int rotate_every, const ResumeLayers& layers);

// The ids of one part of a seeded random split of [begin, end) (see
// LoaderOptions::validation_split), ascending.
std::vector<uint64_t> SplitIds(uint64_t begin, uint64_t end, double validation_split, uint64_t seed,
                               bool validation);

// What a node's cache root holds of one (source, preparation), for a
// scheduler that sends work where it is cached: half-open [begin, end) runs
// of ids present in the entry that `opts` (source, source_options, prepare,
// cache.root) reads. Empty when the root or the entry does not exist: asking
// never creates either, nor counts as a use.
Result<std::vector<std::pair<uint64_t, uint64_t>>> CachedIdRanges(const LoaderOptions& opts);

// The source of `opts` (source, source_options, cache.root) opened as the
// Loader opens it: its shard index (record boundaries, member offsets,
// labels) taken from the cache entry when one is stored there, so opening
// reads no shard of an entry a job has filled; else built from the origin.
// Creates nothing. Problems with a stored index (damaged, stale) go to
// *warning when it is not null; they are not errors.
Result<std::unique_ptr<Source>> OpenLoaderSource(const LoaderOptions& opts,
                                                 std::string* warning = nullptr);

}  // namespace ssdfeed
