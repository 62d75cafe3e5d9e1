// Benchmarks that answer "is my storage / my loader fast enough for my GPU?":
// the storage bench (random and sequential reads at queue depths), then the
// loader bench (cold, warm and bounds, with model presets for the GPU side).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssdfeed/loader.h"
#include "ssdfeed/plan.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

struct StorageBenchOptions {
  uint64_t file_bytes = 256ull << 20;  // test file per path. Default 256 MiB.
  double seconds_per_row = 1.0;        // measuring time per pattern. Default 1 s.
  // Random read sizes (bytes) and queue depths. Defaults: 4 KiB, 128 KiB and
  // 112 KiB (a whole ~110 KB ImageNet JPEG, 4 KiB aligned) at QD 1, 8, 32.
  std::vector<uint32_t> block_sizes = {4096, 131072, 114688};
  std::vector<int> queue_depths = {1, 8, 32};
  bool force_threads = false;  // skip io_uring (the thread-pool fallback). Default false.
};

struct StorageRow {
  std::string pattern;  // "randread" or "seqread"
  uint32_t block = 0;
  int qd = 1;
  double iops = 0, mb_s = 0, p50_us = 0, p99_us = 0;
};

struct StorageResult {
  std::string path;
  std::string engine;  // "io_uring" or "threads"
  bool direct = true;  // O_DIRECT (false where the filesystem refuses it)
  std::vector<StorageRow> rows;
};

// Creates a test file under dir, measures, removes it.
Result<StorageResult> BenchStorage(const std::string& dir, const StorageBenchOptions& o);

// Accelerator compute time per batch, from MLPerf Storage's workload configs.
struct ModelPreset {
  const char* model;
  const char* gpu;
  size_t batch;
  double compute_seconds;  // per batch
  const char* source;      // where the numbers come from
};
// Null when there is no published preset for (model, gpu).
const ModelPreset* FindModelPreset(const std::string& model, const std::string& gpu);
const std::vector<ModelPreset>& ModelPresets();

struct LoaderBenchOptions {
  LoaderOptions loader;
  int epochs = 2;              // Default 2 (a cold and a warm one on a fresh cache).
  double compute_seconds = 0;  // Emulated accelerator time per batch; 0: none.
  // Drop the page cache (sync, then /proc/sys/vm/drop_caches; root only)
  // before every epoch after the first, so warm epochs read the device as
  // they do when the dataset is larger than memory; then one more warm
  // epoch without dropping gives the page-cache figure. Default false.
  bool drop_caches = false;
  // After the epochs, measure O_DIRECT random reads of the warm epochs'
  // record window (io_uring, QD 32) on the cache root's filesystem, and
  // report each epoch's images/s against its IOPS. Default false.
  bool vs_storage = false;
  // After the epochs, measure on one thread the two CPU bounds the epochs
  // are held to: decode + prepare (a cold epoch's work per sample) and the
  // augmentation from a prepared image (a warm epoch's), over the first
  // 200 samples of the source. Default false.
  bool bounds = false;
  // After the epochs, a compute-floor ("headspace") epoch: one batch of the
  // last epoch handed to the consumer again and again without reading, as
  // many times as that epoch had batches; the consumer copies it (a stand-in
  // for the host-to-device copy) and runs the emulated compute. What the
  // consumer could do with a free input pipeline. Default false.
  bool headspace = false;
};

// What `iostat -x` shows for a block device over an interval, from two
// reads of /proc/diskstats.
struct DeviceStats {
  std::string device;  // empty: the path is on no block device found there
  double read_mb_s = 0, write_mb_s = 0, reads_per_s = 0;
  double r_await_ms = 0;  // mean read latency, queueing included
  double aqu_sz = 0;      // mean requests in flight
  double util_pct = 0;    // time the device had requests in flight
};

// Samples /proc/diskstats for the device holding path; Stop() gives the
// interval's figures, Sample() those since the previous Sample() (or the
// start), as `iostat -x INTERVAL` prints them.
class DeviceSampler {
 public:
  explicit DeviceSampler(const std::string& path);
  DeviceStats Stop() const;
  DeviceStats Sample();

 private:
  std::string device_;
  std::vector<uint64_t> start_, last_;
  double t0_ = 0, t_last_ = 0;
};

// One point of an epoch's timeline: the figures of the interval that ends
// t_s seconds after the epoch started. Sampled between batches, at least
// 0.1 s apart, then thinned to at most kMaxTimelinePoints per epoch (longer
// intervals), so that a report of a long run stays small.
struct TimelinePoint {
  double t_s = 0;
  double images_per_s = 0;
  double utilization = 0;  // the emulated accelerator's busy share; 0 without compute
  DeviceStats device;      // the cache root's device over the interval
};
inline constexpr size_t kMaxTimelinePoints = 120;

