#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"

namespace ssdfeed {

std::vector<std::pair<std::string, double>> LoaderStatsFields(const LoaderStats& s) {
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  return {
      {"cache_hits", d(s.cache_hits)},
      {"cache_misses", d(s.cache_misses)},
      {"cache_bytes", d(s.cache_bytes)},
      {"cache_miss_bytes", d(s.cache_miss_bytes)},
      {"origin_bytes", d(s.origin_bytes)},
      {"prepared", d(s.prepared)},
      {"samples", d(s.samples)},
      {"batches", d(s.batches)},
      {"decode_errors", d(s.decode_errors)},
      {"corrupt_records", d(s.corrupt_records)},
      {"corrupt_repaired", d(s.corrupt_repaired)},
      {"skipped", d(s.skipped)},
      {"claim_waits", d(s.claim_waits)},
      {"cache_puts", d(s.cache_puts)},
      {"cache_put_bytes", d(s.cache_put_bytes)},
      {"cache_write_errors", d(s.cache_write_errors)},
      {"cache_capacity_denied", d(s.cache_capacity_denied)},
      {"evictions", d(s.evictions)},
      {"cache_direct_reads", d(s.cache_direct_reads)},
      {"cache_direct_writes", d(s.cache_direct_writes)},
      {"wait_seconds", s.wait_seconds},
  };
}

}  // namespace ssdfeed
