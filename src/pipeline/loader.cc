// The Loader: a ring of chunk slots (batch_size plan positions each) filled
// by a worker pool, consumed in order. Workers take sample positions from one
// counter; a worker that gets ahead of the ring waits (backpressure). The
// consumer hands out a chunk as a batch without copying (it gathers across
// chunks only after resuming a state saved mid-chunk by older versions).
// A skipped sample is replaced in its slot, so batches never shrink.
// Errors travel with their chunk.
#include "ssdfeed/loader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "image/augment.h"
#include "pipeline/batch_pool.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/metrics.h"

namespace ssdfeed {

namespace {

Env* EnvOf(const LoaderOptions& o) { return o.cache.env != nullptr ? o.cache.env : Env::Default(); }

struct Slot {
  uint64_t batch = 0;  // which batch of the epoch it holds
  size_t count = 0;    // samples it will hold
  size_t done = 0;
  std::shared_ptr<BatchBuffer> buffer;
  std::vector<Image> staging;  // shape known only per sample
  Status error;                // first error (on_error=raise)
};

class LoaderImpl final : public Loader {
 public:
  LoaderImpl(LoaderOptions o, std::unique_ptr<Source> src, std::unique_ptr<CacheEntry> cache,
             std::unique_ptr<StatsPublisher> stats)
      : opts_(std::move(o)),
        env_(EnvOf(opts_)),
        source_(std::move(src)),
        cache_(std::move(cache)),
        stats_(std::move(stats)),
        fetcher_(source_.get(), opts_.prepare, cache_.get(), opts_.cache.claim_wait_seconds,
                 stats_.get(), opts_.metrics, env_),
        pool_(BatchPool::Create()) {
    workers_ = opts_.workers > 0 ? opts_.workers : DefaultWorkers();
    nslots_ = static_cast<size_t>(std::max(1, opts_.prefetch)) + 1;
    if (opts_.validation_split > 0)
      ids_ = SplitIds(opts_.id_begin, id_end(), opts_.validation_split, opts_.split_seed,
                      opts_.validation_subset);
    order_ = Plan(0);
    FixShape();
  }
  ~LoaderImpl() override { Stop(); }
  double NowSeconds() const { return static_cast<double>(env_->MonotonicMicros()) * 1e-6; }

  uint64_t cache_open_errors_ = 0;  // set once by Open

  void SetEpoch(uint64_t epoch) override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    StopLocked();
    epoch_ = epoch;
    start_pos_ = start_batch_ = 0;
    resumed_from_.clear();  // the epoch starts at its first batch, whole
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
      start_pos_ = batch_start;  // a retry resumes at the failed batch
      start_batch_ = consumed_;
      return s;
    }
    if (!got) {
      // The pass is over: the next one is the following epoch (reshuffled)
      // unless SetEpoch or LoadState says otherwise.
      StopLocked();
      epoch_++;
      start_pos_ = start_batch_ = 0;
      resumed_from_.clear();
      return false;
    }
    ++consumed_;
    RecordWait(waited_);  // per batch served, as the histogram's count promises
    stats_->Add(Ctr::kBatchesServed);
    stats_->Add(Ctr::kSamplesServed, out->size);
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
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    space_cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (running_) {
      // Where a restart picks up: the next unconsumed batch.
      start_pos_ = cursor_;
      start_batch_ = consumed_;
    }
    running_ = false;
    // Stop has no caller to tell; the writer counts the failure
    // (write_errors) and warns, and records are checked on read.
    if (cache_) cache_->Sync().IgnoreError();
  }

  size_t num_samples() const override { return order_.size(); }
  size_t num_batches() const override {
    size_t bs = opts_.batch_size;
    return opts_.drop_last ? order_.size() / bs : (order_.size() + bs - 1) / bs;
  }
  size_t source_size() const override { return source_->size(); }

