// SampleFetcher: the one path from a sample id to prepared pixels. A cache
// hit is one read; a miss reads the origin, prepares, stores into the cache
// (while it admits) and serves. Shared by `ssdfeed warm` and the Loader.
#pragma once

#include <atomic>
#include <string>

#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

// Per-thread buffers; reused so the hot path allocates nothing.
struct FetchScratch {
  std::string cache_buf;
  EncodedSample encoded;
  Image image;
  Decoder decoder;
};

struct FetchCounters {
  std::atomic<uint64_t> cache_hits{0}, cache_misses{0};
  std::atomic<uint64_t> cache_bytes{0};   // prepared bytes served from the cache
  std::atomic<uint64_t> origin_bytes{0};  // encoded bytes read from the origin
  std::atomic<uint64_t> prepared{0};      // samples decoded + prepared here
  std::atomic<uint64_t> decode_errors{0};
  std::atomic<uint64_t> corrupt_records{0};  // cache records that failed checks
  std::atomic<uint64_t> claim_waits{0};      // times we waited for another process
};

class SampleFetcher {
 public:
  // cache may be null (origin every time). Neither pointer is owned.
  SampleFetcher(const Source* source, PrepareSpec spec, CacheEntry* cache, double claim_wait_s);

  // Prepared sample id into *out (pixels point into scratch). Errors name
  // the origin file (and record) and what is wrong.
  Status Fetch(uint64_t id, FetchScratch* scratch, CachedSample* out);

  FetchCounters& counters() { return counters_; }
  const Source* source() const { return source_; }
  CacheEntry* cache() const { return cache_; }

 private:
  // Get from the cache, counting the bytes served; true on success.
  bool GetCached(uint64_t id, FetchScratch* s, CachedSample* out);
  bool WaitForOther(uint64_t id, FetchScratch* s, CachedSample* out);
  Status FromOrigin(uint64_t id, FetchScratch* s, CachedSample* out);
  void MaybeRefresh();

  const Source* source_;
  PrepareSpec spec_;
  CacheEntry* cache_;
  double claim_wait_s_;
  FetchCounters counters_;
  std::atomic<int64_t> last_refresh_us_{0};
};

}  // namespace ssdfeed
