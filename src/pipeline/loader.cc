// The Loader: a worker pool fills a BatchRing of chunk slots (batch_size
// plan positions each) through the fetcher and the SampleRenderer; the
// consumer takes chunks in plan order and hands each out as a batch
// without copying (it gathers across chunks only after resuming a state
// saved mid-chunk by older versions). EpochState knows which epoch and
// which plan position a pass starts at. A skipped sample is replaced in
// its slot, so batches never shrink.
#include "ssdfeed/loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "pipeline/batch_pool.h"
#include "pipeline/batch_ring.h"
#include "pipeline/entry_key.h"
#include "pipeline/epoch_state.h"
#include "pipeline/fetcher.h"
#include "pipeline/origin_index.h"
#include "pipeline/sample_renderer.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/metrics.h"
#include "util/mutex.h"
#include "util/stage_clock.h"

namespace ssdfeed {

// The spellings of ShardMode (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(ShardMode, "shard", {ShardMode::kGlobal, "global"},
                   {ShardMode::kSticky, "sticky"}, {ShardMode::kRotate, "rotate"})

namespace {

Env* EnvOf(const LoaderOptions& o) { return o.cache.env != nullptr ? o.cache.env : Env::Default(); }

class LoaderImpl final : public Loader {
 public:
  // others_traffic: what a given (shared) source had read before Open.
  LoaderImpl(LoaderOptions o, std::shared_ptr<const Source> src, std::unique_ptr<CacheEntry> cache,
             std::unique_ptr<StatsPublisher> stats, OriginTraffic others_traffic)
      : opts_(std::move(o)),
        env_(EnvOf(opts_)),
        source_(std::move(src)),
        cache_(std::move(cache)),
        stats_(std::move(stats)),
        fetcher_(source_.get(), opts_.prepare, cache_.get(), opts_.cache.claim_wait_seconds,
                 stats_.get(), opts_.metrics, env_, others_traffic),
        pool_(BatchPool::Create()),
        renderer_(opts_.prepare, opts_.augment, opts_.output, opts_.seed, IsImageLess(*source_)),
        plan_(opts_, source_->size()),
        ring_(static_cast<size_t>(std::max(1, opts_.prefetch)) + 1, opts_.batch_size,
              renderer_.fixed() ? renderer_.sample_bytes() : 0, pool_,
              renderer_.MaskPlanes(source_->fields())) {
    workers_ = opts_.workers > 0 ? opts_.workers : DefaultWorkers(env_);
    // Rendered into the batch, a yuv420 sample is cropped from its planes.
    fetcher_.ServeYuv420Planes(renderer_.fixed());
    // One stage clock per worker, kept across epochs; none with metrics off.
    if (opts_.metrics)
      for (int w = 0; w < workers_; ++w) clocks_.push_back(std::make_unique<StageClock>(env_));
  }
  ~LoaderImpl() override { Stop(); }
  double NowSeconds() const { return static_cast<double>(env_->MonotonicMicros()) * 1e-6; }

  uint64_t cache_open_errors_ = 0;  // set once by Open

  void SetEpoch(uint64_t epoch) override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    StopLocked();
    plan_.SetEpoch(epoch);
  }