  // The same numbers the stats file publishes (one source of truth).
  LoaderStats stats() const override {
    if (cache_) fetcher_.SyncCacheCounters();
    StatsSnapshot c = stats_->Snapshot();
    LoaderStats s;
    s.SetCounters(c.counters);
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

  LoaderState state() const override {
    std::lock_guard<std::mutex> c(consumer_mu_);
    LoaderState s;
    s.epoch = epoch_;
    s.batches_consumed = running_ ? consumed_ : start_batch_;
    s.position = running_ ? cursor_ : start_pos_;
    s.seed = opts_.seed;
    s.rank = opts_.rank;
    s.world_size = opts_.world_size;
    s.num_samples = source_->size();
    s.batch_size = opts_.batch_size;
    s.shard = opts_.shard;
    s.rotate_every = opts_.rotate_every;
    s.resumed_from = resumed_from_;
    return s;
  }

  Status LoadState(const LoaderState& s) override {
    if (s.seed != opts_.seed || s.num_samples != source_->size() ||
        s.batch_size != opts_.batch_size || s.shard != opts_.shard ||
        (s.shard == ShardMode::kRotate && s.rotate_every != opts_.rotate_every))
      return Status::InvalidArgument(
          "state does not match this loader (seed, dataset size, batch_size, shard and "
          "rotate_every must be the same)");
    if (!s.merged && (s.rank != opts_.rank || s.world_size != opts_.world_size))
      return Status::InvalidArgument(
          "state of rank " + std::to_string(s.rank) + " of " + std::to_string(s.world_size) +
          " does not match this loader's rank " + std::to_string(opts_.rank) + " of " +
          std::to_string(opts_.world_size) +
          ": merge the states of all ranks with merge_states() to resume on another world size");
    for (const auto& layer : s.resumed_from)
      if (layer.empty()) return Status::InvalidArgument("state: a resumed_from layer is empty");
    std::lock_guard<std::mutex> c(consumer_mu_);
    StopLocked();
    epoch_ = s.epoch;
    resumed_from_ = s.resumed_from;
    order_ = Plan(epoch_);
    if (s.merged && order_.empty() && !resumed_from_.empty()) {
      // The old ranks read the whole epoch: resume at the next one.
      ++epoch_;
      resumed_from_.clear();
      order_ = Plan(epoch_);
    }
    start_batch_ = std::min<uint64_t>(s.batches_consumed, num_batches());
    // A state without a position (older ones) had no skips: batches * size.
    start_pos_ = std::min<uint64_t>(std::max<uint64_t>(s.position, start_batch_ * opts_.batch_size),
                                    order_.size());
    return Status::OK();
  }

 private:
  // The output shape, when every sample will have the same one.
  void FixShape() {
    SampleShape s = ServedSampleShape(opts_.prepare, opts_.augment);
    channels_ = s.channels;
    out_h_ = s.height;
    out_w_ = s.width;
    fixed_ = s.fixed();
  }
  bool fixed_shape() const { return fixed_; }
  bool skipping() const { return opts_.source_options.on_error == OnError::kSkip; }
  size_t sample_bytes(int h, int w) const {
    return static_cast<size_t>(h) * w * channels_ * DTypeSize(opts_.output.dtype);
  }
  size_t sample_bytes() const { return sample_bytes(out_h_, out_w_); }

  uint64_t id_end() const { return opts_.id_end ? opts_.id_end : source_->size(); }

  // The epoch's source ids for this rank: a plan over the id range (or the
  // split's ids), mapped to source ids.
  std::vector<uint64_t> Plan(uint64_t epoch) const {
    bool split = opts_.validation_split > 0;
    uint64_t n = split ? ids_.size() : id_end() - opts_.id_begin;
    // resumed_from_ holds only while epoch_ is the resumed epoch.
    const ResumeLayers none;
    std::vector<uint64_t> plan = ResumedEpochOrder(
        n, opts_.shuffle, opts_.seed, epoch, opts_.rank, opts_.world_size, opts_.sampler_drop_last,
        opts_.shard, opts_.rotate_every, epoch == epoch_ ? resumed_from_ : none);
    for (uint64_t& id : plan) id = split ? ids_[id] : id + opts_.id_begin;
    return plan;
  }

  // Chunk c holds plan positions [c * batch_size, (c + 1) * batch_size);
  // workers fill chunks, the consumer cuts batches out of them in plan order.
  void StartEpoch() {
    StopLocked();
    size_t bs = opts_.batch_size;
    order_ = Plan(epoch_);
    end_sample_ = std::min(order_.size(), num_batches() * bs);
    cursor_ = std::min<uint64_t>(start_pos_, end_sample_);
    consumed_ = start_batch_;
    uint64_t first = cursor_ / bs;
    next_chunk_ = first;
    next_sample_ = cursor_;
    slots_.assign(nslots_, Slot{});
    for (size_t i = 0; i < nslots_; ++i) Reset(slots_[(first + i) % nslots_], first + i);
    Slot& head = slots_[first % nslots_];
    if (head.count > 0) head.done = cursor_ - first * bs;  // consumed before a stop: not redone
    stop_ = false;
    running_ = true;
    for (int w = 0; w < workers_; ++w) threads_.push_back(env_->StartThread([this] { Work(); }));
  }

  // Waits until chunk c is filled; its first error under on_error=raise.
  Status WaitChunk(uint64_t c, Slot** out) {
    Slot& slot = slots_[c % nslots_];
    double t0 = NowSeconds();
    {
      std::unique_lock<std::mutex> l(mu_);
      ready_cv_.wait(l, [&] { return slot.batch == c && slot.done == slot.count; });
    }
    waited_ += NowSeconds() - t0;
    *out = &slot;
    return slot.error;
  }

  // Hands chunk c (the oldest) back to the workers.
  void Release(uint64_t c) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++next_chunk_;
      Reset(slots_[c % nslots_], c + nslots_);
    }
    space_cv_.notify_all();
  }

  // The next batch: a whole chunk without copying when it starts at the
  // cursor and nothing in it was skipped, else gathered sample by sample.
  Status NextBatch(Batch* out, bool* got) {
    *got = false;
    if (cursor_ >= end_sample_) return Status::OK();
    size_t bs = opts_.batch_size;
    uint64_t c = cursor_ / bs;
    Slot* slot = nullptr;
    SSDFEED_RETURN_IF_ERROR(WaitChunk(c, &slot));
    if (cursor_ % bs != 0) return Gather(out, got);
    int h = out_h_, w = out_w_;
    if (!fixed_shape()) {
      std::vector<const Image*> ims;
      for (size_t i = 0; i < slot->count; ++i) ims.push_back(&slot->staging[i]);
      SSDFEED_RETURN_IF_ERROR(RenderStaged(ims, slot->buffer.get(), &h, &w));
    }
    Fill(slot->buffer, slot->count, h, w, out);
    cursor_ += slot->count;
    Release(c);
    *got = !(opts_.drop_last && out->size < bs);
    return Status::OK();
  }

  // Takes the next batch_size samples of the plan, across chunks: a state
  // saved by older versions may stand mid-chunk.
  Status Gather(Batch* out, bool* got) {
    size_t bs = opts_.batch_size, sb = sample_bytes(), n = 0;
    auto buf = pool_->Acquire(fixed_shape() ? sb * bs : 0, bs);
    std::vector<Image> staged;
    while (n < bs && cursor_ < end_sample_) {
      uint64_t c = cursor_ / bs;
      Slot* slot = nullptr;
      SSDFEED_RETURN_IF_ERROR(WaitChunk(c, &slot));
      size_t i = cursor_ % bs;
      buf->labels[n] = slot->buffer->labels[i];
      if (fixed_shape())
        std::memcpy(buf->images.data() + n * sb, slot->buffer->images.data() + i * sb, sb);
      else
        staged.push_back(std::move(slot->staging[i]));
      ++n;
      ++cursor_;
      if (cursor_ % bs == 0 || cursor_ >= end_sample_) Release(c);
    }
    int h = out_h_, w = out_w_;
    if (!fixed_shape()) {
      std::vector<const Image*> ims;
      for (const auto& im : staged) ims.push_back(&im);
      SSDFEED_RETURN_IF_ERROR(RenderStaged(ims, buf.get(), &h, &w));
    }
    Fill(buf, n, h, w, out);
    *got = n > 0 && !(opts_.drop_last && n < bs);
    return Status::OK();
  }

  void Fill(std::shared_ptr<BatchBuffer> buf, size_t n, int h, int w, Batch* out) const {
    out->buffer = std::move(buf);
    out->size = n;
    out->dtype = opts_.output.dtype;
    bool nchw = opts_.output.layout == Layout::kNCHW;
    size_t H = static_cast<size_t>(h), W = static_cast<size_t>(w),
           C = static_cast<size_t>(channels_);
    out->shape = nchw ? std::array<size_t, 4>{n, C, H, W} : std::array<size_t, 4>{n, H, W, C};
  }

  // Caller holds mu_ (or no worker runs).
  void Reset(Slot& s, uint64_t batch) {
    s.batch = batch;
    s.done = 0;
    s.error = Status::OK();
    uint64_t first = batch * opts_.batch_size;
    s.count = first >= end_sample_ ? 0 : std::min<uint64_t>(opts_.batch_size, end_sample_ - first);
    s.buffer.reset();
    if (s.count == 0) return;
    if (fixed_shape()) {
      s.buffer = pool_->Acquire(sample_bytes() * opts_.batch_size, opts_.batch_size);
    } else {
      s.buffer = pool_->Acquire(0, opts_.batch_size);
      s.staging.resize(opts_.batch_size);
    }
  }

  // How many consecutive plan positions a worker takes at once: one, unless
  // the cache reads direct, where a group's records are read together so
  // the device sees about kQueueDepth reads in flight across the workers.
  size_t GroupSize() const {
    if (!cache_ || !cache_->direct_reads()) return 1;
    constexpr int kQueueDepth = 32;
    return static_cast<size_t>(std::clamp(kQueueDepth / workers_, 4, kQueueDepth));
  }

  // A run of consecutive plan positions a worker has taken.
  struct Taken {
    uint64_t k = 0;
    size_t n = 0;
    Slot* slot = nullptr;
  };

  // Takes the next run of up to `group` positions, never crossing a chunk
  // (it fills one slot). Waits for ring space unless try_only: a worker
  // holding an unfinished run must not wait, the consumer may need that run
  // to free the space.
  bool Take(size_t group, bool try_only, Taken* t) {
    std::unique_lock<std::mutex> l(mu_);
    if (stop_ || next_sample_ >= end_sample_) return false;
    uint64_t k = next_sample_, b = k / opts_.batch_size;
    if (try_only && b >= next_chunk_ + nslots_) return false;
    t->k = k;
    t->n = static_cast<size_t>(
        std::min<uint64_t>({group, end_sample_ - k, (b + 1) * opts_.batch_size - k}));
    next_sample_ += t->n;
    space_cv_.wait(l, [&] { return stop_ || b < next_chunk_ + nslots_; });
    if (stop_) return false;
    t->slot = &slots_[b % nslots_];
    return true;
  }

  void Work() {
    FetchScratch scratch;
    std::vector<uint8_t> render;
    const size_t group = GroupSize();
    Taken cur;
    if (group == 1) {
      while (Take(1, false, &cur)) {
        size_t pos = cur.k % opts_.batch_size;
        Status s = Produce(order_[cur.k], cur.slot, pos, &scratch, &render);
        Finish(cur.slot, Substitute(cur.k, s, cur.slot, pos, &scratch, &render));
      }
      return;
    }
    // Direct reads: the next run's records are in flight while this run is
    // rendered, so the device always has work queued.
    if (!Take(group, false, &cur)) return;
    int which = 0;
    auto g = fetcher_.StartCachedMany(&order_[cur.k], cur.n, &scratch, which);
    while (true) {
      Taken next;
      bool ahead = Take(group, true, &next);
      SampleFetcher::Group gn;
      if (ahead) gn = fetcher_.StartCachedMany(&order_[next.k], next.n, &scratch, 1 - which);
      fetcher_.FinishCachedMany(&g, &scratch);
      RenderRun(cur, scratch.reads[which], &scratch, &render);
      if (!ahead) {
        if (!Take(group, false, &next)) return;
        gn = fetcher_.StartCachedMany(&order_[next.k], next.n, &scratch, 1 - which);
      }
      cur = next;
      g = std::move(gn);
      which = 1 - which;
    }
  }

  void RenderRun(const Taken& t, std::vector<CacheRead>& reads, FetchScratch* scratch,
                 std::vector<uint8_t>* render) {
    for (size_t j = 0; j < t.n; ++j) {
      uint64_t id = order_[t.k + j];
      size_t pos = (t.k + j) % opts_.batch_size;
      CacheRead& r = reads[j];
      Status s = r.status.ok() ? Render(id, r.sample, t.slot, pos, render)
                               : ProduceAfter(id, r.status, t.slot, pos, scratch, render);
      Finish(t.slot, Substitute(t.k + j, s, t.slot, pos, scratch, render));
    }
  }

  void Finish(Slot* slot, const Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok() && slot->error.ok()) slot->error = s;
    if (++slot->done == slot->count) ready_cv_.notify_all();
  }

  // Under on_error=skip, plan position k's sample failed with `got`: fills
  // its slot with the next good sample after it in the plan (cyclically),
  // so every rank serves the same number of full batches whatever is bad
  // (DDP ranks must stay in step) and the choice depends only on which
  // samples are bad. A bounded search: a run of bad samples that long means
  // a broken source, which is an error.
  Status Substitute(uint64_t k, Status got, Slot* slot, size_t pos, FetchScratch* scratch,
                    std::vector<uint8_t>* render) {
    if (got.ok() || !skipping()) return got;
    stats_->Add(Ctr::kSkipped);
    constexpr uint64_t kMaxTries = 256;
    uint64_t n = order_.size(), tries = std::min<uint64_t>(n - 1, kMaxTries);
    for (uint64_t j = 1; j <= tries; ++j) {
      uint64_t id = order_[(k + j) % n];
      if (Produce(id, slot, pos, scratch, render).ok()) return Status::OK();
    }
    return Status::Corruption("on_error=skip: " + got.message() + "; and the " +
                              std::to_string(tries) +
                              " samples after it in this rank's plan are bad too, none to "
                              "serve in its place");
  }

  Status Produce(uint64_t id, Slot* slot, size_t pos, FetchScratch* scratch,
                 std::vector<uint8_t>* render) {
    CachedSample cs;
    SSDFEED_RETURN_IF_ERROR(fetcher_.Fetch(id, scratch, &cs));
    return Render(id, cs, slot, pos, render);
  }

  // A grouped cache read that missed or failed: the rest of Fetch's path.
  Status ProduceAfter(uint64_t id, const Status& got, Slot* slot, size_t pos, FetchScratch* scratch,
                      std::vector<uint8_t>* render) {
    CachedSample cs;
    SSDFEED_RETURN_IF_ERROR(fetcher_.Resolve(id, got, scratch, &cs));
    return Render(id, cs, slot, pos, render);
  }

  Status Render(uint64_t id, const CachedSample& cs, Slot* slot, size_t pos,
                std::vector<uint8_t>* render) {
    slot->buffer->labels[pos] = cs.label;
    // Either path sizes the batch by channels_: another count would overrun it.
    if (cs.channels != channels_)
      return Status::Corruption(source_->Describe(id) + ": prepared sample has " +
                                std::to_string(cs.channels) + " channels, the batch " +
                                std::to_string(channels_));
    if (!fixed_shape()) {  // served as prepared; shapes checked in RenderStaged
      Image& st = slot->staging[pos];
      st.Reset(cs.height, cs.width, cs.channels);
      std::memcpy(st.pixels.data(), cs.pixels, st.bytes());
      return Status::OK();
    }
    CropBox box{0, 0, cs.height, cs.width, false};
    if (opts_.augment.enabled) {
      box = SampleCrop(opts_.augment, cs.height, cs.width, AugmentKey(opts_.seed, epoch_, id));
    } else if (cs.height != out_h_ || cs.width != out_w_) {
      return Status::InvalidArgument(source_->Describe(id) + ": prepared size " +
                                     std::to_string(cs.height) + "x" + std::to_string(cs.width) +
                                     " differs from the batch's");
    }
    Status r =
        RenderSample({cs.pixels, cs.height, cs.width, cs.channels}, box, out_h_, out_w_,
                     opts_.output, slot->buffer->images.data() + pos * sample_bytes(), render);
    return r.ok() ? r : r.WithContext(source_->Describe(id));
  }

  // Without a fixed output shape, samples of one batch must agree; renders
  // them (dtype, layout) into buf.
  Status RenderStaged(const std::vector<const Image*>& ims, BatchBuffer* buf, int* out_h,
                      int* out_w) {
    int h = ims.empty() ? 0 : ims[0]->height, w = ims.empty() ? 0 : ims[0]->width;
    for (const Image* im : ims) {
      if (im->height != h || im->width != w)
        return Status::InvalidArgument(
            "samples of unequal shape in one batch (" + std::to_string(h) + "x" +
            std::to_string(w) + " and " + std::to_string(im->height) + "x" +
            std::to_string(im->width) +
            "): set Prepare(resize=...) or center_crop, or an augment, or batch_size=1");
    }
    *out_h = h;
    *out_w = w;
    size_t sb = sample_bytes(h, w);
    buf->images.resize(sb * ims.size());
    std::vector<uint8_t> render;
    for (size_t i = 0; i < ims.size(); ++i) {
      PixelsView px{ims[i]->pixels.data(), ims[i]->height, ims[i]->width, ims[i]->channels};
      SSDFEED_RETURN_IF_ERROR(RenderSample(px, {0, 0, h, w, false}, h, w, opts_.output,
                                           buf->images.data() + i * sb, &render));
    }
    return Status::OK();
  }

  void RecordWait(double s) { stats_->Observe(Hist::kBatchWait, s); }

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
  std::unique_ptr<Source> source_;
  std::unique_ptr<CacheEntry> cache_;
  std::unique_ptr<StatsPublisher> stats_;
  mutable SampleFetcher fetcher_;
  std::unique_ptr<MetricsServer> server_;  // stops before stats_ goes
  std::shared_ptr<BatchPool> pool_;
  int workers_ = 1;
  size_t nslots_ = 3;
  int out_h_ = 0, out_w_ = 0, channels_ = 3;
  bool fixed_ = false;

  std::vector<uint64_t> ids_;  // validation_split: the ids of this part
  uint64_t epoch_ = 0;
  ResumeLayers resumed_from_;                 // epoch_ resumes from merged states (elastic)
  uint64_t start_pos_ = 0, start_batch_ = 0;  // where the next StartEpoch begins
  std::vector<uint64_t> order_;
  mutable std::mutex consumer_mu_;  // Next/SetEpoch/LoadState/Stop/state
  std::mutex mu_;
  std::condition_variable ready_cv_, space_cv_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  bool stop_ = false, running_ = false;
  uint64_t next_sample_ = 0, end_sample_ = 0;  // plan positions (workers)
  uint64_t next_chunk_ = 0;                    // oldest chunk not yet released
  uint64_t cursor_ = 0, consumed_ = 0;         // consumer: next position, batches taken
  double waited_ = 0;                          // consumer wait within one Next
};

