// ssdfeed warm --source URI: fills a cache entry, resumable, with progress
// (--python MODULE:FACTORY hands over to Python's ssdfeed.cache: see below).
// Says what it will store before it starts, stops early when the cache
// cannot take more, and exits non-zero unless every sample is in (or was
// skipped under --on-error skip, each one named).
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/options.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"
#include "ssdfeed/warm.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

struct WarmArgs {
  std::string source, on_error = "raise", skipped_file;
  std::string python, key;  // --python MODULE:FACTORY: Python's ssdfeed.cache fills
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

// Imports ssdfeed's warm module, or says plainly which interpreter lacks it.
// `python -c` puts the current directory first on sys.path, where anyone who
// can write to it could plant an ssdfeed/ package that would run as this
// user: it goes before any import searches the path (what -P does, which
// needs Python 3.11; this works on every version). ssdfeed._warm puts it back
// for the user's module only, after checking who can write to it.
constexpr const char* kPythonBootstrap = R"(import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
try:
    import ssdfeed._warm
except ImportError as e:
    sys.stderr.write("ssdfeed: warm --python: the ssdfeed Python package is not importable by "
                     "%s (%s); install it into that interpreter or set SSDFEED_PYTHON to one "
                     "that has it\n" % (sys.executable, e))
    sys.exit(2)
sys.exit(sys.modules["ssdfeed._warm"]._main(sys.argv[1:])))";

// ssdfeed.cache datasets are Python objects: the fill runs in Python (the
// interpreter of $SSDFEED_PYTHON, else python3 on PATH), which replaces this
// process so signals and the exit status are its own.
int HandOverToPython(const WarmArgs& a) {
  if (a.prep.given() || !a.fields.fields.empty())
    return Fail(
        "--python fills whatever the dataset returns: prepare options and --field do "
        "not apply",
        kExitUsage);
  const char* env = std::getenv("SSDFEED_PYTHON");
  std::string python = env != nullptr && *env != '\0' ? env : "python3";
  std::vector<std::string> args = {python,   "-c",         kPythonBootstrap, "--python",
                                   a.python, "--on-error", a.on_error};
  if (!a.key.empty()) args.insert(args.end(), {"--key", a.key});
  if (a.workers > 0) args.insert(args.end(), {"--workers", std::to_string(a.workers)});
  if (!a.cache.cache.empty()) args.insert(args.end(), {"--cache", a.cache.cache});
  if (!a.cache.capacity.empty()) args.insert(args.end(), {"--capacity", a.cache.capacity});
  if (a.cache.group_shared) args.emplace_back("--group-shared");
  if (a.json) args.emplace_back("--json");
  if (a.quiet) args.emplace_back("--quiet");
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp(argv[0], argv.data());
  return Fail("--python: cannot run the Python interpreter '" + python + "' (" +
              std::strerror(errno) + "); set SSDFEED_PYTHON to one that has ssdfeed installed");
}

int RunWarmCommand(const WarmArgs& a) {
  if (!a.python.empty()) return HandOverToPython(a);
  if (a.source.empty())
    return Fail("warm needs --source URI or --python MODULE:FACTORY", kExitUsage);
  if (!a.key.empty()) return Fail("--key applies to --python datasets only", kExitUsage);
  return RunWarm(a);
}

}  // namespace

void AddWarm(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("warm", "Fill a cache entry from a source (resumes if rerun)");
  auto a = std::make_shared<WarmArgs>();
  c->add_option("--source", a->source,
                "Source URI: folder:DIR, tfrecord:GLOB, tar:GLOB, s3://BUCKET/... (a bare DIR "
                "means folder:DIR)");
  c->add_option("--python", a->python,
                "MODULE:FACTORY: fill the entry of ssdfeed.cache(FACTORY()), a Python dataset "
                "(runs $SSDFEED_PYTHON, else python3)");
  c->add_option("--key", a->key, "With --python: the dataset's cache key (default: its code)");
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
  c->callback([st, a] { st->rc = RunWarmCommand(*a); });
}

}  // namespace ssdfeed::cli
