// The warm-up's worker pool: each worker takes the next id (from a random
// start, so concurrent warmers of one entry rarely collide), skips what the
// entry holds and fetches the rest through the SampleFetcher, which stores
// it. The calling thread only reports progress.
#include "ssdfeed/warm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "pipeline/origin_index.h"
#include "pipeline/warm_entry.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/metrics.h"

namespace ssdfeed {

namespace {

// Everything the workers share.
struct WarmRun {
  const Source* src = nullptr;
  CacheEntry* entry = nullptr;
  SampleFetcher* fetcher = nullptr;
  OnError on_error = OnError::kRaise;
  std::vector<uint64_t> ids;  // empty: every id below n
  uint64_t n = 0, start = 0;
  std::atomic<uint64_t> next{0}, done{0}, errors{0};
  std::atomic<bool> cache_full{false}, stop{false};
  std::mutex mu;
  Status first_error;
  std::vector<WarmSkipped> skipped;

  bool stopping() const {
    return stop || cache_full || (on_error == OnError::kRaise && errors > 0);
  }
  void Work() {
    FetchScratch scratch;
    for (uint64_t k; !stopping() && (k = next.fetch_add(1)) < n;) {
      uint64_t id = ids.empty() ? (start + k) % n : ids[(start + k) % n];
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
    if (first_error.ok()) first_error = s;
    if (on_error == OnError::kSkip) skipped.push_back({id, src->Describe(id), s.message()});
  }
};

// Tells the source which samples this pass will read (the entry's misses),
// so a bucket's shards are fetched in runs, not one request per sample.
void PlanMisses(const WarmRun& r) {
  std::vector<uint64_t> missing;
  for (uint64_t k = 0; k < r.n; ++k) {
    uint64_t id = r.ids.empty() ? k : r.ids[k];
    if (!r.entry->Contains(id)) missing.push_back(id);
  }
  std::sort(missing.begin(), missing.end());
  r.src->PlanReads(missing);
}

Env* EnvOf(const WarmOptions& o) { return o.cache.env ? o.cache.env : Env::Default(); }

// Seconds on the Env's monotonic clock (a test's fake clock too).
double Now(Env* env) { return static_cast<double>(env->MonotonicMicros()) * 1e-6; }

// Runs the workers to the end (or a stop), reporting progress meanwhile.
void RunWorkers(WarmRun& r, const WarmOptions& o, WarmResult* out) {
  Env* env = EnvOf(o);
  int workers = o.workers > 0 ? o.workers : DefaultWorkers(env);
  double t0 = Now(env);
  auto report = [&] {
    if (o.progress && !o.progress({r.done, r.n, Now(env) - t0})) {
      r.stop = true;
      out->interrupted = true;
    }
  };
  report();  // a first report before any work: a caller can stop it there
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) ts.emplace_back([&r] { r.Work(); });
  while (r.done < r.n && !r.stopping()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    report();
  }
  for (auto& t : ts) t.join();
  out->seconds = Now(env) - t0;
}

// Records the skipped samples in the entry, so listings say "complete (N
// skipped)" instead of "partial" for good; only after a whole pass (a
// partial list would hide samples never tried).
void WriteSkippedList(const WarmOptions& o, WarmResult* r) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : r->skipped)
    list.push_back({{"id", s.id}, {"sample", s.sample}, {"error", s.error}});
  nlohmann::json doc = {{"samples_total", r->samples_total}, {"skipped", list}};
  Env* env = EnvOf(o);
  uint32_t mode = o.cache.group_shared ? 0660 : 0600;
  Status s = env->WriteFileAtomic(JoinPath(r->dir, "skipped.json"), doc.dump(1) + "\n", mode);
  if (!s.ok()) r->warnings.push_back(s.message());
}