// The stats file under the cache root; in memory without a cache or metrics.
std::unique_ptr<StatsPublisher> OpenStats(const LoaderOptions& o, CacheEntry* cache) {
  if (cache == nullptr || !o.metrics) return StatsPublisher::InMemory();
  std::string warning;
  auto p = StatsPublisher::Create(o.cache.env, o.cache, Basename(cache->dir()), &warning);
  if (!warning.empty()) EnvOf(o)->Warn(warning);
  return p;
}

}  // namespace

namespace {

// Where a rank's state stands in epoch `e` (the merge's epoch): its plan
// positions consumed, or all of them when it already finished e.
Result<uint64_t> PositionIn(const LoaderState& s, uint64_t e) {
  uint64_t pos = std::max<uint64_t>(s.position, s.batches_consumed * s.batch_size);
  if (s.epoch == e) return pos;
  if (s.epoch == e + 1 && pos == 0 && s.resumed_from.empty()) return UINT64_MAX;
  return Status::InvalidArgument("merge_states: rank " + std::to_string(s.rank) + " is in epoch " +
                                 std::to_string(s.epoch) + ", another in " + std::to_string(e) +
                                 "; ranks must stop in the same epoch");
}

Status CheckMergeable(const std::vector<LoaderState>& states) {
  if (states.empty()) return Status::InvalidArgument("merge_states: no states");
  const LoaderState& a = states[0];
  std::vector<bool> seen(states.size(), false);
  for (const LoaderState& s : states) {
    if (s.merged)
      return Status::InvalidArgument("merge_states: a state is already merged; load it first");
    if (s.world_size != static_cast<int>(states.size()))
      return Status::InvalidArgument("merge_states: got " + std::to_string(states.size()) +
                                     " states, but rank " + std::to_string(s.rank) +
                                     " was one of " + std::to_string(s.world_size) +
                                     "; pass the state of every rank");
    if (s.rank < 0 || s.rank >= s.world_size || seen[static_cast<size_t>(s.rank)])
      return Status::InvalidArgument("merge_states: rank " + std::to_string(s.rank) +
                                     " is missing or repeated; pass each rank's state once");
    seen[static_cast<size_t>(s.rank)] = true;
    if (s.seed != a.seed || s.num_samples != a.num_samples || s.batch_size != a.batch_size ||
        s.shard != a.shard || s.rotate_every != a.rotate_every)
      return Status::InvalidArgument(
          "merge_states: the states are of different loaders (seed, dataset size, batch_size, "
          "shard or rotate_every differ)");
  }
  return Status::OK();
}

}  // namespace