  Result<bool> Next(Batch* out) override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    if (!running_) StartEpoch();
    uint64_t batch_start = cursor_;
    bool got = false;
    waited_ = 0;
    Status s = NextBatch(out, &got);
    if (!s.ok()) {
      StopLocked();
      plan_.ResumeAt(batch_start, consumed_);  // a retry resumes at the failed batch
      return s;
    }
    if (!got) {
      // The pass is over: the next one is the following epoch (reshuffled)
      // unless SetEpoch or LoadState says otherwise.
      StopLocked();
      plan_.SetEpoch(plan_.epoch() + 1);
      last_return_us_ = 0;  // the time until the next epoch's first batch is no step
      return false;
    }
    ++consumed_;
    RecordWait(waited_);  // per batch served, as the histogram's count promises
    stats_->Add(Ctr::kBatchesServed);
    stats_->Add(Ctr::kSamplesServed, out->size);
    RecordStep();
    return true;
  }

  void Stop() override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    StopLocked();
  }

  // The consumer side (Next, SetEpoch, LoadState, state) may be driven from
  // two threads: tf.data runs the generator on its own thread while the
  // user calls state_dict(). consumer_mu_ makes a state a batch boundary.
  void StopLocked() {
    ring_.Stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    // Where a restart picks up: the next unconsumed batch.
    if (running_) plan_.ResumeAt(cursor_, consumed_);
    running_ = false;
    // Stop has no caller to tell; the writer counts the failure
    // (write_errors) and warns, and records are checked on read.
    if (cache_) cache_->Sync().IgnoreError();
  }

  size_t num_samples() const override { return plan_.order().size(); }
  size_t num_batches() const override { return plan_.num_batches(); }
  size_t source_size() const override { return source_->size(); }
  std::vector<FieldSpec> fields() const override { return source_->fields(); }

  // The same numbers the stats file publishes (one source of truth).
  LoaderStats stats() const override {
    if (cache_) fetcher_.SyncCacheCounters();
    PublishTimes();
    StatsSnapshot c = stats_->Snapshot();
    LoaderStats s;
    s.SetCounters(c.counters);
    for (size_t i = 0; i < kNumTimers; ++i) s.times[i] = static_cast<double>(c.times[i]) * 1e-9;
    for (const auto& clock : clocks_) {
      auto& w = s.worker_times.emplace_back();
      for (const auto& t : kTimers)
        w[static_cast<size_t>(t.slot)] = static_cast<double>(clock->Total(t.slot)) * 1e-9;
    }
    StepWaits(&s);
    const HistSnapshot& w = c.hist(Hist::kBatchWait);
    s.wait_seconds = w.sum_seconds();
    s.wait_histogram_bounds = HistogramBounds();
    s.wait_histogram.assign(w.buckets.begin(), w.buckets.end());
    s.stats_file = stats_->path();
    s.cache_open_errors = cache_open_errors_;
    if (cache_) {
      s.cache_dir = cache_->dir();
      s.cache_warning = cache_->warning();
      s.cache_admitting = cache_->admitting();
    }
    return s;
  }

  void RecordRankMaxWait(double seconds) override {
    if (seconds > 0) stats_->AddTime(Tmr::kRankMaxWait, static_cast<uint64_t>(seconds * 1e9));
  }

  LoaderState state() const override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    return running_ ? plan_.Save(cursor_, consumed_)
                    : plan_.Save(plan_.start_pos(), plan_.start_batch());
  }

  Status LoadState(const LoaderState& s) override {
    SSDFEED_RETURN_IF_ERROR(plan_.Check(s));
    std::lock_guard<std::mutex> c(consumer_mu_);
    StopLocked();
    plan_.Load(s);
    return Status::OK();
  }

 private:
  bool skipping() const { return opts_.source_options.on_error == OnError::kSkip; }
  const std::vector<uint64_t>& order() const { return plan_.order(); }

  // Chunk c holds plan positions [c * batch_size, (c + 1) * batch_size);
  // workers fill chunks, the consumer cuts batches out of them in plan order.
  void StartEpoch() {
    StopLocked();
    plan_.Replan();
    end_sample_ = std::min(order().size(), plan_.num_batches() * opts_.batch_size);
    cursor_ = std::min<uint64_t>(plan_.start_pos(), end_sample_);
    consumed_ = plan_.start_batch();
    ring_.Start(cursor_, end_sample_);
    running_ = true;
    for (int w = 0; w < workers_; ++w)
      threads_.push_back(env_->StartThread([this, w] { Work(w); }));
  }

  // Waits until chunk c is filled; its first error under on_error=raise.
  Status WaitChunk(uint64_t c, RingSlot** out) {
    double t0 = NowSeconds();
    Status s = ring_.WaitChunk(c, out);
    waited_ += NowSeconds() - t0;
    return s;
  }

  // The next batch: a whole chunk without copying when it starts at the
  // cursor and nothing in it was skipped, else gathered sample by sample.
  Status NextBatch(Batch* out, bool* got) {
    *got = false;
    if (cursor_ >= end_sample_) return Status::OK();
    size_t bs = opts_.batch_size;
    uint64_t c = cursor_ / bs;
    RingSlot* slot = nullptr;
    SSDFEED_RETURN_IF_ERROR(WaitChunk(c, &slot));
    if (cursor_ % bs != 0) return Gather(out, got);
    consumer_clock_.Begin();
    int h = renderer_.height(), w = renderer_.width();
    if (!renderer_.fixed()) {
      std::vector<const Image*> ims;
      for (size_t i = 0; i < slot->count; ++i) ims.push_back(&slot->staging[i]);
      SSDFEED_RETURN_IF_ERROR(renderer_.RenderStaged(ims, slot->buffer.get(), &h, &w));
    }
    std::vector<StagedFields*> staged;
    for (size_t i = 0; i < slot->count; ++i) staged.push_back(&slot->fields[i]);
    UnplaceMasks(staged, 0, slot->planes, /*all=*/false);
    std::vector<const StagedFields*> fields(staged.begin(), staged.end());
    SSDFEED_RETURN_IF_ERROR(Collate(fields, slot->buffer.get(), &slot->planes));
    consumer_clock_.Mark(Tmr::kCollate);
    renderer_.Fill(slot->buffer, slot->count, h, w, out);
    cursor_ += slot->count;
    ring_.Release(c);
    consumer_clock_.Mark(Tmr::kHandoff);
    *got = !(opts_.drop_last && out->size < bs);
    return Status::OK();
  }

  // Takes the next batch_size samples of the plan, across chunks: a state
  // saved by older versions may stand mid-chunk.
  Status Gather(Batch* out, bool* got) {
    const bool fixed = renderer_.fixed();
    size_t bs = opts_.batch_size, sb = renderer_.sample_bytes(), n = 0;
    auto buf = pool_->Acquire(fixed ? sb * bs : 0, bs);
    std::vector<Image> staged;
    std::vector<StagedFields> fields;
    fields.reserve(bs);
    while (n < bs && cursor_ < end_sample_) {
      uint64_t c = cursor_ / bs;
      RingSlot* slot = nullptr;
      SSDFEED_RETURN_IF_ERROR(WaitChunk(c, &slot));
      size_t i = cursor_ % bs;
      buf->labels[n] = slot->buffer->labels[i];
      if (fixed)
        std::memcpy(buf->images.data() + n * sb, slot->buffer->images.data() + i * sb, sb);
      else
        staged.push_back(std::move(slot->staging[i]));
      StagedFields* one = &slot->fields[i];
      UnplaceMasks({one}, i, slot->planes, /*all=*/true);  // planes stay with the slot
      fields.push_back(std::move(*one));
      ++n;
      ++cursor_;
      if (cursor_ % bs == 0 || cursor_ >= end_sample_) ring_.Release(c);
    }
    consumer_clock_.Begin();  // the copies above count as collate
    int h = renderer_.height(), w = renderer_.width();
    if (!fixed) {
      std::vector<const Image*> ims;
      for (const auto& im : staged) ims.push_back(&im);
      SSDFEED_RETURN_IF_ERROR(renderer_.RenderStaged(ims, buf.get(), &h, &w));
    }
    std::vector<const StagedFields*> views;
    for (const auto& f : fields) views.push_back(&f);
    SSDFEED_RETURN_IF_ERROR(Collate(views, buf.get()));
    consumer_clock_.Mark(Tmr::kCollate);
    renderer_.Fill(buf, n, h, w, out);
    consumer_clock_.Mark(Tmr::kHandoff);
    *got = n > 0 && !(opts_.drop_last && n < bs);
    return Status::OK();
  }

  // The batch's other fields, once all its samples are rendered.
  Status Collate(const std::vector<const StagedFields*>& samples, BatchBuffer* buf,
                 std::vector<MaskPlane>* planes = nullptr) const {
    return CollateFields(
        samples, buf, [this](uint64_t id) { return source_->Describe(id); }, planes);
  }

  // How many consecutive plan positions a worker takes at once: one, unless
  // the cache reads direct, where a group's records are read together so
  // the device sees about kQueueDepth reads in flight across the workers.
  size_t GroupSize() const {
    if (!cache_ || !cache_->direct_reads()) return 1;
    constexpr int kQueueDepth = 32;
    return static_cast<size_t>(std::clamp(kQueueDepth / workers_, 4, kQueueDepth));
  }

  // Worker w: busy from each Take that hands it work to the next Take
  // that may block (its stage clock's Begin and End).
  void Work(int w) {
    StageClock* clock = clocks_.empty() ? nullptr : clocks_[static_cast<size_t>(w)].get();
    ScopedStageClock installed(clock);
    auto begin = [clock] {
      if (clock) clock->Begin();
    };
    auto end = [clock] {
      if (clock) clock->End();
    };
    FetchScratch scratch;
    std::vector<uint8_t> render;
    const size_t group = GroupSize();
    RingRun cur;
    if (group == 1) {
      while (ring_.Take(1, false, &cur)) {
        begin();
        size_t pos = cur.k % opts_.batch_size;
        Status s = Produce(order()[cur.k], cur.slot, pos, &scratch, &render);
        ring_.Finish(cur.slot, Substitute(cur.k, s, cur.slot, pos, &scratch, &render));
        MarkStage(Tmr::kHandoff);  // the sample handed to its batch
        end();
      }
      return;
    }
    // Direct reads: the next run's records are in flight while this run is
    // rendered, so the device always has work queued.
    if (!ring_.Take(group, false, &cur)) return;
    begin();
    int which = 0;
    auto g = fetcher_.StartCachedMany(&order()[cur.k], cur.n, &scratch, which);
    while (true) {
      RingRun next;
      bool ahead = ring_.Take(group, true, &next);
      SampleFetcher::Group gn;
      if (ahead) gn = fetcher_.StartCachedMany(&order()[next.k], next.n, &scratch, 1 - which);
      fetcher_.FinishCachedMany(&g, &scratch);
      RenderRun(cur, scratch.reads[which], &scratch, &render);
      if (!ahead) {
        end();
        if (!ring_.Take(group, false, &next)) return;
        begin();
        gn = fetcher_.StartCachedMany(&order()[next.k], next.n, &scratch, 1 - which);
      }
      cur = next;
      g = std::move(gn);
      which = 1 - which;
    }
  }

  void RenderRun(const RingRun& t, std::vector<CacheRead>& reads, FetchScratch* scratch,
                 std::vector<uint8_t>* render) {
    for (size_t j = 0; j < t.n; ++j) {
      uint64_t id = order()[t.k + j];
      size_t pos = (t.k + j) % opts_.batch_size;
      CacheRead& r = reads[j];
      Status s = r.status.ok() ? Render(id, r.sample, t.slot, pos, render)
                               : ProduceAfter(id, r.status, t.slot, pos, scratch, render);
      ring_.Finish(t.slot, Substitute(t.k + j, s, t.slot, pos, scratch, render));
      MarkStage(Tmr::kHandoff);
    }
  }

  // Under on_error=skip, plan position k's sample failed with `got`: fills
  // its slot with the next good sample after it in the plan (cyclically),
  // so every rank serves the same number of full batches whatever is bad
  // (DDP ranks must stay in step) and the choice depends only on which
  // samples are bad. A bounded search: a run of bad samples that long means
  // a broken source, which is an error.
  Status Substitute(uint64_t k, Status got, RingSlot* slot, size_t pos, FetchScratch* scratch,
                    std::vector<uint8_t>* render) {
    if (got.ok() || !skipping()) return got;
    stats_->Add(Ctr::kSkipped);
    constexpr uint64_t kMaxTries = 256;
    uint64_t n = order().size(), tries = std::min<uint64_t>(n - 1, kMaxTries);
    for (uint64_t j = 1; j <= tries; ++j) {
      uint64_t id = order()[(k + j) % n];
      if (Produce(id, slot, pos, scratch, render).ok()) return Status::OK();
    }
    return Status::Corruption("on_error=skip: " + got.message() + "; and the " +
                              std::to_string(tries) +
                              " samples after it in this rank's plan are bad too, none to "
                              "serve in its place");
  }

  Status Produce(uint64_t id, RingSlot* slot, size_t pos, FetchScratch* scratch,
                 std::vector<uint8_t>* render) {
    CachedSample cs;
    SSDFEED_RETURN_IF_ERROR(fetcher_.Fetch(id, scratch, &cs));
    return Render(id, cs, slot, pos, render);
  }

  // A grouped cache read that missed or failed: the rest of Fetch's path.
  Status ProduceAfter(uint64_t id, const Status& got, RingSlot* slot, size_t pos,
                      FetchScratch* scratch, std::vector<uint8_t>* render) {
    CachedSample cs;
    SSDFEED_RETURN_IF_ERROR(fetcher_.Resolve(id, got, scratch, &cs));
    return Render(id, cs, slot, pos, render);
  }

  // Workers run only while no consumer call changes the epoch.
  Status Render(uint64_t id, const CachedSample& cs, RingSlot* slot, size_t pos,
                std::vector<uint8_t>* render) {
    Image* staging = renderer_.fixed() ? nullptr : &slot->staging[pos];
    Status r = renderer_.Render(cs, plan_.epoch(), id, slot->buffer.get(), pos, staging, render,
                                &slot->fields[pos], &slot->planes);
    MarkStage(Tmr::kAugment);
    return r.ok() ? r : r.WithContext(source_->Describe(id));
  }

  void RecordWait(double s) {
    stats_->Observe(Hist::kBatchWait, s);
    MutexLock l(&window_mu_);
    if (step_waits_.size() < LoaderStats::kStepWaitWindow)
      step_waits_.push_back(s);
    else
      step_waits_[step_waits_next_] = s;
    step_waits_next_ = (step_waits_next_ + 1) % LoaderStats::kStepWaitWindow;
    last_step_wait_ = s;
  }

  // A batch was handed out: the step since the previous one ends, and the
  // stats file gets the stage totals (per batch, so the exporter sees them
  // move; a few dozen relaxed loads and stores).
  void RecordStep() {
    int64_t now = env_->MonotonicMicros();
    if (last_return_us_ > 0 && opts_.metrics)
      stats_->AddTime(Tmr::kStep, static_cast<uint64_t>(now - last_return_us_) * 1000);
    last_return_us_ = now;
    PublishTimes();
  }

  // The stage clocks' totals into the stats file (they are its only writers
  // of these slots; the step and the ranks' wait are added directly).
  void PublishTimes() const {
    if (!opts_.metrics) return;
    TimerArray sum{};
    for (const auto& c : clocks_) c->AddTo(&sum);
    consumer_clock_.AddTo(&sum);
    for (const auto& t : kTimers)
      if (t.is_stage() || t.slot == Tmr::kWorkerBusy)
        stats_->RaiseTime(t.slot, sum[static_cast<size_t>(t.slot)]);
  }

  // The last step's wait and the window's percentiles (nearest rank).
  void StepWaits(LoaderStats* s) const {
    std::vector<double> w;
    {
      MutexLock l(&window_mu_);
      w = step_waits_;
      s->step_wait_last = last_step_wait_;
    }
    s->step_wait_steps = w.size();
    if (w.empty()) return;
    std::sort(w.begin(), w.end());
    auto rank = [&w](double q) {
      size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(w.size())));
      return w[std::clamp<size_t>(k, 1, w.size()) - 1];
    };
    s->step_wait_p50 = rank(0.50);
    s->step_wait_p99 = rank(0.99);
  }

 public:
  // Serves this process's counters on metrics_host:metrics_port.
  Status StartMetricsServer() {
    std::string listen = opts_.metrics_host + ":" + std::to_string(opts_.metrics_port);
    SSDFEED_ASSIGN_OR_RETURN(server_, MetricsServer::ServeProcess(stats_.get(), listen));
    return Status::OK();
  }

 private:
  LoaderOptions opts_;
  Env* env_;  // clock, threads, warnings
  std::shared_ptr<const Source> source_;
  std::unique_ptr<CacheEntry> cache_;
  std::unique_ptr<StatsPublisher> stats_;
  mutable SampleFetcher fetcher_;
  std::unique_ptr<MetricsServer> server_;  // stops before stats_ goes
  std::shared_ptr<BatchPool> pool_;
  int workers_ = 1;
  const SampleRenderer renderer_;
  EpochState plan_;  // changed by the consumer only while no worker runs
  BatchRing ring_;

  mutable std::mutex consumer_mu_;  // Next/SetEpoch/LoadState/Stop/state
  std::vector<std::thread> threads_;
  bool running_ = false;
  uint64_t end_sample_ = 0;             // plan positions served this pass
  uint64_t cursor_ = 0, consumed_ = 0;  // consumer: next position, batches taken
  double waited_ = 0;                   // consumer wait within one Next
  int64_t last_return_us_ = 0;          // consumer: when Next last handed out a batch

  std::vector<std::unique_ptr<StageClock>> clocks_;  // per worker; empty with metrics off
  StageClock consumer_clock_{env_};                  // the consumer's collate and handoff
  // The consumer's wait per step (a ring of the last kStepWaitWindow), read by stats().
  mutable Mutex window_mu_;
  std::vector<double> step_waits_ GUARDED_BY(window_mu_);
  size_t step_waits_next_ GUARDED_BY(window_mu_) = 0;
  double last_step_wait_ GUARDED_BY(window_mu_) = 0;
};

