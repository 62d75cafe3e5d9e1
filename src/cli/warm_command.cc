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
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/options.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/entry_key.h"
#include "ssdfeed/fetcher.h"
#include "ssdfeed/plan.h"
#include "ssdfeed/units.h"

namespace ssdfeed::cli {

namespace {

struct WarmArgs {
  std::string source, on_error = "raise", skipped_file;
  PrepareArgs prep;
  CacheArgs cache;
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

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
                 static_cast<double>(e.pixel_bytes) / e.origin_bytes);
  std::fprintf(stderr, "\n");
  if (!spec_given)
    std::fprintf(stderr,
                 "ssdfeed: no prepare options given, so samples are cached at full size; pass "
                 "--resize-short 256 (or --resize HxW, --center-crop HxW) to cache smaller "
                 "images\n");
}

struct Skipped {
  uint64_t id;
  std::string sample, error;
};

// Everything the workers share.
struct WarmRun {
  Source* src = nullptr;
  CacheEntry* entry = nullptr;
  SampleFetcher* fetcher = nullptr;
  OnError on_error = OnError::kRaise;
  std::string spec;  // PrepareSpec::Canonical()
  uint64_t n = 0, start = 0;
  std::atomic<uint64_t> next{0}, done{0}, errors{0};
  std::atomic<bool> cache_full{false};
  std::mutex mu;
  std::string first_error;
  std::vector<Skipped> skipped;

  bool stopping() const {
    return g_interrupted || cache_full || (on_error == OnError::kRaise && errors > 0);
  }
  void Work() {
    FetchScratch scratch;
    for (uint64_t k; !stopping() && (k = next.fetch_add(1)) < n;) {
      uint64_t id = (start + k) % n;
      if (!entry->Contains(id)) Fetch(id, &scratch);
      done++;
    }
  }
  void Fetch(uint64_t id, FetchScratch* scratch) {
    // Preparing what cannot be stored would only burn CPU.
    if (!entry->admitting()) {
      cache_full = true;
      return;
    }
    CachedSample out;
    Status s = fetcher->Fetch(id, scratch, &out);
    if (s.ok()) return;
    errors++;
    std::lock_guard<std::mutex> l(mu);
    if (first_error.empty()) first_error = s.message();
    if (on_error == OnError::kSkip) skipped.push_back({id, src->Describe(id), s.message()});
  }
};

// Names each skipped sample (stderr or --skipped-file) and records the list
// in the entry, so `cache ls` says "complete (N skipped)" instead of
// "partial" for good.
int ReportSkipped(const WarmArgs& a, WarmRun& r, bool pass_complete, mode_t mode) {
  std::sort(r.skipped.begin(), r.skipped.end(),
            [](const Skipped& x, const Skipped& y) { return x.id < y.id; });
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : r.skipped)
    list.push_back({{"id", s.id}, {"sample", s.sample}, {"error", s.error}});
  if (!a.skipped_file.empty()) {
    std::ofstream f(a.skipped_file);
    for (const auto& s : r.skipped) f << s.sample << "\t" << s.error << "\n";
    if (!f.good()) return Fail("--skipped-file " + a.skipped_file + ": cannot write");
  } else {
    for (const auto& s : r.skipped) std::cerr << "ssdfeed: skipped " << s.error << "\n";
  }
  std::cerr << "ssdfeed: skipped " << Plural(r.skipped.size(), "bad sample", "bad samples")
            << (a.skipped_file.empty() ? "" : ", listed in " + a.skipped_file) << "\n";
  if (!pass_complete) return 0;
  nlohmann::json doc = {{"samples_total", r.n}, {"skipped", list}};
  Status s = Env::Default()->WriteFileAtomic(JoinPath(r.entry->dir(), "skipped.json"),
                                             doc.dump(1) + "\n", mode);
  if (!s.ok()) std::cerr << "ssdfeed: warning: " << s.message() << "\n";
  return 0;
}

void PrintReport(const WarmArgs& a, WarmRun& r, double secs) {
  StatsSnapshot fc = r.fetcher->stats().Snapshot();
  uint64_t present = r.entry->samples_present();
  if (a.json) {
    std::cout << nlohmann::json{{"entry", Basename(r.entry->dir())},
                                {"dir", r.entry->dir()},
                                {"spec", r.spec},
                                {"samples_total", r.n},
                                {"samples_present", present},
                                {"prepared", fc[Ctr::kPrepared]},
                                {"cache_hits", fc[Ctr::kCacheHits]},
                                {"claim_waits", fc[Ctr::kClaimWaits]},
                                {"errors", r.errors.load()},
                                {"skipped", r.skipped.size()},
                                {"cache_full", r.cache_full.load()},
                                {"interrupted", g_interrupted.load()},
                                {"seconds", std::round(secs * 10) / 10},
                                {"warning", r.entry->warning()}}
                     .dump()
              << "\n";
    return;
  }
  char t[32];
  std::snprintf(t, sizeof t, "%.1f", secs);
  std::cout << "entry " << Basename(r.entry->dir()) << ": " << present << "/" << r.n
            << " samples present, " << fc[Ctr::kPrepared] << " prepared in " << t << " s\n";
}

