// ssdfeed warm --source URI: fills a cache entry, resumable, with progress.
// Says what it will store before it starts, stops early when the cache
// cannot take more, and exits non-zero unless every sample is in (or was
// skipped under --on-error skip, each one named).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/warm.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

struct WarmArgs {
  std::string source, on_error = "raise", skipped_file;
  PrepareArgs prep;
  CacheArgs cache;
  FieldArgs fields;
  int workers = 0;
  bool json = false, quiet = false, allow_partial = false;
};

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted = true; }

// A first Ctrl-C stops the workers and syncs; a second one kills at once
// (SA_RESETHAND), for a user who does not want to wait for the sync.
void CatchSigint() {
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

void Progress(uint64_t done, uint64_t total, double elapsed, bool final) {
  double rate = elapsed > 0 ? done / elapsed : 0;
  double eta = rate > 0 ? (total - done) / rate : 0;
  int width = 30, filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\rwarm [%s%s] %llu/%llu  %.0f samples/s  ETA %.0fs   %s",
               std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), rate,
               eta, final ? "\n" : "");
}

// One line before the work starts: the spec, and what it will cost.
void PrintPlan(const Source& src, const PrepareSpec& spec, bool spec_given) {
  EntryEstimate e = EstimateEntry(src, spec);
  std::string what = DescribeSpec(spec.Canonical());
  std::string size = e.probed ? "~" + FormatBytes(e.entry_bytes()) : "unknown size";
  std::fprintf(stderr, "ssdfeed: preparing %s pixels: %s for %llu samples", what.c_str(),
               size.c_str(), static_cast<unsigned long long>(e.samples));
  if (e.probed && e.origin_bytes)
    std::fprintf(stderr, " (%.1fx the encoded bytes)",
                 static_cast<double>(e.pixel_bytes + e.field_bytes) / e.origin_bytes);
  std::fprintf(stderr, "\n");
  if (!spec_given)
    std::fprintf(stderr,
                 "ssdfeed: no prepare options given, so samples are cached at full size; pass "
                 "--resize-short 256 (or --resize HxW, --center-crop HxW) to cache smaller "
                 "images\n");
}

// Names each skipped sample (stderr or --skipped-file); the library has
// recorded them in the entry's skipped.json.
int ReportSkipped(const WarmArgs& a, const WarmResult& r) {
  if (!a.skipped_file.empty()) {
    std::ofstream f(a.skipped_file);
    for (const auto& s : r.skipped) f << s.sample << "\t" << s.error << "\n";
    if (!f.good()) return Fail("--skipped-file " + a.skipped_file + ": cannot write");
  } else {
    for (const auto& s : r.skipped) std::cerr << "ssdfeed: skipped " << s.error << "\n";
  }
  std::cerr << "ssdfeed: skipped " << Plural(r.skipped.size(), "bad sample", "bad samples")
            << (a.skipped_file.empty() ? "" : ", listed in " + a.skipped_file) << "\n";
  return 0;
}

void PrintReport(const WarmArgs& a, const WarmResult& r) {
  if (a.json) {
    std::cout << nlohmann::json{{"entry", Basename(r.dir)},
                                {"dir", r.dir},
                                {"spec", r.spec},
                                {"samples_total", r.samples_total},
                                {"samples_present", r.samples_present},
                                {"prepared", r.prepared},
                                {"cache_hits", r.cache_hits},
                                {"claim_waits", r.claim_waits},
                                {"errors", r.errors},
                                {"skipped", r.skipped.size()},
                                {"cache_full", r.cache_full},
                                {"interrupted", r.interrupted},
                                {"seconds", std::round(r.seconds * 10) / 10},
                                {"warning", r.warning}}
                     .dump()
              << "\n";
    return;
  }
  char t[32];
  std::snprintf(t, sizeof t, "%.1f", r.seconds);
  std::cout << "entry " << Basename(r.dir) << ": " << r.samples_present << "/" << r.samples_total
            << " samples present, " << r.prepared << " prepared in " << t << " s\n";
}

// The progress bar, redrawn every 0.25 s on a terminal (5 s in a log); it
// also stops the workers on a Ctrl-C.
std::function<bool(const WarmProgress&)> ProgressBar(bool show) {
  auto last = std::make_shared<double>(0);
  bool tty = ::isatty(2);
  return [show, tty, last](const WarmProgress& p) {
    if (show && p.seconds - *last > (tty ? 0.25 : 5)) {
      Progress(p.done, p.total, p.seconds, false);
      *last = p.seconds;
    }
    return !g_interrupted;
  };
}

