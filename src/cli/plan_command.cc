// ssdfeed plan --source URI [prepare options]: how big the cache entry will
// be and how long warming it takes on this machine, before filling anything.
// Prepares a sample spread over the dataset (ids i*N/n, so every class and
// shard is represented) and extrapolates with the on-disk format's overhead
// (docs/cache-format.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/warm.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

// The mission's sizing rule: room for the entry plus a margin for growth,
// repairs and a second spec while the old one is still used.
constexpr double kSizeLow = 1.2, kSizeHigh = 1.5;

struct PlanArgs {
  std::string source;
  PrepareArgs prep;
  FieldArgs fields;
  int samples = 300;
  int workers = 0;
  bool json = false;
};

struct Probe {
  EntryEstimate e;
  double seconds = 0;  // one thread reading, decoding and preparing them
};

Probe Measure(const Source& src, const PrepareSpec& spec, int want) {
  auto t0 = std::chrono::steady_clock::now();
  Probe p{EstimateEntry(src, spec, want)};
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

std::string Duration(double s) {
  char b[32];
  if (s < 120)
    std::snprintf(b, sizeof b, "%.0f s", s);
  else if (s < 7200)
    std::snprintf(b, sizeof b, "%.0f min", s / 60);
  else
    std::snprintf(b, sizeof b, "%.1f h", s / 3600);
  return b;
}

int RunPlan(const PlanArgs& a) {
  PrepareSpec spec;
  if (Status s = a.prep.ToSpec(&spec); !s.ok()) return Fail(s.message(), kExitUsage);
  SourceOptions so;
  if (Status s = a.fields.ToFields(&so.fields); !s.ok()) return Fail(s.message(), kExitUsage);
  auto src = OpenSource(a.source, so);
  if (!src.ok()) return Fail(src.status().message());
  Probe p = Measure(**src, spec, a.samples);
  const EntryEstimate& e = p.e;
  uint64_t failed = e.tried - e.probed;
  if (e.probed == 0)
    return Fail(a.source + ": none of the " + std::to_string(failed) +
                " sampled items could be read and prepared");
  double per_sample = static_cast<double>(e.pixel_bytes + e.field_bytes) / e.probed;
  uint64_t entry = e.entry_bytes();
  int workers = a.workers > 0 ? a.workers : DefaultWorkers();
  double warm_s = p.seconds / e.tried * e.samples / workers;
  uint64_t lo = static_cast<uint64_t>(entry * kSizeLow),
           hi = static_cast<uint64_t>(entry * kSizeHigh);
  if (a.json) {
    std::cout << nlohmann::json{{"source", a.source},
                                {"spec", spec.Canonical()},
                                {"samples_total", e.samples},
                                {"samples_probed", e.probed},
                                {"samples_failed", failed},
                                {"bytes_per_sample", std::llround(per_sample)},
                                {"origin_bytes_per_sample", e.origin_bytes / e.probed},
                                {"entry_bytes", entry},
                                {"capacity_min_bytes", lo},
                                {"capacity_max_bytes", hi},
                                {"workers", workers},
                                {"warm_seconds", std::round(warm_s * 10) / 10}}
                     .dump()
              << "\n";
    return 0;
  }
  std::printf("source      %s (%llu samples)\n", a.source.c_str(),
              static_cast<unsigned long long>(e.samples));
  std::printf("spec        %s\n", DescribeSpec(spec.Canonical()).c_str());
  std::printf("sampled     %llu prepared (%llu failed), %s per sample (%s encoded)\n",
              static_cast<unsigned long long>(e.probed), static_cast<unsigned long long>(failed),
              FormatBytes(static_cast<uint64_t>(per_sample)).c_str(),
              FormatBytes(e.origin_bytes / e.probed).c_str());
  std::printf("entry       ~%s (pixels + %llu bytes of record, index and claim per sample)\n",
              FormatBytes(entry).c_str(), static_cast<unsigned long long>(kEntryBytesPerSample));
  std::printf("cache size  %s to %s (1.2-1.5x the entry; --capacity, or the volume's size)\n",
              FormatBytes(lo).c_str(), FormatBytes(hi).c_str());
  std::printf("warm-up     ~%s on this machine with %d workers (ssdfeed warm)\n",
              Duration(warm_s).c_str(), workers);
  return 0;
}

}  // namespace

void AddPlan(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand(
      "plan", "Estimate a cache entry's size and warm-up time from a sample of the dataset");
  auto a = std::make_shared<PlanArgs>();
  c->add_option("--source", a->source, "Source URI (as for warm)")->required();
  a->prep.Add(c);
  a->fields.Add(c);
  c->add_option("--samples", a->samples,
                "Samples to prepare, spread over the dataset (default 300)")
      ->check(AtLeast(1));
  c->add_option("--workers", a->workers,
                "Threads warm would use, for the time estimate (default 0: one per core)")
      ->check(AtLeast(0, " (0: one per core)"));
  c->add_flag("--json", a->json, "Print a JSON report");
  c->callback([st, a] { st->rc = RunPlan(*a); });
}

}  // namespace ssdfeed::cli
