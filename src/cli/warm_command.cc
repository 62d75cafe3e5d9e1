// ssdfeed warm --source URI: fills a cache entry, resumable, with progress.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/options.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"

namespace ssdfeed::cli {

namespace {

struct WarmArgs {
  std::string source, on_error = "raise";
  PrepareArgs prep;
  CacheArgs cache;
  int workers = 0;
  bool json = false, quiet = false;
};

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

int RunWarm(const WarmArgs& a) {
  PrepareSpec spec;
  CacheOptions copts;
  SourceOptions so;
  so.on_error = a.on_error == "skip" ? OnError::kSkip : OnError::kRaise;
  if (Status s = a.prep.ToSpec(&spec); !s.ok()) return Fail(s.message(), 2);
  if (Status s = a.cache.ToOptions(&copts); !s.ok()) return Fail(s.message(), 2);
  auto src = OpenSource(a.source, so);
  if (!src.ok()) return Fail(src.status().message());
  auto entry = CacheEntry::Open(copts, MakeEntryKey(**src, so, spec));
  if (!entry.ok()) return Fail(entry.status().message());
  if ((*entry)->read_only()) return Fail((*entry)->dir() + ": owned by another user, read only");
  // Published like a Loader's, so serve-metrics counts warm-up jobs too.
  std::string stats_warning;
  auto stats = StatsPublisher::Create(copts.env, copts, Basename((*entry)->dir()), &stats_warning);
  if (!stats_warning.empty() && !a.quiet)
    std::cerr << "ssdfeed: warning: " << stats_warning << "\n";
  SampleFetcher fetcher(src->get(), spec, entry->get(), copts.claim_wait_seconds, stats.get());
  uint64_t n = (*src)->size();
  // Each warmer starts at a random point so concurrent ones rarely collide.
  uint64_t start = std::random_device{}() % n;
  std::atomic<uint64_t> next{0}, done{0}, errors{0};
  std::mutex err_mu;
  std::string first_error;
  int workers = a.workers > 0 ? a.workers : static_cast<int>(std::thread::hardware_concurrency());
  double t0 = Now();
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) {
    ts.emplace_back([&] {
      FetchScratch scratch;
      for (uint64_t k; (k = next.fetch_add(1)) < n;) {
        uint64_t id = (start + k) % n;
        CachedSample out;
        Status s = (*entry)->Contains(id) ? Status::OK() : fetcher.Fetch(id, &scratch, &out);
        if (!s.ok()) {
          errors++;
          std::lock_guard<std::mutex> l(err_mu);
          if (first_error.empty()) first_error = s.message();
          if (so.on_error == OnError::kRaise) next = n;  // stop everyone
        }
        done++;
      }
    });
  }
  bool tty = ::isatty(2);
  double last_print = 0;
  while (done < n && !(so.on_error == OnError::kRaise && errors > 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    double el = Now() - t0;
    if (!a.quiet && !a.json && (tty ? el - last_print > 0.25 : el - last_print > 5)) {
      Progress(done, n, el, false);
      last_print = el;
    }
  }
  for (auto& t : ts) t.join();
  Status synced = (*entry)->Sync();
  double secs = Now() - t0;
  if (!a.quiet && !a.json) Progress(done, n, secs, true);
  StatsSnapshot fc = fetcher.stats().Snapshot();
  uint64_t present = (*entry)->samples_present();
  if (a.json) {
    std::cout << nlohmann::json{{"entry", Basename((*entry)->dir())},
                                {"dir", (*entry)->dir()},
                                {"samples_total", n},
                                {"samples_present", present},
                                {"prepared", fc[Ctr::kPrepared]},
                                {"cache_hits", fc[Ctr::kCacheHits]},
                                {"claim_waits", fc[Ctr::kClaimWaits]},
                                {"errors", errors.load()},
                                {"seconds", secs},
                                {"warning", (*entry)->warning()}}
                     .dump()
              << "\n";
  } else {
    std::cout << "entry " << Basename((*entry)->dir()) << ": " << present << "/" << n
              << " samples present, " << fc[Ctr::kPrepared] << " prepared in " << secs << " s\n";
  }
  if (!(*entry)->warning().empty() && !a.json)
    std::cerr << "ssdfeed: warning: " << (*entry)->warning() << "\n";
  if (errors > 0 && so.on_error == OnError::kRaise) return Fail(first_error);
  if (errors > 0)
    std::cerr << "ssdfeed: skipped " << errors << " bad samples; first: " << first_error << "\n";
  if (!synced.ok()) return Fail(synced.message());
  return 0;
}

}  // namespace

void AddWarm(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("warm", "Fill a cache entry from a source (resumes if rerun)");
  auto a = std::make_shared<WarmArgs>();
  c->add_option("--source", a->source, "Source URI: folder:DIR, tfrecord:GLOB, tar:GLOB")
      ->required();
  a->prep.Add(c);
  a->cache.Add(c, true);
  c->add_option("--workers", a->workers, "Threads (default: one per core)");
  c->add_option("--on-error", a->on_error, "raise or skip bad samples")
      ->check(CLI::IsMember({"raise", "skip"}));
  c->add_flag("--json", a->json, "Print a JSON report");
  c->add_flag("--quiet", a->quiet, "No progress bar");
  c->callback([st, a] { st->rc = RunWarm(*a); });
}

}  // namespace ssdfeed::cli