// The stats file under the cache root; in memory without a cache or metrics.
std::unique_ptr<StatsPublisher> OpenStats(const LoaderOptions& o, CacheEntry* cache) {
  if (cache == nullptr || !o.metrics) return StatsPublisher::InMemory();
  std::string warning;
  auto p = StatsPublisher::Create(o.cache.env, o.cache, Basename(cache->dir()), &warning);
  if (!warning.empty()) EnvOf(o)->Warn(warning);
  return p;
}

Status CheckAugment(const AugmentSpec& a) {
  if (!(a.flip_prob >= 0 && a.flip_prob <= 1))
    return Status::InvalidArgument("augment: flip_prob must be in [0, 1]");
  if (a.kind != AugmentKind::kFlip && (a.height <= 0 || a.width <= 0))
    return Status::InvalidArgument("augment: need size > 0");
  if (a.kind == AugmentKind::kResizedCrop &&
      (a.scale_min <= 0 || a.scale_min > a.scale_max || a.scale_max > 1 || a.ratio_min <= 0 ||
       a.ratio_min > a.ratio_max))
    return Status::InvalidArgument(
        "augment: need size > 0, 0 < scale_min <= scale_max <= 1, "
        "0 < ratio_min <= ratio_max");
  if (a.kind == AugmentKind::kScaleJitterCrop && (a.jitter_min < 1 || a.jitter_min > a.jitter_max))
    return Status::InvalidArgument("augment: need 1 <= jitter_min <= jitter_max (pixels)");
  return Status::OK();
}

}  // namespace

