// ssdfeed plan --source URI [prepare options]: how big the cache entry will
// be and how long warming it takes on this machine, before filling anything.
// Prepares a sample spread over the dataset (ids i*N/n, so every class and
// shard is represented) and extrapolates with the on-disk format's overhead
// (docs/cache-format.md). Then, per record codec, what a warm epoch can
// reach here: the cache device's random reads at the codec's record size
// and the loader cores' decode + crop rate (include/ssdfeed/plan.h), and which
// codec to choose.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/options.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/plan.h"
#include "ssdfeed/source.h"
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
  std::string cache;  // the root whose device is measured
  std::string codecs = "raw,zstd,jpeg,yuv420";
  int probes = 24, crop = 224;
  double device_seconds = 1;
  std::string scratch_size = "256M";
  uint64_t scratch_bytes = 256ull << 20;
};

// The directory the cache root is, or will be created in: its filesystem
// is the one records will be read from.
std::string ExistingDirOf(std::string dir) {
  struct stat st;
  while (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    size_t slash = dir.find_last_of('/');
    dir = slash == 0 ? "/" : slash == std::string::npos ? "." : dir.substr(0, slash);
  }
  return dir.empty() ? "." : dir;
}

struct CodecReport {
  std::vector<CodecPlan> rows;
  int recommended = -1, cores = 1;
  std::string device_dir;
  std::string skipped;  // why no codec was measured (a source of no images...)
};

// The codec rows; what stops them (no image to time, no room for the
// scratch file) is reported in rep->skipped, as the size estimate stands.
void PlanCodecRows(const PlanArgs& a, const Source& src, const PrepareSpec& spec, int workers,
                   std::vector<std::pair<RecordCodec, int>> codecs, CodecReport* rep) {
  CodecPlanOptions o;
  o.codecs = std::move(codecs);
  o.probes = a.probes;
  o.augment.enabled = a.crop > 0;
  o.augment.height = o.augment.width = a.crop;
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  o.cores = rep->cores = std::max(1, hw > 0 ? std::min(workers, hw) : workers);
  if (a.device_seconds > 0) {
    o.device_dir = rep->device_dir = ExistingDirOf(a.cache.empty() ? DefaultCacheRoot() : a.cache);
    o.device.seconds = a.device_seconds;
    o.device.file_bytes = a.scratch_bytes;
  }
  auto rows = PlanCodecs(src, spec, o);
  if (!rows.ok()) {
    rep->skipped = rows.status().message();
    return;
  }
  rep->rows = std::move(*rows);
  rep->recommended = RecommendCodec(rep->rows);
}

nlohmann::json CodecJson(const CodecReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rep.rows)
    rows.push_back({{"codec", EnumName(r.codec)},
                    {"quality", r.quality},
                    {"record_bytes", std::llround(r.record_bytes)},
                    {"footprint_x_raw", r.footprint_x_raw},
                    {"per_core_images_per_s", r.per_core_images_per_s},
                    {"cores_measured_images_per_s", r.cores_measured_images_per_s},
                    {"cores_images_per_s", r.cores_images_per_s},
                    {"device_read_block", r.device.block},
                    {"device_read_qd", r.device.qd},
                    {"device_read_direct", r.device.direct},
                    {"device_mb_s", r.device.mb_s},
                    {"device_images_per_s", r.device_images_per_s},
                    {"predicted_images_per_s", r.predicted_images_per_s},
                    {"identical", r.identical},
                    {"psnr_db", r.psnr_db}});
  if (!rep.skipped.empty()) return {{"codecs", rows}, {"codecs_skipped", rep.skipped}};
  return {{"cores", rep.cores},
          {"device_dir", rep.device_dir},
          {"tie_fraction", kPlanTie},
          {"codecs", rows},
          {"recommended", rep.recommended >= 0 ? EnumName(rep.rows[rep.recommended].codec) : ""}};
}