Result<LoaderState> MergeStates(const std::vector<LoaderState>& states) {
  SSDFEED_RETURN_IF_ERROR(CheckMergeable(states));
  uint64_t e = states[0].epoch;
  for (const LoaderState& s : states) e = std::min(e, s.epoch);
  LoaderState out = states[0];
  out.epoch = e;
  out.rank = 0;
  out.world_size = 0;
  out.batches_consumed = out.position = 0;
  out.merged = true;
  out.resumed_from.clear();
  std::vector<uint64_t> layer(states.size());
  bool started = false;
  for (const LoaderState& s : states) {
    SSDFEED_ASSIGN_OR_RETURN(uint64_t pos, PositionIn(s, e));
    layer[static_cast<size_t>(s.rank)] = pos;
    started = started || pos > 0 || !s.resumed_from.empty();
    if (s.epoch == e && !s.resumed_from.empty()) out.resumed_from = s.resumed_from;
  }
  for (const LoaderState& s : states)
    if (s.epoch == e && s.resumed_from != out.resumed_from)
      return Status::InvalidArgument("merge_states: the ranks resumed epoch " + std::to_string(e) +
                                     " from different merged states; pass states of one job");
  if (started) out.resumed_from.push_back(std::move(layer));  // else: a fresh start of e
  return out;
}

