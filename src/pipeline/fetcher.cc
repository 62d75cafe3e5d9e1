#include "pipeline/fetcher.h"

#include <chrono>
#include <thread>

namespace ssdfeed {

namespace {

int64_t NowUs() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SampleFetcher::SampleFetcher(const Source* source, PrepareSpec spec, CacheEntry* cache,
                             double claim_wait_s)
    : source_(source), spec_(spec), cache_(cache), claim_wait_s_(claim_wait_s) {}

void SampleFetcher::MaybeRefresh() {
  // Other processes' new records are picked up at most every 20 ms.
  int64_t now = NowUs(), last = last_refresh_us_.load();
  if (now - last < 20000 || !last_refresh_us_.compare_exchange_strong(last, now)) return;
  cache_->Refresh();
}

bool SampleFetcher::GetCached(uint64_t id, FetchScratch* s, CachedSample* out) {
  if (!cache_->Get(id, &s->cache_buf, out).ok()) return false;
  counters_.cache_bytes += out->bytes();
  return true;
}

Status SampleFetcher::Fetch(uint64_t id, FetchScratch* s, CachedSample* out) {
  if (cache_ == nullptr) return FromOrigin(id, s, out);
  Status st = cache_->Get(id, &s->cache_buf, out);
  if (st.ok()) {
    counters_.cache_hits++;
    counters_.cache_bytes += out->bytes();
    return st;
  }
  if (st.IsCorruption()) {
    // Counted and dropped from the index by Get; re-prepared below (repair).
    counters_.corrupt_records++;
    std::fprintf(stderr, "ssdfeed: warning: %s; repairing from the origin\n", st.message().c_str());
  }
  if (st.IsNotFound()) {
    MaybeRefresh();
    if (GetCached(id, s, out)) {
      counters_.cache_hits++;
      return Status::OK();
    }
  }
  counters_.cache_misses++;
  bool admit = cache_->admitting();
  if (admit && !cache_->TryClaim(id)) {
    if (WaitForOther(id, s, out)) return Status::OK();
  } else if (admit) {
    // Another process may have stored it and let go of its claim since our
    // last refresh: one more look saves preparing it twice.
    cache_->Refresh();
    if (GetCached(id, s, out)) {
      cache_->ReleaseClaim(id);
      return Status::OK();
    }
  }
  st = FromOrigin(id, s, out);
  if (st.ok() && admit) {
    // A full disk or capacity only stops admission; training goes on.
    (void)cache_->Put(id, out->label, out->pixels, out->height, out->width, out->channels);
  }
  if (admit) cache_->ReleaseClaim(id);
  return st;
}

bool SampleFetcher::WaitForOther(uint64_t id, FetchScratch* s, CachedSample* out) {
  counters_.claim_waits++;
  int64_t deadline = NowUs() + static_cast<int64_t>(claim_wait_s_ * 1e6);
  while (NowUs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    cache_->Refresh();
    if (GetCached(id, s, out)) return true;
    if (cache_->TryClaim(id)) return false;  // its preparer died or gave up
  }
  return false;  // bounded: prepare it ourselves
}

Status SampleFetcher::FromOrigin(uint64_t id, FetchScratch* s, CachedSample* out) {
  SSDFEED_RETURN_IF_ERROR(source_->Read(id, &s->encoded));
  counters_.origin_bytes += s->encoded.bytes.size();
  Status st = s->decoder.DecodeAndPrepare(s->encoded.bytes, spec_, &s->image);
  if (!st.ok()) {
    counters_.decode_errors++;
    return st.WithContext(source_->Describe(id));
  }
  counters_.prepared++;
  out->pixels = s->image.pixels.data();
  out->height = s->image.height;
  out->width = s->image.width;
  out->channels = s->image.channels;
  out->label = s->encoded.label;
  return Status::OK();
}

}  // namespace ssdfeed