int RunWarm(const WarmArgs& a) {
  PrepareSpec spec;
  CacheOptions copts;
  SourceOptions so;
  so.on_error = a.on_error == "skip" ? OnError::kSkip : OnError::kRaise;
  if (Status s = a.prep.ToSpec(&spec); !s.ok()) return Fail(s.message(), kExitUsage);
  if (Status s = a.cache.ToOptions(&copts); !s.ok()) return Fail(s.message(), kExitUsage);
  CatchSigint();  // before the plan line, so a Ctrl-C after it is always handled
  auto src = OpenSource(a.source, so);
  if (!src.ok()) return Fail(src.status().message());
  if (!a.quiet) PrintPlan(**src, spec, a.prep.given());
  auto entry = CacheEntry::Open(copts, MakeEntryKey(**src, so, spec));
  if (!entry.ok() && entry.status().IsNoSpace()) {
    // Not even room for a new entry: the same outcome as filling up at once.
    std::string msg = "cache full: stored 0 of " + std::to_string((*src)->size()) +
                      " samples: " + entry.status().message();
    if (!a.allow_partial) return Fail(msg + "; --allow-partial accepts this", kExitPartial);
    std::cerr << "ssdfeed: " << msg << "\n";
    return 0;
  }
  if (!entry.ok()) return Fail(entry.status().message());
  if ((*entry)->read_only()) return Fail((*entry)->dir() + ": owned by another user, read only");
  // Published like a Loader's, so serve-metrics counts warm-up jobs too.
  std::string stats_warning;
  auto stats = StatsPublisher::Create(copts.env, copts, Basename((*entry)->dir()), &stats_warning);
  if (!stats_warning.empty() && !a.quiet)
    std::cerr << "ssdfeed: warning: " << stats_warning << "\n";
  SampleFetcher fetcher(src->get(), spec, entry->get(), copts.claim_wait_seconds, stats.get());
  WarmRun r;
  r.src = src->get();
  r.entry = entry->get();
  r.fetcher = &fetcher;
  r.on_error = so.on_error;
  r.spec = spec.Canonical();
  r.n = (*src)->size();
  // Each warmer starts at a random point so concurrent ones rarely collide.
  r.start = r.n ? std::random_device{}() % r.n : 0;
  int workers = a.workers > 0 ? a.workers : DefaultWorkers();
  double t0 = Now();
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) ts.emplace_back([&r] { r.Work(); });
  bool tty = ::isatty(2), show = !a.quiet && !a.json;
  double last_print = 0;
  while (r.done < r.n && !r.stopping()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    double el = Now() - t0;
    if (show && (tty ? el - last_print > 0.25 : el - last_print > 5)) {
      Progress(r.done, r.n, el, false);
      last_print = el;
    }
  }
  for (auto& t : ts) t.join();
  Status synced = (*entry)->Sync();
  double secs = Now() - t0;
  if (show) Progress(r.done, r.n, secs, true);
  PrintReport(a, r, secs);
  uint64_t present = (*entry)->samples_present();
  if (!(*entry)->warning().empty() && !a.json)
    std::cerr << "ssdfeed: warning: " << (*entry)->warning() << "\n";
  if (g_interrupted)
    return Fail("interrupted: " + std::to_string(present) + "/" + std::to_string(r.n) +
                    " samples stored; rerun the same command to resume",
                kExitInterrupted);
  if (r.errors > 0 && so.on_error == OnError::kRaise) return Fail(r.first_error);
  bool pass_complete = r.done >= r.n && !r.cache_full;
  if (!r.skipped.empty()) {
    mode_t mode = copts.group_shared ? 0660 : 0600;
    if (int rc = ReportSkipped(a, r, pass_complete, mode); rc != 0) return rc;
  }
  if (!synced.ok()) return Fail(synced.message());
  if (present + r.skipped.size() < r.n) {
    std::string msg = "cache full: stored " + std::to_string(present) + " of " +
                      std::to_string(r.n) + " samples in " + (*entry)->dir() +
                      " (free space or raise --capacity, then rerun to resume)";
    if (!a.allow_partial) return Fail(msg + "; --allow-partial accepts this", kExitPartial);
    std::cerr << "ssdfeed: " << msg << "\n";
  }
  return 0;
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
  a->cache.Add(c, true, true);
  c->add_option("--workers", a->workers, "Threads (default 0: one per core)")
      ->check(AtLeast(0, " (0: one per core)"));
  c->add_option("--on-error", a->on_error, "raise (default) or skip bad samples")
      ->check(CLI::IsMember({"raise", "skip"}));
  c->add_option("--skipped-file", a->skipped_file,
                "With --on-error skip: write the skipped samples here (default: stderr)");
  c->add_flag("--allow-partial", a->allow_partial,
              "Exit 0 when the cache filled before every sample was stored (default: exit 3)");
  c->add_flag("--json", a->json, "Print a JSON report");
  c->add_flag("--quiet", a->quiet, "No plan line, no progress bar");
  c->callback([st, a] { st->rc = RunWarm(*a); });
}

}  // namespace ssdfeed::cli
