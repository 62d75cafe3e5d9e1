// Builds Prometheus metric families (prometheus-cpp's data model) from stats
// snapshots, a cache root and its block device.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

#include "ssdfeed/metrics.h"

namespace ssdfeed::metrics {

using Families = std::vector<prometheus::MetricFamily>;

// Counters, histograms and the admission gauge of each (entry, snapshot).
void AddStatsFamilies(const std::vector<std::pair<std::string, StatsSnapshot>>& per_entry,
                      Families* out);
// Capacity, used and free bytes of the root; per-entry size and use; live
// processes per entry; the block device's counters.
Status AddRootFamilies(Env* env, const CacheOptions& cache, const RootStats& stats,
                       const std::vector<EntryInfo>& entries, Families* out);

// The /proc/diskstats row of the block device that holds path.
struct DiskStats {
  std::string device;  // e.g. "nvme0n1p1", "vda"
  uint64_t reads = 0, read_sectors = 0, read_ms = 0;
  uint64_t writes = 0, write_sectors = 0, write_ms = 0;
  uint64_t in_flight = 0, io_ms = 0, weighted_ms = 0;
};
// NotFound when path is on no block device (tmpfs, a network filesystem).
Result<DiskStats> DiskStatsFor(const std::string& path);

}  // namespace ssdfeed::metrics
