// Benchmarks that answer "is my storage / my loader fast enough for my GPU?"
#pragma once

#include <string>
#include <vector>

#include "ssdfeed/loader.h"
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

}  // namespace ssdfeed

namespace ssdfeed {

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
};

struct LoaderBenchEpoch {
  int epoch = 0;
  double seconds = 0, images_per_s = 0, mb_per_s = 0, hit_rate = 0;
  double p50_wait_ms = 0, p99_wait_ms = 0;
  double utilization = 0;  // compute / wall, with emulated compute; else 0
  // This epoch's Loader.stats() counters (deltas), under Loader.stats()'s names.
  std::vector<std::pair<std::string, double>> stats;
};

struct LoaderBenchResult {
  std::vector<LoaderBenchEpoch> epochs;
  // Images/s of one more warm epoch with no emulated compute: what the
  // loader can deliver. With compute: accelerators it keeps >= 90% busy.
  double capacity_images_per_s = 0;
  int accelerators_at_90 = 0;
};

Result<LoaderBenchResult> BenchLoader(const LoaderBenchOptions& o);

// The cost of metrics on the warm path: one loader publishing a stats file
// and timing every stage, one with metrics off, over the same warm cache
// entry, alternating warm epochs so drift hits both alike.
struct MetricsCostResult {
  std::vector<double> with_metrics, without_metrics;  // images/s per warm epoch
  double median_with = 0, median_without = 0;
};
Result<MetricsCostResult> BenchMetricsCost(const LoaderOptions& o, int rounds);

}  // namespace ssdfeed
