// ssdfeed bench storage PATH... | bench loader --source URI ...
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/report_html.h"
#include "cli/options.h"
#include "pipeline/entry_key.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/source.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

std::string BlockName(uint32_t b) {
  return b % 1024 == 0 ? std::to_string(b / 1024) + " KiB" : std::to_string(b) + " B";
}

// --report DIR: report.json and report.html of kind for result; prints
// where the page is (on stderr when stdout carries --json).
int Report(const std::string& dir, const std::string& kind, const nlohmann::json& result,
           const std::string& command_line, bool json) {
  if (dir.empty()) return 0;
  nlohmann::json doc = {
      {"kind", kind}, {"header", ReportHeader(Env::Default(), command_line)}, {"result", result}};
  std::string html;
  if (Status s = WriteReport(Env::Default(), dir, doc, &html); !s.ok()) return Fail(s.message());
  std::fprintf(json ? stderr : stdout, "report: %s (drawn from %s)\n", html.c_str(),
               JoinPath(dir, "report.json").c_str());
  return 0;
}

struct StorageArgs {
  std::vector<std::string> paths;
  std::string size, report;
  double seconds = 1.0;
  bool threads = false, json = false;
};

nlohmann::json StorageJson(const std::vector<StorageResult>& results) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.rows)
      rows.push_back({{"pattern", row.pattern},
                      {"block", row.block},
                      {"qd", row.qd},
                      {"iops", row.iops},
                      {"mb_s", row.mb_s},
                      {"p50_us", row.p50_us},
                      {"p99_us", row.p99_us}});
    j.push_back({{"path", r.path}, {"engine", r.engine}, {"direct", r.direct}, {"rows", rows}});
  }
  return j;
}

int RunStorage(const StorageArgs& a, const std::string& command_line) {
  const auto& paths = a.paths;
  const bool json = a.json;
  StorageBenchOptions o;
  o.seconds_per_row = a.seconds;
  o.force_threads = a.threads;
  if (!a.size.empty()) {
    auto r = ParseSize(a.size);
    if (!r.ok()) return Fail(r.status().message(), kExitUsage);
    o.file_bytes = *r;
  }
  std::vector<StorageResult> results;
  for (const auto& p : paths) {
    if (!json) std::fprintf(stderr, "bench storage: measuring %s ...\n", p.c_str());
    auto r = BenchStorage(p, o);
    if (!r.ok()) return Fail(r.status().message());
    results.push_back(std::move(*r));
  }
  if (json) std::cout << StorageJson(results).dump(2) << "\n";
  if (int rc = Report(a.report, "storage", StorageJson(results), command_line, json); rc != 0)
    return rc;
  if (json) return 0;
  std::printf("%-9s %-8s %3s", "pattern", "block", "qd");
  for (const auto& r : results) std::printf(" | %-36s", r.path.substr(0, 36).c_str());
  std::printf("\n%-9s %-8s %3s", "", "", "");
  for (const auto& r : results) {
    (void)r;
    std::printf(" | %9s %8s %8s %8s", "IOPS", "MB/s", "p50 us", "p99 us");
  }
  std::printf("\n");
  for (size_t i = 0; i < results[0].rows.size(); ++i) {
    const StorageRow& f = results[0].rows[i];
    std::printf("%-9s %-8s %3d", f.pattern.c_str(), BlockName(f.block).c_str(), f.qd);
    for (const auto& r : results) {
      const StorageRow& x = r.rows[i];
      std::printf(" | %9.0f %8.1f %8.0f %8.0f", x.iops, x.mb_s, x.p50_us, x.p99_us);
    }
    std::printf("\n");
  }
  for (const auto& r : results)
    std::printf("%s: engine %s, %s\n", r.path.c_str(), r.engine.c_str(),
                r.direct ? "O_DIRECT" : "buffered (O_DIRECT refused; page cache dropped per row)");
  return 0;
}

struct LoaderBenchArgs {
  std::string source, model, gpu;
  CacheArgs cache;
  PrepareArgs prep;  // the same flags and defaults as warm: same spec, same entry
  FieldArgs fields;
  bool no_cache = false, fresh = false, json = false, drop_caches = false, vs_storage = false,
       bounds = false;
  std::string warm_read = "auto";
  int metrics_cost = 0;  // rounds of warm epochs with vs without metrics
  int epochs = 2, workers = 0, crop = 224;
  size_t batch = 0;
  double compute = 0;
  // --codec: one codec sets the spec's; several compare them (BenchCodecs).
  std::string codecs = "raw";
  int rounds = 3;
  std::string throttle;  // --throttle-read-bps SIZE
  double plan_seconds = 1;
  bool headspace = false;
  std::string report;           // --report DIR
  std::string compare_devices;  // --compare-devices SIZE (a read rate)
  std::string command_line;     // for the report's header
};