// What an epoch's timeline is made from: its progress so far at time t.
struct TimelineSample {
  double t = 0;  // seconds, on any one clock
  uint64_t images = 0;
  double busy = 0;     // emulated compute seconds so far
  DeviceStats device;  // the device over the interval that ends here
};
// The intervals between samples (t_s from samples[0].t), k merged into one
// (device figures averaged by time) so that at most kMaxTimelinePoints
// remain; a last interval shorter than min_interval / 2 joins the one
// before, so an epoch that ended just after a sample does not end in a
// rate measured over a few ms.
std::vector<TimelinePoint> TimelineIntervals(const std::vector<TimelineSample>& samples,
                                             double min_interval);

// The consumer's wait per batch: counts[i] batches waited [edges_ms[i],
// edges_ms[i+1]) ms (the last bin includes its upper edge). Edges are
// geometric, four per decade, from the decade below the shortest wait
// (at least 1 us) to the decade above the longest.
struct WaitHistogram {
  std::vector<double> edges_ms;
  std::vector<uint64_t> counts;
};
WaitHistogram MakeWaitHistogram(const std::vector<double>& waits_ms);

// sync; echo 3 > /proc/sys/vm/drop_caches. Needs root with CAP_SYS_ADMIN
// and a writable /proc/sys (not so in most containers): the error says
// which is missing.
Status DropPageCache();
// Whether DropPageCache can work here (opens drop_caches for writing, drops
// nothing): the same error, before any work is done.
Status CanDropPageCache();

struct LoaderBenchEpoch {
  int epoch = 0;
  double seconds = 0, images_per_s = 0, mb_per_s = 0, hit_rate = 0;
  double p50_wait_ms = 0, p99_wait_ms = 0;
  double utilization = 0;       // compute / wall, with emulated compute; else 0
  bool dropped_caches = false;  // the page cache was dropped before it
  double record_bytes = 0;      // mean cache record read (header + pixels)
  // CPU seconds this process used in the epoch (user + system, all
  // threads): images / cpu_seconds is a per-core rate that other processes
  // on a shared machine do not skew.
  double cpu_seconds = 0;
  DeviceStats device;  // the cache root's device during the epoch
  // This epoch's Loader.stats() counters (deltas), under Loader.stats()'s names.
  std::vector<std::pair<std::string, double>> stats;
  uint64_t batches = 0, images = 0;
  std::vector<TimelinePoint> timeline;
  WaitHistogram waits;
};

struct LoaderBenchResult {
  std::vector<LoaderBenchEpoch> epochs;
  // Images/s of one more warm epoch with no emulated compute: what the
  // loader can deliver. With compute: accelerators it keeps >= 90% busy.
  double capacity_images_per_s = 0;
  int accelerators_at_90 = 0;
  // vs_storage: the random-read row measured (block = the record's aligned
  // window, QD 32); 0 iops when not measured.
  StorageRow storage;
  std::string storage_engine;
  // bounds: images/s on one core (0 when not measured), and the cores the
  // epochs' ratios divide by (min(workers, hardware threads)).
  // augment_opencv_per_core: the same crops through cv::resize and cv::flip
  // alone, the reference the render is compared with.
  double decode_prepare_per_core = 0, augment_per_core = 0, augment_opencv_per_core = 0;
  int cores = 0;
  // headspace: the compute-floor epoch (batches = 0 when not run), and its
  // images/s over the last loader epoch's (the gap a faster input pipeline
  // could close; 1 means the loader already keeps up).
  LoaderBenchEpoch headspace;
  double headspace_gap = 0;
};

Result<LoaderBenchResult> BenchLoader(const LoaderBenchOptions& o);

// The whole disk holding a path: "MAJ:MIN" (of the disk, not of a partition)
// and its name (vda, nvme0n1).
struct BlockDevice {
  std::string dev, name;
};
Result<BlockDevice> BlockDeviceOf(const std::string& path);

// Whether ReadThrottle can work here for path's disk: root, a cgroup-v1
// blkio controller at /sys/fs/cgroup/blkio, a block device under path. The
// error says which is missing.
Status CanThrottleReads(const std::string& path);

// Creates the cache root of `opts` as a Loader would (mode, group, the
// node's files) before anything is measured under it: the throttle and the
// page cache drops need the root's device. opts.env null: the default Env.
Status PrepareBenchRoot(const CacheOptions& opts);