namespace {

// Tells the source which samples the first epoch reads from the origin (the
// entry's misses in the id range), so a bucket's shards are fetched in runs
// of close misses. Only for a single rank without a validation split: there
// the epoch reads every id of the range, so no run fetches bytes nobody
// reads (with ranks, each reads a share, and runs would span the others').
void PlanMisses(const LoaderOptions& o, const Source& src, CacheEntry& entry) {
  if (o.world_size > 1 || o.validation_split > 0) return;
  uint64_t end = o.id_end ? o.id_end : src.size();
  std::vector<uint64_t> missing;
  for (uint64_t id = o.id_begin; id < end; ++id)
    if (!entry.Contains(id)) missing.push_back(id);
  src.PlanReads(missing);
}

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Open(const LoaderOptions& o) {
  if (o.batch_size == 0) return Status::InvalidArgument("batch_size must be >= 1");
  if (o.workers < 0) return Status::InvalidArgument("workers must be >= 0 (0: one per core)");
  if (o.prefetch < 1) return Status::InvalidArgument("prefetch must be >= 1 (batches ahead)");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return Status::InvalidArgument("need 0 <= rank < world_size");
  SSDFEED_RETURN_IF_ERROR(o.prepare.Validate());
  const AugmentSpec& a = o.augment;
  if (a.enabled) SSDFEED_RETURN_IF_ERROR(CheckAugment(a));
  if (o.rotate_every < 1) return Status::InvalidArgument("rotate_every must be >= 1 (epochs)");
  std::shared_ptr<const Source> src = o.source_object;
  // A given source may be shared with other loaders (ssdfeed.ray's read
  // tasks keep one per process): what it read before is theirs.
  OriginTraffic others_traffic = src != nullptr ? src->traffic() : OriginTraffic{};
  if (src == nullptr) {
    // Opened from the listing; the index comes from the cache when it can.
    SourceOptions so = o.source_options;
    so.defer_index = true;
    SSDFEED_ASSIGN_OR_RETURN(auto opened, OpenSource(o.source, so));
    src = std::move(opened);
  }
  std::string index_warning;
  SSDFEED_RETURN_IF_ERROR(LoadOrBuildIndex(*src, o.cache, &index_warning));
  if (!index_warning.empty()) EnvOf(o)->Warn(index_warning);
  if (a.enabled && IsImageLess(*src))
    return Status::InvalidArgument("augment crops and flips an image, and " + src->uri() +
                                   " has none (its fields are served as they are): leave "
                                   "augment off, or augment in your own code");
  uint64_t n = src->size();
  if (o.id_begin > (o.id_end ? o.id_end : n) || o.id_end > n)
    return Status::InvalidArgument("id range [" + std::to_string(o.id_begin) + ", " +
                                   std::to_string(o.id_end) + ") is not within the " +
                                   std::to_string(n) + " samples of " + o.source);
  if (!(o.validation_split >= 0 && o.validation_split < 1))
    return Status::InvalidArgument("validation_split must be in [0, 1), not " +
                                   std::to_string(o.validation_split));
  if (o.validation_split > 0) {
    uint64_t m = (o.id_end ? o.id_end : n) - o.id_begin;
    auto nval = static_cast<uint64_t>(o.validation_split * static_cast<double>(m));
    if (nval == 0 || nval == m)
      return Status::InvalidArgument("validation_split=" + std::to_string(o.validation_split) +
                                     " of the " + std::to_string(m) + " samples of " + o.source +
                                     " leaves the " + (nval == 0 ? "validation" : "training") +
                                     " subset empty");
  }
  std::unique_ptr<CacheEntry> cache;
  uint64_t cache_open_errors = 0;
  if (!o.cache.root.empty()) {
    auto entry = CacheEntry::Open(o.cache, MakeEntryKey(*src, o.source_options, o.prepare));
    if (entry.ok()) {
      cache = std::move(*entry);
      std::string stored_warning;
      StoreIndex(*src, *cache, o.cache, &stored_warning);
      if (!stored_warning.empty()) EnvOf(o)->Warn(stored_warning);
      PlanMisses(o, *src, *cache);
    } else if (entry.status().code() == Status::Code::kInvalidArgument) {
      return entry.status();  // a refused root or a bad option: the user must act
    } else {
      // No room, an I/O error, no descriptors left: train from the origin, say so.
      EnvOf(o)->Warn(entry.status().message() + "; serving from the origin without a cache");
      cache_open_errors = 1;
    }
  }
  auto stats = OpenStats(o, cache.get());
  auto impl = std::make_unique<LoaderImpl>(o, std::move(src), std::move(cache), std::move(stats),
                                           others_traffic);
  impl->cache_open_errors_ = cache_open_errors;
  if (o.metrics_port > 0) SSDFEED_RETURN_IF_ERROR(impl->StartMetricsServer());
  return std::unique_ptr<Loader>(std::move(impl));
}

}  // namespace ssdfeed