void Collect(WarmRun& r, SampleFetcher& fetcher, WarmResult* out) {
  StatsSnapshot fc = fetcher.stats().Snapshot();
  out->samples_visited = std::min(r.done.load(), r.n);
  out->samples_present = r.entry->samples_present();
  out->prepared = fc[Ctr::kPrepared];
  out->cache_hits = fc[Ctr::kCacheHits];
  out->claim_waits = fc[Ctr::kClaimWaits];
  out->bytes_prepared = fc[Ctr::kCacheMissBytes];
  out->origin_bytes = fc[Ctr::kOriginBytes];
  out->origin_requests = fc[Ctr::kOriginRequests];
  out->errors = r.errors;
  out->cache_full = r.cache_full;
  out->warning = r.entry->warning();
  out->skipped = std::move(r.skipped);
  std::sort(out->skipped.begin(), out->skipped.end(),
            [](const WarmSkipped& x, const WarmSkipped& y) { return x.id < y.id; });
}

// WarmOptions::ids must name samples of the source.
Status CheckIds(const Source& source, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids)
    if (id >= source.size())
      return Status::InvalidArgument("warm: sample id " + std::to_string(id) + " is past the " +
                                     std::to_string(source.size()) + " samples of " + source.uri());
  return Status::OK();
}

}  // namespace

Status Warm(const Source& source, const WarmOptions& o, WarmResult* out) {
  *out = WarmResult{};
  out->spec = o.prepare.Canonical();
  std::string index_warning;
  SSDFEED_RETURN_IF_ERROR(LoadOrBuildIndex(source, o.cache, &index_warning));
  if (!index_warning.empty()) out->warnings.push_back(index_warning);
  out->samples_total = source.size();
  SSDFEED_RETURN_IF_ERROR(CheckIds(source, o.ids));  // before an entry is made for nothing
  auto entry = CacheEntry::Open(o.cache, MakeEntryKey(source, o.source, o.prepare));
  if (!entry.ok()) {
    out->cache_full = entry.status().IsNoSpace();
    return entry.status();
  }
  Status st = WarmEntry(source, o, entry->get(), out);
  if (!index_warning.empty()) out->warnings.insert(out->warnings.begin(), index_warning);
  return st;
}

Status WarmEntry(const Source& source, const WarmOptions& o, CacheEntry* entry, WarmResult* out) {
  *out = WarmResult{};
  out->spec = o.prepare.Canonical();
  out->samples_total = source.size();
  SSDFEED_RETURN_IF_ERROR(CheckIds(source, o.ids));
  out->dir = entry->dir();
  std::string index_warning;
  StoreIndex(source, *entry, o.cache, &index_warning);
  if (!index_warning.empty()) out->warnings.push_back(index_warning);
  if (entry->read_only())
    return Status::InvalidArgument(out->dir + ": owned by another user, read only");
  // Published like a Loader's, so serve-metrics counts warm-up jobs too.
  std::string stats_warning;
  auto stats = StatsPublisher::Create(o.cache.env, o.cache, Basename(out->dir), &stats_warning);
  if (!stats_warning.empty()) out->warnings.push_back(stats_warning);
  SampleFetcher fetcher(&source, o.prepare, entry, o.cache.claim_wait_seconds, stats.get());
  WarmRun r;
  r.src = &source;
  r.entry = entry;
  r.fetcher = &fetcher;
  r.on_error = o.source.on_error;
  r.ids = o.ids;
  r.n = o.ids.empty() ? source.size() : o.ids.size();
  r.start = r.n ? std::random_device{}() % r.n : 0;
  PlanMisses(r);
  out->started = true;
  RunWorkers(r, o, out);
  Status synced = entry->Sync();
  Collect(r, fetcher, out);
  if (!r.first_error.ok() && r.on_error == OnError::kRaise) return r.first_error;
  // A share (ids) is not a whole pass: its skipped list would hide the rest.
  bool pass_complete = r.done >= r.n && !r.cache_full && !out->interrupted && o.ids.empty();
  if (!out->skipped.empty() && pass_complete) WriteSkippedList(o, out);
  return synced;
}

Status Warm(const std::string& uri, const WarmOptions& o, WarmResult* out) {
  SourceOptions so = o.source;
  so.defer_index = true;  // Warm takes the index from the cache when it can
  auto src = OpenSource(uri, so);
  if (!src.ok()) {
    *out = WarmResult{};
    return src.status();
  }
  return Warm(**src, o, out);
}

}  // namespace ssdfeed