void PrintCodecs(const CodecReport& rep, double device_seconds) {
  if (!rep.skipped.empty()) {
    std::printf("codecs      not compared: %s\n", rep.skipped.c_str());
    return;
  }
  std::printf("\n%-9s %10s %7s %9s %16s %16s %16s\n", "codec", "record", "x raw", "fidelity",
              "device images/s", "cores images/s", "predicted warm");
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const CodecPlan& r = rep.rows[i];
    char dev[32] = "-";
    if (r.device_images_per_s > 0) std::snprintf(dev, sizeof dev, "%.0f", r.device_images_per_s);
    char fid[32] = "identical";
    if (!r.identical) std::snprintf(fid, sizeof fid, "%.1f dB", r.psnr_db);
    std::printf("%-9s %10s %6.2fx %9s %16s %16.0f %16.0f%s\n",
                CodecLabel(r.codec, r.quality).c_str(),
                FormatBytes(static_cast<uint64_t>(r.record_bytes)).c_str(), r.footprint_x_raw, fid,
                dev, r.cores_images_per_s, r.predicted_images_per_s,
                static_cast<int>(i) == rep.recommended ? "  <- recommended" : "");
  }
  if (rep.recommended < 0) return;
  const CodecPlan& best = rep.rows[rep.recommended];
  std::printf(
      "recommend   --codec %s%s: the best predicted warm rate from the device (within %.0f%%, "
      "the smaller record wins)\n",
      EnumName(best.codec),
      best.codec == RecordCodec::kJpeg ? (" --quality " + std::to_string(best.quality)).c_str()
                                       : "",
      kPlanTie * 100);
  std::printf("cores       checksum + decode + crop on %d loader core(s) at once, wall-clock\n",
              rep.cores);
  std::printf("fidelity    the served pixels against the prepared ones (PSNR over the probes)\n");
  if (!rep.device_dir.empty() && !rep.rows.empty())
    std::printf(
        "device      random reads of each record's 4 KiB window at QD %d on %s's "
        "filesystem (%s, %.1f s per size)\n",
        rep.rows[0].device.qd, rep.device_dir.c_str(),
        rep.rows[0].device.direct ? "O_DIRECT" : "buffered: O_DIRECT refused", device_seconds);
  else
    std::printf("device      not measured (--device-seconds 0): predicted = the cores' rate\n");
}

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
  auto codecs = ParseCodecList(a.codecs, spec.quality, "--codecs");
  if (!codecs.ok()) return Fail(codecs.status().message(), kExitUsage);
  PlanArgs args = a;
  if (!a.scratch_size.empty()) {
    auto n = ParseSize(a.scratch_size);
    if (!n.ok() || *n < (4u << 20))
      return Fail(
          "--scratch-size: expected a size >= 4M such as 256M, got '" + a.scratch_size + "'",
          kExitUsage);
    args.scratch_bytes = *n;
  }
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
  CodecReport rep;
  PlanCodecRows(args, **src, spec, workers, std::move(*codecs), &rep);
  if (a.json) {
    nlohmann::json j = nlohmann::json{{"source", a.source},
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
                                      {"warm_seconds", std::round(warm_s * 10) / 10}};
    j.update(CodecJson(rep));
    std::cout << j.dump() << "\n";
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
  PrintCodecs(rep, a.device_seconds);
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
                "Threads warm and the loader would use, for the time and warm-rate estimates "
                "(default 0: one per core)")
      ->check(AtLeast(0, " (0: one per core)"));
  c->add_option("--cache", a->cache,
                "Cache root whose device is measured (default $SSDFEED_CACHE, then "
                "~/.cache/ssdfeed; its nearest existing directory when it does not exist yet)");
  c->add_option("--codecs", a->codecs,
                "Record codecs to compare, e.g. raw,zstd (default raw,zstd,jpeg,yuv420; jpeg at "
                "--quality)");
  c->add_option("--probes", a->probes,
                "Samples prepared to time each codec's decode + crop (default 24)")
      ->check(AtLeast(1));
  c->add_option("--crop", a->crop, "RandomResizedCrop size timed (default 224; 0: none)")
      ->check(AtLeast(0, " (0: no crop)"));
  c->add_option("--device-seconds", a->device_seconds,
                "Seconds of random reads per codec on the cache's device (default 1; 0: do not "
                "measure the device)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--scratch-size", a->scratch_size,
                "Size of the scratch file the device is measured on (default 256M)");
  c->add_flag("--json", a->json, "Print a JSON report");
  c->callback([st, a] { st->rc = RunPlan(*a); });
}

}  // namespace ssdfeed::cli
