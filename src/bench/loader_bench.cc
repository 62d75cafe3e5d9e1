// Runs the real loader, optionally emulating an accelerator's compute time
// per batch (MLPerf Storage's method), and reports what a user needs to size
// storage and CPUs: images/s, MB/s, hit rate, consumer wait, utilisation.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "ssdfeed/bench.h"
#include "ssdfeed/metrics.h"

namespace ssdfeed {

const std::vector<ModelPreset>& ModelPresets() {
  // computation_time and batch_size of mlcommons/storage storage-conf/workload/*.yaml
  static const std::vector<ModelPreset> kPresets = {
      {"resnet50", "a100", 64, 0.151, "mlcommons/storage storage-conf/workload/resnet50_a100.yaml"},
      {"resnet50", "h100", 400, 0.224,
       "mlcommons/storage storage-conf/workload/resnet50_h100.yaml"},
      {"unet3d", "a100", 7, 0.636, "mlcommons/storage storage-conf/workload/unet3d_a100.yaml"},
      {"unet3d", "h100", 4, 0.188, "mlcommons/storage storage-conf/workload/unet3d_h100.yaml"},
  };
  return kPresets;
}

const ModelPreset* FindModelPreset(const std::string& model, const std::string& gpu) {
  for (const auto& p : ModelPresets())
    if (model == p.model && gpu == p.gpu) return &p;
  return nullptr;
}

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

Result<LoaderBenchEpoch> RunEpoch(Loader* l, int epoch, double compute_s) {
  LoaderStats before = l->stats();
  l->SetEpoch(static_cast<uint64_t>(epoch));
  std::vector<double> waits;
  uint64_t images = 0, bytes = 0;
  double t0 = Now(), busy = 0;
  while (true) {
    Batch b;
    double w0 = Now();
    SSDFEED_ASSIGN_OR_RETURN(bool more, l->Next(&b));
    if (!more) break;
    waits.push_back(Now() - w0);
    images += b.size;
    bytes += b.buffer->images.size() / std::max<size_t>(1, b.shape[0]) * b.size;
    if (compute_s > 0) {  // the accelerator is busy; the loader keeps working
      std::this_thread::sleep_for(std::chrono::duration<double>(compute_s));
      busy += compute_s;
    }
  }
  double secs = Now() - t0;
  LoaderStats after = l->stats();
  uint64_t hits = after.cache_hits - before.cache_hits;
  uint64_t misses = after.cache_misses - before.cache_misses;
  LoaderBenchEpoch e;
  e.epoch = epoch;
  e.seconds = secs;
  e.images_per_s = images / secs;
  e.mb_per_s = bytes / secs / 1e6;
  e.hit_rate = hits + misses ? static_cast<double>(hits) / (hits + misses) : 0;
  e.p50_wait_ms = Percentile(waits, 0.5) * 1e3;
  e.p99_wait_ms = Percentile(waits, 0.99) * 1e3;
  e.utilization = compute_s > 0 ? busy / secs : 0;
  auto b = LoaderStatsFields(before), a = LoaderStatsFields(after);
  for (size_t i = 0; i < a.size(); ++i) e.stats.emplace_back(a[i].first, a[i].second - b[i].second);
  return e;
}

}  // namespace

Result<LoaderBenchResult> BenchLoader(const LoaderBenchOptions& o) {
  SSDFEED_ASSIGN_OR_RETURN(auto loader, Loader::Open(o.loader));
  LoaderBenchResult r;
  for (int e = 0; e < o.epochs; ++e) {
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch ep, RunEpoch(loader.get(), e, o.compute_seconds));
    r.epochs.push_back(ep);
  }
  if (o.compute_seconds > 0) {
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch cap, RunEpoch(loader.get(), o.epochs, 0));
    r.capacity_images_per_s = cap.images_per_s;
    // One accelerator at 90% busy consumes 0.9 * batch / compute images/s.
    double per_gpu = 0.9 * o.loader.batch_size / o.compute_seconds;
    r.accelerators_at_90 = static_cast<int>(std::floor(cap.images_per_s / per_gpu));
  } else if (!r.epochs.empty()) {
    r.capacity_images_per_s = r.epochs.back().images_per_s;
  }
  return r;
}

Result<MetricsCostResult> BenchMetricsCost(const LoaderOptions& o, int rounds) {
  LoaderOptions on = o, off = o;
  on.metrics = true;
  off.metrics = false;
  SSDFEED_ASSIGN_OR_RETURN(auto with, Loader::Open(on));
  SSDFEED_ASSIGN_OR_RETURN(auto without, Loader::Open(off));
  // Fills the cache (cold), then one warm epoch each to settle.
  SSDFEED_RETURN_IF_ERROR(RunEpoch(with.get(), 0, 0).status());
  SSDFEED_RETURN_IF_ERROR(RunEpoch(without.get(), 0, 0).status());
  MetricsCostResult r;
  for (int i = 0; i < rounds; ++i) {
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch a, RunEpoch(with.get(), i + 1, 0));
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch b, RunEpoch(without.get(), i + 1, 0));
    r.with_metrics.push_back(a.images_per_s);
    r.without_metrics.push_back(b.images_per_s);
  }
  r.median_with = Percentile(r.with_metrics, 0.5);
  r.median_without = Percentile(r.without_metrics, 0.5);
  return r;
}

}  // namespace ssdfeed
