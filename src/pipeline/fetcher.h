// SampleFetcher: the one path from a sample id to prepared pixels. A cache
// hit is one read; a miss reads the origin, prepares, stores into the cache
// (while it admits) and serves. Shared by `ssdfeed warm` and the Loader.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "image/pixel_codec.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

// Per-thread buffers; reused so the hot path allocates nothing.
struct FetchScratch {
  std::string cache_buf;
  // Grouped cache reads: two groups, one in flight while the other is used.
  ReadBuffers read_bufs[2];
  std::vector<CacheRead> reads[2];
  EncodedSample encoded;
  Image image;
  PrepareGeometry geometry;
  std::vector<Field> fields;
  std::string field_section;  // CachedSample::fields of a sample from the origin
  std::string stored_fields;  // that section as its record stores it (masks as runs)
  Decoder decoder;
  // The spec's codec: a sample from the origin stored as its bytes (and,
  // for jpeg, served as their decode in `coded`).
  PixelCodecScratch codec;
  std::string stored;
  Image coded;
};

// The geometry the fields of an image-less sample are prepared with: an
// identity that arrays, bytes, labels and classes ignore. Masks and boxes
// need a real image and are refused (CheckFieldsOnly).
inline constexpr PrepareGeometry kFieldsOnlyGeometry{1, 1, 1, 1, 0, 0, 1, 1};
// InvalidArgument naming a mask or boxes field of an image-less sample.
Status CheckFieldsOnly(const std::vector<EncodedField>& fields);

class SampleFetcher {
 public:
  // cache may be null (origin every time). Neither pointer is owned.
  // Counts into stats (not owned; null: a private in-memory block). With
  // time_stages, each cache read, origin read and prepare is timed into its
  // histogram (two clock reads each). env: clock, sleeps and warnings
  // (null: Env::Default()); a fake clock makes the claim wait testable.
  // others_traffic: what the source had read for others (a source shared
  // with earlier loaders) before this fetcher's user opened it; the rest of
  // its traffic, opening included, is counted as this fetcher's.
  SampleFetcher(const Source* source, PrepareSpec spec, CacheEntry* cache, double claim_wait_s,
                StatsPublisher* stats = nullptr, bool time_stages = true, Env* env = nullptr,
                OriginTraffic others_traffic = {});

  // Prepared sample id into *out (pixels point into scratch). Errors name
  // the origin file (and record) and what is wrong.
  Status Fetch(uint64_t id, FetchScratch* scratch, CachedSample* out);

  // On (for a renderer that crops yuv420's planes: SampleRenderer): a
  // yuv420 sample comes back as its planes, pixels null and `stored` its
  // bytes, whether read from the cache or prepared from the origin, so both
  // are rendered the same way. Off (the default): pixels always. Set
  // before the first fetch.
  void ServeYuv420Planes(bool on) { yuv420_planes_ = on && spec_.codec == RecordCodec::kYuv420; }

  // The cache's records for ids[0..n), read together (with direct reads,
  // all in flight at once) into scratch->reads[group]; Finish waits, checks
  // and counts the hits. A read that is not OK is then finished by Resolve.
  struct Group {
    std::unique_ptr<CacheReadBatch> batch;
    int which = 0;
    size_t n = 0;
    double t0 = 0;
  };
  Group StartCachedMany(const uint64_t* ids, size_t n, FetchScratch* scratch, int which);
  void FinishCachedMany(Group* g, FetchScratch* scratch);
  // What Fetch does after a cache read that gave `got` (not OK): wait for
  // another process, or prepare from the origin (repairing a corrupt record).
  Status Resolve(uint64_t id, Status got, FetchScratch* scratch, CachedSample* out);

  // Sample id from the cache only, never the origin: a miss looks again
  // after picking up other processes' records (at most every 20 ms). A hit
  // counts as Fetch's do. NotFound when absent; a corrupt record is dropped
  // from the index, counted and NotFound (the next Fetch prepares it again).
  Status Lookup(uint64_t id, FetchScratch* scratch, CachedSample* out);
  // Stores an image-less sample given by its caller (not read from the
  // origin) as id, its fields prepared and encoded as Fetch's are. Nothing
  // is stored (*stored false) when id is present, the entry no longer
  // admits, or another process holds its claim (that one stores it). A full
  // disk or a failed write only stops admission, as in Fetch; fields no
  // image-less sample may have are InvalidArgument.
  Status Store(uint64_t id, const std::vector<EncodedField>& fields, FetchScratch* scratch,
               bool* stored);

  // The one place these counters live: Loader::stats(), `ssdfeed warm` and
  // the exporter all read them from here.
  StatsPublisher& stats() { return *stats_; }
  const StatsPublisher& stats() const { return *stats_; }
  // Copies the cache's own per-process counters (puts, write errors,
  // capacity refusals, evictions) and its admission state into the stats.
  void SyncCacheCounters();
  const Source* source() const { return source_; }
  CacheEntry* cache() const { return cache_; }

 private:
  // Get from the cache, counting the bytes served; true on success.
  bool GetCached(uint64_t id, FetchScratch* s, CachedSample* out);
  Status TimedGet(uint64_t id, FetchScratch* s, CachedSample* out);
  void CountHit(const CachedSample& out);
  bool WaitForOther(uint64_t id, FetchScratch* s, CachedSample* out);
  Status FromOrigin(uint64_t id, FetchScratch* s, CachedSample* out);
  Status DecodeImage(FetchScratch* s);
  Status PrepareFieldsOf(FetchScratch* s, CachedSample* out);
  Status EncodeSection(const std::vector<EncodedField>& fields, const PrepareGeometry& geometry,
                       FetchScratch* s);
  Status EncodeStored(FetchScratch* s, CachedSample* out);
  Status ServeLossy(FetchScratch* s, CachedSample* out);
  void MaybeRefresh();
  // Adds what the source has read from its origin since the last call
  // (Source::traffic); fallback: the encoded bytes of the sample just read.
  void CountOrigin(uint64_t encoded_bytes);
  int64_t NowUs() const { return env_->MonotonicMicros(); }
  double Seconds() const { return static_cast<double>(env_->MonotonicMicros()) * 1e-6; }

  Env* const env_;
  const Source* source_;
  PrepareSpec spec_;
  CacheEntry* cache_;
  const bool image_less_;  // IsImageLess(*source_): fields only, nothing to decode
  double claim_wait_s_;
  std::unique_ptr<StatsPublisher> own_stats_;
  StatsPublisher* stats_;
  bool time_stages_;
  bool yuv420_planes_ = false;  // ServeYuv420Planes
  std::atomic<int64_t> last_refresh_us_{0};
  // Source::traffic() already counted into stats_.
  std::atomic<uint64_t> origin_bytes_seen_, origin_requests_seen_;
};

}  // namespace ssdfeed