// The cgroups ReadThrottle makes, under its own blkio cgroup `home`, are
// named ssdfeed-throttle-PID (PID: the bench's process), or
// ssdfeed-throttle-PID-N where that name was taken.
//
// The PID of a name exactly of that form, else 0 (a name that only starts
// like one: "ssdfeed-throttle-12x", "ssdfeed-throttle-", "...-007").
pid_t ThrottleCgroupPid(const std::string& name);
// Removes the cgroups in home that a killed bench left (PID no longer
// running), so they do not pile up; nothing whose name is not exactly one
// of ReadThrottle's is touched.
void RemoveStaleThrottles(const std::string& home);
// A new cgroup directory in home, made by this call (mkdir succeeded): one
// that already exists is never used, whoever made it.
Result<std::string> MakeThrottleCgroup(const std::string& home);

// While it lives, this process's reads from path's disk are limited to
// bytes_per_s (cgroup-v1 blkio.throttle.read_bps_device, in a child cgroup
// of the process's own that it joins). Destroying it moves the process back
// and removes the cgroup.
class ReadThrottle {
 public:
  static Result<std::unique_ptr<ReadThrottle>> Start(const std::string& path, uint64_t bytes_per_s);
  ~ReadThrottle();
  const BlockDevice& device() const { return dev_; }
  const std::string& cgroup() const { return dir_; }
  uint64_t bytes_per_s() const { return bps_; }

 private:
  ReadThrottle(std::string home, std::string dir, BlockDevice dev, uint64_t bps)
      : home_(std::move(home)), dir_(std::move(dir)), dev_(std::move(dev)), bps_(bps) {}
  std::string home_, dir_;
  BlockDevice dev_;
  uint64_t bps_;
  bool joined_ = false;
};

// `bench loader --codec raw,zstd,jpeg`: each codec's entry filled fresh
// (cold), then warm epochs in rounds, the codecs interleaved in each round
// so that drift on a shared machine hits them alike: from the page cache,
// with the page cache dropped (O_DIRECT reads), and on the disk throttled to
// throttle_read_bps. Next to each, `ssdfeed plan`'s prediction.
struct CodecBenchOptions {
  LoaderOptions loader;  // its prepare's codec and quality are set per codec
  std::vector<std::pair<RecordCodec, int>> codecs;
  int rounds = 3;
  // Warm epochs with the page cache dropped, when possible (else skipped
  // with the reason).
  bool dropped = true;
  uint64_t throttle_read_bps = 0;  // 0: no throttled epochs
  double plan_device_seconds = 1;  // plan's device measurement per codec
  int plan_probes = 24;
};

struct CodecBenchRow {
  RecordCodec codec = RecordCodec::kRaw;
  int quality = 90;
  uint64_t entry_bytes = 0, samples = 0;
  double footprint_x_raw = 0;
  double cold_images_per_s = 0;
  // Per round, then the medians.
  std::vector<double> page_cache, dropped, throttled;
  double page_cache_median = 0, dropped_median = 0, throttled_median = 0;
  // The page-cache epochs' images per CPU-second this process used: the
  // per-core rate other processes on a shared machine do not lower, next
  // to plan's per-core bound.
  std::vector<double> page_cache_per_cpu_s;
  double page_cache_per_cpu_s_median = 0;
  // plan's rows, measured in this run: the device as it is, and throttled.
  CodecPlan plan, plan_throttled;
  // The medians above over raw's, in this run (0 where raw's is not
  // measured or raw is not among the codecs).
  struct RatioToRaw {
    double footprint = 0, page_cache = 0, page_cache_per_cpu_s = 0, dropped = 0, throttled = 0;
  } x_raw;
};

struct CodecBenchResult {
  std::vector<CodecBenchRow> rows;
  int cores = 1;
  // Why the dropped / throttled epochs were not run (empty: they were).
  std::string dropped_skipped, throttle_skipped;
  BlockDevice throttle_device;
  // plan's recommendation for the device as it is and for the throttled one.
  int recommended = -1, recommended_throttled = -1;
};

Result<CodecBenchResult> BenchCodecs(const CodecBenchOptions& o);

// The cost of metrics on the warm path: one loader publishing a stats file
// and timing every stage, one with metrics off, over the same warm cache
// entry, alternating warm epochs so drift hits both alike.
struct MetricsCostResult {
  std::vector<double> with_metrics, without_metrics;  // images/s per warm epoch
  double median_with = 0, median_without = 0;
  // The process's CPU microseconds per image of each warm epoch: the work
  // metrics add, much less swayed than images/s by other jobs on the node.
  std::vector<double> cpu_us_with, cpu_us_without;
  double median_cpu_us_with = 0, median_cpu_us_without = 0;
};
Result<MetricsCostResult> BenchMetricsCost(const LoaderOptions& o, int rounds);

}  // namespace ssdfeed