std::string Ratio(double a, double b) {
  char buf[32];
  if (a <= 0 || b <= 0) return "-";
  std::snprintf(buf, sizeof buf, "%.2fx", a / b);
  return buf;
}

std::string Rate(double v) {
  char buf[32];
  if (v <= 0) return "-";
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

nlohmann::json CodecBenchJson(const CodecBenchResult& r, uint64_t bps) {
  nlohmann::json rows = nlohmann::json::array();
  auto plan = [](const CodecPlan& p) {
    return nlohmann::json{{"record_bytes", p.record_bytes},
                          {"per_core_images_per_s", p.per_core_images_per_s},
                          {"cores_images_per_s", p.cores_images_per_s},
                          {"device_images_per_s", p.device_images_per_s},
                          {"device_mb_s", p.device.mb_s},
                          {"predicted_images_per_s", p.predicted_images_per_s},
                          {"identical", p.identical},
                          {"psnr_db", p.psnr_db}};
  };
  for (const auto& x : r.rows)
    rows.push_back({{"codec", EnumName(x.codec)},
                    {"quality", x.quality},
                    {"entry_bytes", x.entry_bytes},
                    {"samples", x.samples},
                    {"footprint_x_raw", x.footprint_x_raw},
                    {"cold_images_per_s", x.cold_images_per_s},
                    {"page_cache_images_per_s", x.page_cache},
                    {"dropped_images_per_s", x.dropped},
                    {"throttled_images_per_s", x.throttled},
                    {"page_cache_median", x.page_cache_median},
                    {"page_cache_per_cpu_second", x.page_cache_per_cpu_s},
                    {"page_cache_per_cpu_second_median", x.page_cache_per_cpu_s_median},
                    {"dropped_median", x.dropped_median},
                    {"throttled_median", x.throttled_median},
                    {"plan", plan(x.plan)},
                    {"plan_throttled", plan(x.plan_throttled)},
                    {"x_raw",
                     {{"footprint", x.x_raw.footprint},
                      {"page_cache", x.x_raw.page_cache},
                      {"page_cache_per_cpu_second", x.x_raw.page_cache_per_cpu_s},
                      {"dropped", x.x_raw.dropped},
                      {"throttled", x.x_raw.throttled}}}});
  auto name = [&](int i) { return i >= 0 ? std::string(EnumName(r.rows[i].codec)) : ""; };
  nlohmann::json j = {{"codecs", rows},
                      {"cores", r.cores},
                      {"recommended", name(r.recommended)},
                      {"recommended_throttled", name(r.recommended_throttled)},
                      {"dropped_skipped", r.dropped_skipped},
                      {"throttle_skipped", r.throttle_skipped},
                      {"throttle_read_bps", bps}};
  if (!r.throttle_device.dev.empty())
    j["throttle_device"] = r.throttle_device.name + " " + r.throttle_device.dev;
  return j;
}

// The warm columns: a measured median and plan's prediction beside it.
void PrintWarm(double measured, double predicted) {
  std::printf(" | %9s %7s %5s", Rate(measured).c_str(), Rate(predicted).c_str(),
              Ratio(measured, predicted).c_str());
}

void PrintCodecBench(const CodecBenchResult& r, int rounds, uint64_t bps) {
  std::printf("%-9s %10s %6s %9s | %-23s | %-23s | %-23s\n", "", "", "", "", "warm, page cache",
              "warm, cache dropped", "warm, throttled");
  std::printf("%-9s %10s %6s %9s", "codec", "entry", "x raw", "cold/s");
  for (int i = 0; i < 3; ++i) std::printf(" | %9s %7s %5s", "images/s", "plan", "/plan");
  std::printf("\n");
  const CodecBenchRow* raw = nullptr;
  for (const auto& x : r.rows) {
    if (x.codec == RecordCodec::kRaw) raw = &x;
    std::printf("%-9s %10s %5.2fx %9.0f", CodecLabel(x.codec, x.quality).c_str(),
                FormatBytes(x.entry_bytes).c_str(), x.footprint_x_raw, x.cold_images_per_s);
    PrintWarm(x.page_cache_median, x.plan.cores_images_per_s);
    PrintWarm(x.dropped_median, x.dropped.empty() ? 0 : x.plan.predicted_images_per_s);
    PrintWarm(x.throttled_median,
              x.throttled.empty() ? 0 : x.plan_throttled.predicted_images_per_s);
    std::printf("\n");
  }
  if (raw != nullptr) {
    for (const auto& x : r.rows)
      std::printf(
          "x raw    %-9s footprint %.2fx, page cache %.2fx (per CPU-second %.2fx), cache "
          "dropped %.2fx, throttled %.2fx\n",
          CodecLabel(x.codec, x.quality).c_str(), x.x_raw.footprint, x.x_raw.page_cache,
          x.x_raw.page_cache_per_cpu_s, x.x_raw.dropped, x.x_raw.throttled);
  }
  std::printf(
      "medians of %d round(s), the codecs interleaved in each; %d loader core(s); "
      "'plan': ssdfeed plan's prediction, measured in this run\n",
      rounds, r.cores);
  if (r.dropped_skipped.empty())
    std::printf(
        "cache dropped: sync + drop_caches before each epoch, O_DIRECT reads "
        "(--warm-read direct)\n");
  else
    std::printf("cache dropped: skipped: %s\n", r.dropped_skipped.c_str());
  if (r.throttle_skipped.empty())
    std::printf(
        "throttled: cgroup-v1 blkio.throttle.read_bps_device \"%s %llu\" (%s), page "
        "cache dropped, O_DIRECT reads\n",
        r.throttle_device.dev.c_str(), static_cast<unsigned long long>(bps),
        r.throttle_device.name.c_str());
  else
    std::printf("throttled: skipped: %s\n", r.throttle_skipped.c_str());
  if (r.recommended >= 0 && raw != nullptr && raw->dropped_median > 0) {
    const CodecBenchRow& rec = r.rows[r.recommended];
    std::printf("plan recommends %s for this disk: %s of raw's images/s with the cache dropped\n",
                EnumName(rec.codec), Ratio(rec.dropped_median, raw->dropped_median).c_str());
  }
  if (raw != nullptr && raw->throttled_median > 0) {
    const CodecBenchRow* best = raw;
    for (const auto& x : r.rows)
      if (x.throttled_median > best->throttled_median) best = &x;
    std::printf(
        "throttled: the fastest codec, %s, gives %s of raw's images/s; plan recommends %s\n",
        EnumName(best->codec), Ratio(best->throttled_median, raw->throttled_median).c_str(),
        r.recommended_throttled >= 0 ? EnumName(r.rows[r.recommended_throttled].codec) : "-");
  }
}

int RunCodecBench(const LoaderBenchArgs& a, const LoaderOptions& lo,
                  std::vector<std::pair<RecordCodec, int>> codecs) {
  CodecBenchOptions o;
  o.loader = lo;
  o.codecs = std::move(codecs);
  o.rounds = a.rounds;
  o.plan_device_seconds = a.plan_seconds;
  if (!a.throttle.empty()) {
    auto bps = ParseSize(a.throttle);
    if (!bps.ok() || *bps == 0)
      return Fail("--throttle-read-bps: expected a rate > 0 such as 500M, got '" + a.throttle + "'",
                  kExitUsage);
    o.throttle_read_bps = *bps;
  }
  auto r = BenchCodecs(o);
  if (!r.ok()) return Fail(r.status().message());
  if (a.json)
    std::cout << CodecBenchJson(*r, o.throttle_read_bps).dump(2) << "\n";
  else
    PrintCodecBench(*r, o.rounds, o.throttle_read_bps);
  return Report(a.report, "codecs", CodecBenchJson(*r, o.throttle_read_bps), a.command_line,
                a.json);
}

int RunMetricsCost(const LoaderOptions& lo, int rounds, bool json) {
  auto r = BenchMetricsCost(lo, rounds);
  if (!r.ok()) return Fail(r.status().message());
  if (json) {
    std::cout << nlohmann::json{{"with_metrics", r->with_metrics},
                                {"without_metrics", r->without_metrics},
                                {"median_with", r->median_with},
                                {"median_without", r->median_without},
                                {"cpu_us_per_image_with", r->cpu_us_with},
                                {"cpu_us_per_image_without", r->cpu_us_without},
                                {"median_cpu_us_per_image_with", r->median_cpu_us_with},
                                {"median_cpu_us_per_image_without", r->median_cpu_us_without}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%5s %22s %22s\n", "round", "metrics on images/s", "metrics off images/s");
  for (size_t i = 0; i < r->with_metrics.size(); ++i)
    std::printf("%5zu %22.0f %22.0f\n", i + 1, r->with_metrics[i], r->without_metrics[i]);
  std::printf("%5s %22.0f %22.0f  (%+.1f%%)\n", "median", r->median_with, r->median_without,
              (r->median_with / r->median_without - 1) * 100);
  std::printf("%5s %22.1f %22.1f  (%+.1f%%)  CPU us per image\n", "median", r->median_cpu_us_with,
              r->median_cpu_us_without,
              (r->median_cpu_us_with / r->median_cpu_us_without - 1) * 100);
  return 0;
}

nlohmann::json DeviceJson(const DeviceStats& d) {
  return {{"name", d.device},           {"read_mb_s", d.read_mb_s}, {"write_mb_s", d.write_mb_s},
          {"r_await_ms", d.r_await_ms}, {"aqu_sz", d.aqu_sz},       {"util_pct", d.util_pct}};
}

nlohmann::json EpochJson(const LoaderBenchEpoch& e, const StorageRow& sr) {
  nlohmann::json j = {
      {"epoch", e.epoch},
      {"seconds", e.seconds},
      {"batches", e.batches},
      {"images", e.images},
      {"images_per_s", e.images_per_s},
      {"mb_per_s", e.mb_per_s},
      {"hit_rate", e.hit_rate},
      {"p50_wait_ms", e.p50_wait_ms},
      {"p99_wait_ms", e.p99_wait_ms},
      {"utilization", e.utilization},
      {"dropped_caches", e.dropped_caches},
      {"record_bytes", e.record_bytes},
      {"cpu_seconds", e.cpu_seconds},
      {"stats", nlohmann::json(std::map<std::string, double>(e.stats.begin(), e.stats.end()))},
      {"wait_histogram", {{"edges_ms", e.waits.edges_ms}, {"counts", e.waits.counts}}}};
  if (!e.device.device.empty()) j["device"] = DeviceJson(e.device);
  nlohmann::json tl = nlohmann::json::array();
  for (const TimelinePoint& p : e.timeline) {
    nlohmann::json point = {
        {"t_s", p.t_s}, {"images_per_s", p.images_per_s}, {"utilization", p.utilization}};
    if (!p.device.device.empty()) point["device"] = DeviceJson(p.device);
    tl.push_back(point);
  }
  j["timeline"] = tl;
  if (sr.iops > 0) j["vs_storage"] = e.images_per_s / sr.iops;
  return j;
}

// What `bench loader --json` prints (and the report draws).
nlohmann::json LoaderJson(const LoaderBenchResult& r, const LoaderBenchOptions& o,
                          const ModelPreset* preset) {
  const StorageRow& sr = r.storage;
  nlohmann::json eps = nlohmann::json::array();
  for (const auto& e : r.epochs) eps.push_back(EpochJson(e, sr));
  nlohmann::json j = {{"epochs", eps},
                      {"batch", o.loader.batch_size},
                      {"compute_seconds", o.compute_seconds},
                      {"capacity_images_per_s", r.capacity_images_per_s},
                      {"accelerators_at_90", r.accelerators_at_90}};
  if (r.augment_per_core > 0)
    j["bounds"] = {{"decode_prepare_per_core", r.decode_prepare_per_core},
                   {"augment_per_core", r.augment_per_core},
                   {"augment_opencv_per_core", r.augment_opencv_per_core},
                   {"cores", r.cores}};
  if (sr.iops > 0)
    j["storage"] = {{"engine", r.storage_engine},
                    {"block", sr.block},
                    {"qd", sr.qd},
                    {"iops", sr.iops},
                    {"mb_s", sr.mb_s}};
  if (r.headspace.batches > 0) {
    j["headspace"] = EpochJson(r.headspace, StorageRow{});
    j["headspace_gap"] = r.headspace_gap;
  }
  if (preset) j["preset_source"] = preset->source;
  return j;
}

void PrintLoaderBench(const LoaderBenchResult& r, const LoaderBenchOptions& o,
                      const ModelPreset* preset) {
  const StorageRow& sr = r.storage;
  auto vs = [&](const LoaderBenchEpoch& e) { return sr.iops > 0 ? e.images_per_s / sr.iops : 0; };
  std::printf("%5s %-11s %10s %9s %9s %12s %12s %9s %9s %8s %7s %6s%s%s\n", "epoch", "page cache",
              "images/s", "MB/s", "hit rate", "p50 wait ms", "p99 wait ms", "dev rMB/s",
              "dev wMB/s", "r_await", "aqu-sz", "%util", sr.iops > 0 ? "  vs storage" : "",
              o.compute_seconds > 0 ? "  accel util" : "");
  for (const auto& e : r.epochs) {
    const DeviceStats& d = e.device;
    std::printf("%5d %-11s %10.0f %9.1f %8.0f%% %12.2f %12.2f", e.epoch,
                e.dropped_caches ? "dropped" : "as left", e.images_per_s, e.mb_per_s,
                e.hit_rate * 100, e.p50_wait_ms, e.p99_wait_ms);
    if (d.device.empty())
      std::printf(" %9s %9s %8s %7s %6s", "-", "-", "-", "-", "-");
    else
      std::printf(" %9.1f %9.1f %8.2f %7.1f %6.0f", d.read_mb_s, d.write_mb_s, d.r_await_ms,
                  d.aqu_sz, d.util_pct);
    if (sr.iops > 0) std::printf("  %9.2fx", vs(e));
    if (o.compute_seconds > 0) std::printf("  %10.1f%%", e.utilization * 100);
    std::printf("\n");
  }
  if (!r.epochs.empty() && !r.epochs.back().device.device.empty())
    std::printf("device: %s (/proc/diskstats, as iostat -x shows it)\n",
                r.epochs.back().device.device.c_str());
  if (sr.iops > 0)
    std::printf(
        "storage: O_DIRECT random %u-byte reads (a record's aligned window) at QD %d (%s): "
        "%.0f IOPS = %.0f MB/s; 'vs storage' = images/s / IOPS\n",
        sr.block, sr.qd, r.storage_engine.c_str(), sr.iops, sr.mb_s);
  if (r.augment_per_core > 0) {
    // Cold epochs are held to decode + prepare, warm ones to the crop alone.
    std::printf(
        "bounds on one core: decode+prepare %.0f images/s (the fastest of 3 groups of 200 "
        "samples), crop+resize %.0f images/s (OpenCV's cv::resize + cv::flip alone: %.0f); x "
        "%d cores\n",
        r.decode_prepare_per_core, r.augment_per_core, r.augment_opencv_per_core, r.cores);
    for (const auto& e : r.epochs) {
      bool cold = e.hit_rate < 0.5;
      double bound = cold ? r.decode_prepare_per_core : r.augment_per_core;
      double per_core = e.images_per_s / r.cores;
      double per_cpu_s = e.cpu_seconds > 0 ? e.images_per_s * e.seconds / e.cpu_seconds : 0;
      // Per CPU-second: what other processes on a shared machine take from
      // the workers does not count against them.
      std::printf(
          "  epoch %d (%s): %.0f images/s per core = %.2fx of the %s bound; %.0f images per "
          "CPU-second = %.2fx\n",
          e.epoch, cold ? "cold" : "warm", per_core, per_core / bound,
          cold ? "decode+prepare" : "crop+resize", per_cpu_s, per_cpu_s / bound);
      if (!cold && !e.dropped_caches && r.augment_opencv_per_core > 0)
        std::printf("    %.2fx of OpenCV's crop+resize alone\n",
                    per_core / r.augment_opencv_per_core);
      if (!cold) continue;
      // A cold sample is also cropped and resized for its batch: the bound
      // of all the work it needs, and how its records were written.
      double all = 1 / (1 / r.decode_prepare_per_core + 1 / r.augment_per_core);
      double direct = 0, puts = 0;
      for (const auto& [name, value] : e.stats) {
        if (name == "cache_direct_writes") direct = value;
        if (name == "cache_puts") puts = value;
      }
      std::printf(
          "    with its crop+resize (%.0f images/s on one core): %.2fx per core, %.2fx per "
          "CPU-second; records written %s\n",
          all, per_core / all, per_cpu_s / all,
          puts == 0        ? "none"
          : direct >= puts ? "direct (O_DIRECT, writer thread)"
                           : "buffered");
    }
  }
  if (o.compute_seconds > 0) {
    std::printf("emulated accelerator: %.3f s per batch of %zu (%s)\n", o.compute_seconds,
                o.loader.batch_size, preset ? preset->source : "--compute-time");
    std::printf(
        "loader capacity (warm, no compute): %.0f images/s -> keeps %d such "
        "accelerator(s) >= 90%% busy\n",
        r.capacity_images_per_s, r.accelerators_at_90);
  }
  if (r.headspace.batches > 0)
    std::printf(
        "headspace (one batch replayed %llu times, no reads; the consumer copies it%s): %.0f "
        "images/s = %.2fx the last epoch's: %s\n",
        static_cast<unsigned long long>(r.headspace.batches),
        o.compute_seconds > 0 ? " and computes" : "", r.headspace.images_per_s, r.headspace_gap,
        r.headspace_gap > 1.1 ? "the input pipeline holds the consumer back"
                              : "the input pipeline keeps up");
}

// --compare-devices RATE: the same loader bench (cold, then warm epochs
// with the page cache dropped, so they read the device) on the device as it
// is, then with its reads throttled to RATE (the codec bench's blkio
// throttle: a SATA-class SSD next to the NVMe one). Each run starts cold,
// from a removed entry.
int RunCompareDevices(const LoaderBenchArgs& a, LoaderBenchOptions o, const ModelPreset* preset) {
  auto bps = ParseSize(a.compare_devices);
  if (!bps.ok() || *bps == 0)
    return Fail(
        "--compare-devices: expected a read rate > 0 such as 500M, got '" + a.compare_devices + "'",
        kExitUsage);
  if (a.no_cache) return Fail("--compare-devices reads the cache: not with --no-cache", kExitUsage);
  if (a.epochs < 2)
    return Fail("--compare-devices: needs --epochs 2 or more (a cold and a warm one)", kExitUsage);
  LoaderOptions& lo = o.loader;
  if (Status s = PrepareBenchRoot(lo.cache); !s.ok())
    return Fail("cannot create the cache root: " + s.message());
  if (Status s = CanDropPageCache(); !s.ok())
    return Fail("--compare-devices: warm epochs must read the device: " + s.message());
  if (Status s = CanThrottleReads(lo.cache.root); !s.ok())
    return Fail("--compare-devices: " + s.message());
  auto src = OpenSource(lo.source, lo.source_options);
  if (!src.ok()) return Fail(src.status().message());
  std::string fp = MakeEntryKey(**src, lo.source_options, lo.prepare).fingerprint();
  o.drop_caches = true;
  nlohmann::json runs = nlohmann::json::array();
  for (int throttled = 0; throttled < 2; ++throttled) {
    Status rm = RemoveEntry(lo.cache, fp);
    if (!rm.ok() && !rm.IsNotFound()) return Fail(rm.message());
    if (Status s = DropPageCache(); !s.ok()) return Fail(s.message());
    std::unique_ptr<ReadThrottle> t;
    std::string name = "the device as it is";
    if (throttled) {
      auto started = ReadThrottle::Start(lo.cache.root, *bps);
      if (!started.ok()) return Fail(started.status().message());
      t = std::move(*started);
      name = "reads throttled to " + a.compare_devices + "B/s (" + t->device().name + ")";
    }
    if (!a.json) std::printf("== %s\n", name.c_str());
    auto r = BenchLoader(o);
    if (!r.ok()) return Fail(r.status().message());
    if (!a.json) PrintLoaderBench(*r, o, preset);
    runs.push_back({{"name", name}, {"result", LoaderJson(*r, o, preset)}});
  }
  nlohmann::json j = {{"throttle_read_bps", *bps}, {"runs", runs}};
  if (a.json) std::cout << j.dump(2) << "\n";
  return Report(a.report, "compare-devices", j, a.command_line, a.json);
}

int RunLoaderBench(const LoaderBenchArgs& a) {
  LoaderBenchOptions o;
  o.epochs = a.epochs;
  LoaderOptions& lo = o.loader;
  lo.source = a.source;
  if (Status s = a.fields.ToFields(&lo.source_options.fields); !s.ok())
    return Fail(s.message(), kExitUsage);
  if (Status s = a.prep.ToSpec(&lo.prepare); !s.ok()) return Fail(s.message(), kExitUsage);
  lo.augment.enabled = a.crop > 0;
  lo.augment.height = lo.augment.width = a.crop;
  lo.shuffle = true;
  lo.workers = a.workers;
  lo.batch_size = a.batch > 0 ? a.batch : 256;
  o.compute_seconds = a.compute;
  o.drop_caches = a.drop_caches;
  o.vs_storage = a.vs_storage;
  o.bounds = a.bounds;
  o.headspace = a.headspace;
  const ModelPreset* preset = nullptr;
  if (!a.model.empty() || !a.gpu.empty()) {
    preset = FindModelPreset(a.model, a.gpu);
    if (preset == nullptr && a.compute <= 0) {
      std::string have;
      for (const auto& p : ModelPresets()) have += std::string(" ") + p.model + "/" + p.gpu;
      return Fail("no MLPerf Storage preset for " + a.model + " on " + a.gpu +
                      " (published:" + have + "); give --compute-time SECONDS and --batch B",
                  kExitUsage);
    }
    if (preset != nullptr) {
      if (a.batch == 0) lo.batch_size = preset->batch;
      if (a.compute <= 0) o.compute_seconds = preset->compute_seconds;
    }
  }
  // --codec: one sets the spec's codec (before --fresh finds the entry);
  // several are compared once the cache options are in place.
  std::vector<std::pair<RecordCodec, int>> codecs;
  if (a.codecs != "raw") {
    auto parsed = ParseCodecList(a.codecs, lo.prepare.quality, "--codec");
    if (!parsed.ok()) return Fail(parsed.status().message(), kExitUsage);
    codecs = std::move(*parsed);
    if (a.no_cache)
      return Fail("--codec is how cache records are stored: not with --no-cache", kExitUsage);
    if (codecs.size() == 1) lo.prepare.codec = codecs[0].first;
  }
  if (!a.no_cache) {
    if (Status s = a.cache.ToOptions(&lo.cache); !s.ok()) return Fail(s.message(), kExitUsage);
    auto warm_read = ParseEnum<WarmRead>(a.warm_read, "--warm-read");
    if (!warm_read.ok()) return Fail(warm_read.status().message(), kExitUsage);
    lo.cache.warm_read = *warm_read;
    if (a.fresh) {
      auto src = OpenSource(a.source, lo.source_options);
      if (!src.ok()) return Fail(src.status().message());
      Status s =
          RemoveEntry(lo.cache, MakeEntryKey(**src, lo.source_options, lo.prepare).fingerprint());
      if (!s.ok() && !s.IsNotFound()) return Fail(s.message());
    }
  }
  if (!a.json && !a.prep.given())
    std::fprintf(stderr,
                 "bench loader: no prepare options given: caching full-size pixels (the default, "
                 "as warm); pass --resize-short 256 for ImageNet-style training\n");
  // The other modes would drop these flags without a word.
  if (a.metrics_cost > 0 && (!a.report.empty() || a.headspace || !a.compare_devices.empty()))
    return Fail("--metrics-cost: not with --report, --headspace or --compare-devices", kExitUsage);
  if (codecs.size() > 1 && (a.headspace || !a.compare_devices.empty()))
    return Fail(
        "several --codec: not with --headspace or --compare-devices (the codec comparison "
        "throttles with --throttle-read-bps)",
        kExitUsage);
  if (a.metrics_cost > 0) return RunMetricsCost(lo, a.metrics_cost, a.json);
  if (codecs.size() > 1) return RunCodecBench(a, lo, std::move(codecs));
  if (!a.compare_devices.empty()) return RunCompareDevices(a, o, preset);
  auto r = BenchLoader(o);
  if (!r.ok()) return Fail(r.status().message());
  nlohmann::json j = LoaderJson(*r, o, preset);
  if (a.json)
    std::cout << j.dump(2) << "\n";
  else
    PrintLoaderBench(*r, o, preset);
  return Report(a.report, "loader", j, a.command_line, a.json);
}

}  // namespace

void AddBench(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("bench", "Measure storage or loader throughput");
  c->require_subcommand(1);

  auto* s = c->add_subcommand("storage", "O_DIRECT random/sequential reads, one column per path");
  auto sa = std::make_shared<StorageArgs>();
  s->add_option("paths", sa->paths, "Directories, each on the device to measure")->required();
  s->add_option("--size", sa->size, "Test file size per path (default 256M)");
  s->add_option("--duration", sa->seconds, "Seconds per row (default 1)")
      ->check(CLI::PositiveNumber);
  s->add_flag("--threads", sa->threads, "Use the thread-pool engine instead of io_uring");
  s->add_flag("--json", sa->json, "JSON output");
  s->add_option("--report", sa->report,
                "Also write DIR/report.html (charts, self-contained) and DIR/report.json "
                "(what --json prints, with a header naming the machine and build)");
  s->callback([=] { st->rc = RunStorage(*sa, st->command_line); });

  auto* l = c->add_subcommand("loader", "Run the real loader; emulate an accelerator per batch");
  auto a = std::make_shared<LoaderBenchArgs>();
  l->add_option("--source", a->source, "Source URI")->required();
  a->fields.Add(l);
  a->cache.Add(l, true, true);
  l->add_flag("--no-cache", a->no_cache, "Prepare from the origin every epoch");
  l->add_flag("--fresh", a->fresh, "Remove this source's cache entry first (cold start)");
  l->add_option("--epochs", a->epochs, "Epochs (default 2)")->check(AtLeast(1));
  l->add_option("--batch", a->batch, "Batch size (default: the preset's, else 256)")
      ->check(AtLeast(1));
  l->add_option("--workers", a->workers, "Worker threads (default 0: one per core)")
      ->check(AtLeast(0, " (0: one per core)"));
  a->prep.Add(l);
  l->add_option("--crop", a->crop, "RandomResizedCrop size (default 224; 0: none)")
      ->check(AtLeast(0, " (0: no crop)"));
  l->add_option("--model", a->model, "resnet50 or unet3d (MLPerf Storage preset)");
  l->add_option("--gpu", a->gpu, "a100, h100 or h200");
  l->add_option("--compute-time", a->compute, "Emulated compute seconds per batch");
  l->add_flag("--json", a->json, "JSON output");
  l->add_flag("--drop-caches", a->drop_caches,
              "Drop the page cache before each warm epoch (root), then one more warm epoch "
              "without: the device's figure next to the page cache's");
  l->add_flag("--vs-storage", a->vs_storage,
              "Then measure O_DIRECT random reads of the record size at QD 32 on the cache's "
              "filesystem; report each epoch against it");
  l->add_flag("--bounds", a->bounds,
              "Then measure decode+prepare and crop+resize on one core; report each epoch "
              "against them");
  l->add_option("--warm-read", a->warm_read,
                "How records are read back: auto (direct when the entry exceeds available "
                "memory), buffered or direct (default auto)")
      ->check(CLI::IsMember(EnumNames<WarmRead>()));
  l->add_option("--metrics-cost", a->metrics_cost,
                "Instead: N rounds of warm epochs with metrics on and off, side by side");
  // The prepare options' --codec takes one codec; here a list compares them.
  l->remove_option(l->get_option("--codec"));
  l->add_option("--codec", a->codecs,
                "How cache records store the pixels: raw (the default), zstd, jpeg (at "
                "--quality) or yuv420; several, e.g. raw,zstd,jpeg,yuv420, compare them side by "
                "side: footprint, "
                "cold fill, warm epochs in rounds and plan's predictions");
  l->add_option("--rounds", a->rounds,
                "With several codecs: rounds of warm epochs, each codec once per round (default 3)")
      ->check(AtLeast(1));
  l->add_option("--throttle-read-bps", a->throttle,
                "With several codecs: also warm epochs with the cache's disk limited to this many "
                "bytes/s, e.g. 500M for a SATA-class SSD (root, cgroup-v1 blkio; skipped with the "
                "reason otherwise)");
  l->add_option("--plan-seconds", a->plan_seconds,
                "With several codecs: plan's device reads per codec, seconds (default 1)")
      ->check(CLI::PositiveNumber);
  l->add_flag("--headspace", a->headspace,
              "Then one compute-floor epoch: one batch replayed without reading, as many times "
              "as the last epoch had batches: what the consumer could do with a free input "
              "pipeline, and the gap to the last epoch");
  l->add_option("--compare-devices", a->compare_devices,
                "Run the bench twice, each from a cold cache with warm epochs reading the "
                "device: as it is, then with its reads throttled to this rate, e.g. 500M for a "
                "SATA-class SSD (root, cgroup-v1 blkio, drop_caches)");
  l->add_option("--report", a->report,
                "Also write DIR/report.html (charts, self-contained) and DIR/report.json "
                "(what --json prints, with a header naming the machine and build)");
  l->callback([st, a] {
    a->command_line = st->command_line;
    st->rc = RunLoaderBench(*a);
  });
}

}  // namespace ssdfeed::cli