Result<std::unique_ptr<Loader>> Loader::Open(const LoaderOptions& o) {
  if (o.batch_size == 0) return Status::InvalidArgument("batch_size must be >= 1");
  if (o.workers < 0) return Status::InvalidArgument("workers must be >= 0 (0: one per core)");
  if (o.prefetch < 1) return Status::InvalidArgument("prefetch must be >= 1 (batches ahead)");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return Status::InvalidArgument("need 0 <= rank < world_size");
  SSDFEED_RETURN_IF_ERROR(o.prepare.Validate());
  const AugmentSpec& a = o.augment;
  if (a.enabled &&
      (a.height <= 0 || a.width <= 0 || a.scale_min <= 0 || a.scale_min > a.scale_max ||
       a.scale_max > 1 || a.ratio_min <= 0 || a.ratio_min > a.ratio_max))
    return Status::InvalidArgument(
        "augment: need size > 0, 0 < scale_min <= scale_max <= 1, "
        "0 < ratio_min <= ratio_max");
  if (o.rotate_every < 1) return Status::InvalidArgument("rotate_every must be >= 1 (epochs)");
  SSDFEED_ASSIGN_OR_RETURN(auto src, OpenSource(o.source, o.source_options));
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
    } else if (entry.status().code() == Status::Code::kInvalidArgument) {
      return entry.status();  // a refused root or a bad option: the user must act
    } else {
      // No room, an I/O error, no descriptors left: train from the origin, say so.
      EnvOf(o)->Warn(entry.status().message() + "; serving from the origin without a cache");
      cache_open_errors = 1;
    }
  }
  auto stats = OpenStats(o, cache.get());
  auto impl = std::make_unique<LoaderImpl>(o, std::move(src), std::move(cache), std::move(stats));
  impl->cache_open_errors_ = cache_open_errors;
  if (o.metrics_port > 0) SSDFEED_RETURN_IF_ERROR(impl->StartMetricsServer());
  return std::unique_ptr<Loader>(std::move(impl));
}

}  // namespace ssdfeed