// Exit status and last words, once the library has warmed what it could.
int Finish(const WarmArgs& a, const WarmResult& r, const Status& s) {
  for (const auto& w : r.warnings)
    if (!a.quiet) std::cerr << "ssdfeed: warning: " << w << "\n";
  if (!r.warning.empty() && !a.json) std::cerr << "ssdfeed: warning: " << r.warning << "\n";
  if (r.interrupted || g_interrupted)
    return Fail("interrupted: " + std::to_string(r.samples_present) + "/" +
                    std::to_string(r.samples_total) +
                    " samples stored; rerun the same command to resume",
                kExitInterrupted);
  if (!r.skipped.empty())
    if (int rc = ReportSkipped(a, r); rc != 0) return rc;
  if (!s.ok()) return Fail(s.message());
  if (!r.complete()) {
    std::string msg = "cache full: stored " + std::to_string(r.samples_present) + " of " +
                      std::to_string(r.samples_total) + " samples in " + r.dir +
                      " (free space or raise --capacity, then rerun to resume)";
    if (!a.allow_partial) return Fail(msg + "; --allow-partial accepts this", kExitPartial);
    std::cerr << "ssdfeed: " << msg << "\n";
  }
  return 0;
}

int RunWarm(const WarmArgs& a) {
  WarmOptions o;
  Result<OnError> on_error = ParseEnum<OnError>(a.on_error, "--on-error");
  if (!on_error.ok()) return Fail(on_error.status().message(), kExitUsage);
  o.source.on_error = *on_error;
  if (Status s = a.fields.ToFields(&o.source.fields); !s.ok()) return Fail(s.message(), kExitUsage);
  o.workers = a.workers;
  if (Status s = a.prep.ToSpec(&o.prepare); !s.ok()) return Fail(s.message(), kExitUsage);
  if (Status s = a.cache.ToOptions(&o.cache); !s.ok()) return Fail(s.message(), kExitUsage);
  CatchSigint();  // before the plan line, so a Ctrl-C after it is always handled
  auto src = OpenSource(a.source, o.source);
  if (!src.ok()) return Fail(src.status().message());
  for (const auto& why : (*src)->skipped_reasons())  // parts --on-error skip left out at open
    std::cerr << "ssdfeed: left out " << why << "\n";
  if (!a.quiet) PrintPlan(**src, o.prepare, a.prep.given());
  bool show = !a.quiet && !a.json;
  o.progress = ProgressBar(show);
  WarmResult r;
  Status s = Warm(**src, o, &r);
  if (!r.started && r.dir.empty() && s.IsNoSpace()) {
    // Not even room for a new entry: the same outcome as filling up at once.
    std::string msg =
        "cache full: stored 0 of " + std::to_string(r.samples_total) + " samples: " + s.message();
    if (!a.allow_partial) return Fail(msg + "; --allow-partial accepts this", kExitPartial);
    std::cerr << "ssdfeed: " << msg << "\n";
    return 0;
  }
  if (!r.started) return Fail(s.message());
  if (show) Progress(r.samples_visited, r.samples_total, r.seconds, true);
  PrintReport(a, r);
  return Finish(a, r, s);
}

}  // namespace

void AddWarm(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("warm", "Fill a cache entry from a source (resumes if rerun)");
  auto a = std::make_shared<WarmArgs>();
  c->add_option("--source", a->source,
                "Source URI: folder:DIR, tfrecord:GLOB, tar:GLOB, s3://BUCKET/... (a bare DIR "
                "means folder:DIR)")
      ->required();
  a->prep.Add(c);
  a->fields.Add(c);
  a->cache.Add(c, true, true);
  c->add_option("--workers", a->workers, "Threads (default 0: one per core)")
      ->check(AtLeast(0, " (0: one per core)"));
  c->add_option("--on-error", a->on_error, "raise (default) or skip bad samples")
      ->check(CLI::IsMember(EnumNames<OnError>()));
  c->add_option("--skipped-file", a->skipped_file,
                "With --on-error skip: write the skipped samples here (default: stderr)");
  c->add_flag("--allow-partial", a->allow_partial,
              "Exit 0 when the cache filled before every sample was stored (default: exit 3)");
  c->add_flag("--json", a->json, "Print a JSON report");
  c->add_flag("--quiet", a->quiet, "No plan line, no progress bar");
  c->callback([st, a] { st->rc = RunWarm(*a); });
}

}  // namespace ssdfeed::cli
