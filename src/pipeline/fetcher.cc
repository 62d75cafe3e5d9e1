#include "pipeline/fetcher.h"

#include <algorithm>

#include "cache/capacity.h"
#include "cache/field_section.h"
#include "image/field_prepare.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"
#include "util/stage_clock.h"

namespace ssdfeed {

Status CheckFieldsOnly(const std::vector<EncodedField>& fields) {
  for (const EncodedField& f : fields)
    if (f.kind == FieldKind::kMask || f.kind == FieldKind::kBoxes ||
        f.kind == FieldKind::kInstanceMasks)
      return Status::InvalidArgument("field '" + f.name + "' (" + EnumName(f.kind) +
                                     ") follows an image, and this source has none");
  return Status::OK();
}

// The sample's image, prepared into s->image; an image-less source's is
// 0x0x0, its pixels still not null (records copy them with memcpy).
Status SampleFetcher::DecodeImage(FetchScratch* s) {
  if (!image_less_)
    return s->decoder.DecodeAndPrepare(s->encoded.bytes, spec_, &s->image, &s->geometry);
  s->image.Reset(0, 0, 0);
  s->image.pixels.reserve(1);
  s->geometry = kFieldsOnlyGeometry;
  return CheckFieldsOnly(s->encoded.fields);
}

SampleFetcher::SampleFetcher(const Source* source, PrepareSpec spec, CacheEntry* cache,
                             double claim_wait_s, StatsPublisher* stats, bool time_stages, Env* env,
                             OriginTraffic others_traffic)
    : env_(env != nullptr ? env : Env::Default()),
      source_(source),
      spec_(spec),
      cache_(cache),
      image_less_(source != nullptr && IsImageLess(*source)),
      claim_wait_s_(claim_wait_s),
      own_stats_(stats == nullptr ? StatsPublisher::InMemory() : nullptr),
      stats_(stats == nullptr ? own_stats_.get() : stats),
      time_stages_(time_stages),
      origin_bytes_seen_(others_traffic.bytes),
      origin_requests_seen_(others_traffic.requests) {
  if (cache_ != nullptr) SyncCacheCounters();
  // What opening the source cost (listing, index reads) is this job's too.
  if (source_ != nullptr) CountOrigin(0);
}

void SampleFetcher::SyncCacheCounters() {
  CacheCounters& c = cache_->counters();
  for (const auto& k : kCounters) {
    auto member = kCacheCounterOf[static_cast<size_t>(k.slot)];
    if (member != nullptr) stats_->Set(k.slot, (c.*member).load(std::memory_order_relaxed));
  }
  stats_->Set(Ctr::kCacheLockTimeouts, CapacityLockTimeouts());  // this process's
  stats_->SetAdmission(cache_->admission());
}

// The spec's codec's bytes of a sample prepared from the origin, in
// out->stored (a lossy codec's are made already, by ServeLossy).
Status SampleFetcher::EncodeStored(FetchScratch* s, CachedSample* out) {
  // Masks are stored as runs: a flat-region mask is a fraction of its bytes
  // to read and checksum on every warm epoch. The sample in hand keeps its
  // raw section (renders read either).
  if (!out->fields.empty() && out->fields.data() == s->field_section.data()) {
    std::vector<FieldCodec> codecs = cache_format::PreparedCodecs(s->fields);
    if (std::find(codecs.begin(), codecs.end(), FieldCodec::kRle) != codecs.end()) {
      s->stored_fields.clear();
      SSDFEED_RETURN_IF_ERROR(cache_format::EncodeFields(s->fields, &s->stored_fields, &codecs));
      out->fields = s->stored_fields;
    }
  }
  out->codec = spec_.codec;
  if (spec_.codec == RecordCodec::kRaw || !out->stored.empty()) return Status::OK();
  s->stored.clear();
  SSDFEED_RETURN_IF_ERROR(EncodePixels(spec_.codec, spec_.quality, out->pixels, out->height,
                                       out->width, out->channels, &s->stored, &s->codec));
  out->stored = s->stored;
  return Status::OK();
}

// jpeg is lossy: a sample from the origin is served as the decode of its
// stored bytes, the very pixels every later hit serves, so an epoch's batch
// does not depend on which samples were cached (or admitted) before.
Status SampleFetcher::ServeLossy(FetchScratch* s, CachedSample* out) {
  if (!IsLossy(spec_.codec) || out->bytes() == 0) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(EncodeStored(s, out));
  if (yuv420_planes_) {  // rendered from the planes, as a hit is
    out->pixels = nullptr;
    return Status::OK();
  }
  s->coded.Reset(out->height, out->width, out->channels);
  SSDFEED_RETURN_IF_ERROR(DecodePixels(spec_.codec, out->stored, out->height, out->width,
                                       out->channels, s->coded.pixels.data(), &s->codec));
  out->pixels = s->coded.pixels.data();
  return Status::OK();
}

void SampleFetcher::MaybeRefresh() {
  // Other processes' new records are picked up at most every 20 ms.
  int64_t now = NowUs(), last = last_refresh_us_.load();
  if (now - last < 20000 || !last_refresh_us_.compare_exchange_strong(last, now)) return;
  // A failed refresh only hides other processes' newest records until the
  // next one: those samples are prepared here instead, never served wrong.
  cache_->Refresh().IgnoreError();
}

Status SampleFetcher::TimedGet(uint64_t id, FetchScratch* s, CachedSample* out) {
  auto get = [&] {
    return yuv420_planes_ ? cache_->GetStored(id, &s->cache_buf, out)
                          : cache_->Get(id, &s->cache_buf, out);
  };
  if (!time_stages_) return get();
  double t0 = Seconds();
  Status st = get();
  stats_->Observe(Hist::kReadCache, Seconds() - t0);
  MarkStage(Tmr::kCacheRead);
  return st;
}

void SampleFetcher::CountHit(const CachedSample& out) {
  stats_->Add(Ctr::kCacheHits);
  stats_->Add(Ctr::kCacheHitBytes, out.payload_bytes());
}

bool SampleFetcher::GetCached(uint64_t id, FetchScratch* s, CachedSample* out) {
  if (!TimedGet(id, s, out).ok()) return false;
  CountHit(*out);
  return true;
}

Status SampleFetcher::Fetch(uint64_t id, FetchScratch* s, CachedSample* out) {
  if (cache_ == nullptr) return FromOrigin(id, s, out);
  // Each sample counts once: a hit when it is served from the cache (at
  // once, after a refresh, or after another process prepared it), a miss
  // when it comes from the origin.
  Status st = TimedGet(id, s, out);
  if (st.ok()) {
    CountHit(*out);
    return st;
  }
  return Resolve(id, st, s, out);
}

SampleFetcher::Group SampleFetcher::StartCachedMany(const uint64_t* ids, size_t n, FetchScratch* s,
                                                    int which) {
  std::vector<CacheRead>& reads = s->reads[which];
  reads.resize(n);
  for (size_t i = 0; i < n; ++i) reads[i] = CacheRead{ids[i], {}, Status::OK(), yuv420_planes_};
  Group g;
  g.which = which;
  g.n = n;
  g.t0 = time_stages_ ? Seconds() : 0;
  g.batch = cache_->StartGetMany(reads.data(), n, &s->read_bufs[which]);
  return g;
}

void SampleFetcher::FinishCachedMany(Group* g, FetchScratch* s) {
  g->batch->Finish();
  MarkStage(Tmr::kCacheRead);
  // One clock pair for the group: each read is charged its share.
  double each = time_stages_ ? (Seconds() - g->t0) / static_cast<double>(g->n) : 0;
  for (CacheRead& r : s->reads[g->which]) {
    if (time_stages_) stats_->Observe(Hist::kReadCache, each);
    if (r.status.ok()) CountHit(r.sample);
  }
}

Status SampleFetcher::Resolve(uint64_t id, Status st, FetchScratch* s, CachedSample* out) {
  if (cache_ == nullptr) return FromOrigin(id, s, out);
  bool corrupt = st.IsCorruption();
  if (corrupt) {
    // Dropped from the index by Get; re-prepared below (repair).
    stats_->Add(Ctr::kCorruptRecords);
    env_->Warn(st.message() + "; repairing from the origin");
  }
  if (st.IsNotFound()) {
    MaybeRefresh();
    if (GetCached(id, s, out)) return Status::OK();
  }
  bool admit = cache_->admitting(), released = false;
  if (admit && !cache_->TryClaim(id, &released)) {
    if (WaitForOther(id, s, out)) return Status::OK();
  } else if (admit && released) {
    // Another process may have stored it and let go of its claim since our
    // last refresh: one more look saves preparing it twice (best effort, as
    // in MaybeRefresh). A claim nobody ever let go of needs no look: the
    // directory listing it takes cost 1.5% of a cold epoch's CPU.
    cache_->Refresh().IgnoreError();
    if (GetCached(id, s, out)) {
      cache_->ReleaseClaim(id);
      return Status::OK();
    }
  }
  MarkStage(Tmr::kCacheRead);  // the lookups, refreshes and claims of a miss
  stats_->Add(Ctr::kCacheMisses);
  st = FromOrigin(id, s, out);
  if (st.ok()) stats_->Add(Ctr::kCacheMissBytes, out->payload_bytes());
  if (st.ok() && admit) {
    // A full disk or capacity only stops admission; training goes on.
    Status put = EncodeStored(s, out);
    if (put.ok()) put = cache_->Put(id, *out);
    if (put.ok() && corrupt) stats_->Add(Ctr::kCorruptRepaired);
    SyncCacheCounters();
    MarkStage(Tmr::kCacheWrite);
  }
  if (admit) cache_->ReleaseClaim(id);
  return st;
}

bool SampleFetcher::WaitForOther(uint64_t id, FetchScratch* s, CachedSample* out) {
  stats_->Add(Ctr::kClaimWaits);
  int64_t deadline = NowUs() + static_cast<int64_t>(claim_wait_s_ * 1e6);
  while (NowUs() < deadline) {
    env_->SleepForMicroseconds(2000);
    cache_->Refresh().IgnoreError();  // a failure: wait on, then prepare it here
    if (GetCached(id, s, out)) return true;
    if (cache_->TryClaim(id)) {
      // Free: its preparer died, gave up, or stored it and let go of the
      // claim after our refresh. One more look tells the last apart.
      cache_->Refresh().IgnoreError();
      if (!GetCached(id, s, out)) return false;  // prepare it here
      cache_->ReleaseClaim(id);
      return true;
    }
  }
  return false;  // bounded: prepare it ourselves
}

// fields prepared with geometry, encoded into s->field_section.
Status SampleFetcher::EncodeSection(const std::vector<EncodedField>& fields,
                                    const PrepareGeometry& geometry, FetchScratch* s) {
  SSDFEED_RETURN_IF_ERROR(PrepareFields(fields, geometry, s->decoder.limits, &s->fields));
  s->field_section.clear();
  return cache_format::EncodeFields(s->fields, &s->field_section);
}

// The sample's other fields, with the geometry its image was prepared with.
Status SampleFetcher::PrepareFieldsOf(FetchScratch* s, CachedSample* out) {
  out->fields = {};
  if (s->encoded.fields.empty()) return Status::OK();
  SSDFEED_RETURN_IF_ERROR(EncodeSection(s->encoded.fields, s->geometry, s));
  out->fields = s->field_section;
  return Status::OK();
}

Status SampleFetcher::Lookup(uint64_t id, FetchScratch* s, CachedSample* out) {
  if (cache_ == nullptr) return Status::NotFound(source_->Describe(id) + ": no cache");
  Status st = TimedGet(id, s, out);
  if (st.IsNotFound()) {
    MaybeRefresh();
    st = TimedGet(id, s, out);
  }
  if (st.IsCorruption()) {  // dropped from the index by Get
    stats_->Add(Ctr::kCorruptRecords);
    env_->Warn(st.message() + "; it will be prepared again");
    return Status::NotFound(st.message());
  }
  if (st.ok()) CountHit(*out);
  return st;
}

Status SampleFetcher::Store(uint64_t id, const std::vector<EncodedField>& fields, FetchScratch* s,
                            bool* stored) {
  *stored = false;
  if (!image_less_)
    return Status::InvalidArgument(source_->Describe(id) +
                                   ": only samples without an image can be stored as given");
  SSDFEED_RETURN_IF_ERROR(CheckFieldsOnly(fields).WithContext(source_->Describe(id)));
  SSDFEED_RETURN_IF_ERROR(
      EncodeSection(fields, kFieldsOnlyGeometry, s).WithContext(source_->Describe(id)));
  if (cache_ == nullptr || cache_->Contains(id) || !cache_->admitting()) return Status::OK();
  if (!cache_->TryClaim(id)) return Status::OK();  // its claimer stores it
  static const uint8_t kNoPixels = 0;              // records copy pixels with memcpy: never null
  CachedSample cs;
  cs.pixels = &kNoPixels;
  cs.fields = s->field_section;
  Status st = cache_->Put(id, cs);
  SyncCacheCounters();
  cache_->ReleaseClaim(id);
  *stored = st.ok();
  // No room or a failed write stops admission; the sample is simply not stored.
  if (st.IsNoSpace() || st.code() == Status::Code::kIOError) return Status::OK();
  return st;
}

namespace {

// Moves seen up to now; what it moved by (0 when another thread got there).
uint64_t Advance(std::atomic<uint64_t>& seen, uint64_t now) {
  uint64_t prev = seen.load(std::memory_order_relaxed);
  while (prev < now && !seen.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
  }
  return prev < now ? now - prev : 0;
}

}  // namespace

void SampleFetcher::CountOrigin(uint64_t encoded_bytes) {
  OriginTraffic t = source_ != nullptr ? source_->traffic() : OriginTraffic{};
  if (t.bytes == 0 && t.requests == 0) {  // a source that does not count its reads
    stats_->Add(Ctr::kOriginBytes, encoded_bytes);
    return;
  }
  stats_->Add(Ctr::kOriginBytes, Advance(origin_bytes_seen_, t.bytes));
  stats_->Add(Ctr::kOriginRequests, Advance(origin_requests_seen_, t.requests));
}

Status SampleFetcher::FromOrigin(uint64_t id, FetchScratch* s, CachedSample* out) {
  double t0 = time_stages_ ? Seconds() : 0;
  SSDFEED_RETURN_IF_ERROR(source_->Read(id, &s->encoded));
  MarkStage(Tmr::kOriginRead);
  double t1 = time_stages_ ? Seconds() : 0;
  if (time_stages_) stats_->Observe(Hist::kReadOrigin, t1 - t0);
  // Every field read counts: a mask or an array is origin traffic too.
  uint64_t origin_bytes = s->encoded.bytes.size();
  for (const EncodedField& f : s->encoded.fields) origin_bytes += f.bytes.size();
  CountOrigin(origin_bytes);
  Status st = DecodeImage(s);
  if (st.ok()) st = PrepareFieldsOf(s, out);
  if (time_stages_) stats_->Observe(Hist::kPrepare, Seconds() - t1);
  MarkStage(Tmr::kPrepare);  // DecodeAndPrepare marked the decode
  if (!st.ok()) {
    stats_->Add(Ctr::kDecodeErrors);
    return st.WithContext(source_->Describe(id));
  }
  stats_->Add(Ctr::kPrepared);
  out->pixels = s->image.pixels.data();
  out->height = s->image.height;
  out->width = s->image.width;
  out->channels = s->image.channels;
  out->label = s->encoded.label;
  out->codec = RecordCodec::kRaw;
  out->stored = {};
  st = ServeLossy(s, out);
  // A lossy codec's bytes are made here, for the cache write that follows.
  if (IsLossy(spec_.codec)) MarkStage(Tmr::kCacheWrite);
  if (!st.ok()) return st.WithContext(source_->Describe(id));
  return Status::OK();
}

}  // namespace ssdfeed
