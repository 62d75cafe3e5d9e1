// Runs the real loader, optionally emulating an accelerator's compute time
// per batch (MLPerf Storage's method), and reports what a user needs to size
// storage and CPUs: images/s, MB/s, hit rate, consumer wait, utilisation.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <thread>

#include "bench/bench.h"
#include "cache/capacity.h"
#include "image/augment.h"
#include "image/cv_call.h"
#include "pipeline/entry_key.h"
#include "ssdfeed/defaults.h"
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

// The /proc/diskstats line of device major:minor: its name and the eleven
// counters after it. Empty when absent.
std::vector<uint64_t> DiskCounters(unsigned maj, unsigned min, std::string* name) {
  std::ifstream in("/proc/diskstats");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    unsigned a = 0, b = 0;
    std::string n;
    if (!(ls >> a >> b >> n) || a != maj || b != min) continue;
    std::vector<uint64_t> v;
    uint64_t x;
    while (v.size() < 11 && ls >> x) v.push_back(x);
    if (v.size() < 11) return {};
    *name = n;
    return v;
  }
  return {};
}

}  // namespace

namespace {

// The eleven counters of the /proc/diskstats line named name; empty when absent.
std::vector<uint64_t> DiskCountersByName(const std::string& name) {
  std::ifstream in("/proc/diskstats");
  std::string line;
  std::vector<uint64_t> v;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    unsigned a, b;
    std::string n;
    if (!(ls >> a >> b >> n) || n != name) continue;
    uint64_t x;
    while (v.size() < 11 && ls >> x) v.push_back(x);
    break;
  }
  if (v.size() < 11) v.clear();
  return v;
}

// iostat -x's figures for the dt seconds between two reads of the counters.
DeviceStats DeviceStatsBetween(const std::string& name, const std::vector<uint64_t>& start,
                               const std::vector<uint64_t>& end, double dt) {
  DeviceStats d;
  if (start.size() < 11 || end.size() < 11 || dt <= 0) return d;
  // Fields: 0 reads, 2 sectors read, 3 ms reading, 6 sectors written,
  // 9 ms with I/O in flight, 10 weighted ms (sum of each request's time).
  auto delta = [&](int i) { return static_cast<double>(end[i] - start[i]); };
  d.device = name;
  d.reads_per_s = delta(0) / dt;
  d.read_mb_s = delta(2) * 512 / dt / 1e6;
  d.write_mb_s = delta(6) * 512 / dt / 1e6;
  d.r_await_ms = delta(0) > 0 ? delta(3) / delta(0) : 0;
  d.aqu_sz = delta(10) / (dt * 1e3);
  d.util_pct = std::min(100.0, delta(9) / (dt * 1e3) * 100);
  return d;
}

}  // namespace

DeviceSampler::DeviceSampler(const std::string& path) {
  struct stat st;
  t0_ = t_last_ = Now();
  if (::stat(path.c_str(), &st) != 0) return;
  start_ = last_ = DiskCounters(major(st.st_dev), minor(st.st_dev), &device_);
}

DeviceStats DeviceSampler::Stop() const {
  if (start_.empty()) return {};
  // Same device: looked up by name among the current lines.
  return DeviceStatsBetween(device_, start_, DiskCountersByName(device_), Now() - t0_);
}

DeviceStats DeviceSampler::Sample() {
  if (start_.empty()) return {};
  double now = Now();
  std::vector<uint64_t> end = DiskCountersByName(device_);
  DeviceStats d = DeviceStatsBetween(device_, last_, end, now - t_last_);
  if (!end.empty()) last_ = std::move(end), t_last_ = now;
  return d;
}

WaitHistogram MakeWaitHistogram(const std::vector<double>& waits_ms) {
  WaitHistogram h;
  if (waits_ms.empty()) return h;
  double lo = 1e300, hi = 0;
  for (double w : waits_ms) {
    if (w > 0) lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  constexpr double kFloorMs = 1e-3;  // 1 us: below the clock's use here
  lo = std::max(kFloorMs, lo > hi ? kFloorMs : lo);
  hi = std::max(hi, lo);
  int d0 = static_cast<int>(std::floor(std::log10(lo)));
  int d1 = static_cast<int>(std::floor(std::log10(hi))) + 1;
  constexpr int kPerDecade = 4;
  for (int i = d0 * kPerDecade; i <= d1 * kPerDecade; ++i)
    h.edges_ms.push_back(std::pow(10.0, static_cast<double>(i) / kPerDecade));
  h.counts.assign(h.edges_ms.size() - 1, 0);
  for (double w : waits_ms) {
    auto it = std::upper_bound(h.edges_ms.begin(), h.edges_ms.end(), w);
    size_t bin = it == h.edges_ms.begin() ? 0 : static_cast<size_t>(it - h.edges_ms.begin()) - 1;
    ++h.counts[std::min(bin, h.counts.size() - 1)];
  }
  return h;
}

namespace {

constexpr char kDropCaches[] = "/proc/sys/vm/drop_caches";

// What stops a write to drop_caches, from its errno: root alone is not
// enough in a container, where /proc/sys is mounted read-only or the
// process lacks CAP_SYS_ADMIN.
std::string DropCachesRefusal(int err) {
  std::string why = std::string(kDropCaches) + ": " + std::strerror(err) + ": ";
  switch (err) {
    case EROFS:
      return why + "/proc/sys is mounted read-only (a container?): run on the host, or in a " +
             "privileged container";
    case EACCES:
    case EPERM:
      return why + (::geteuid() == 0
                        ? "root without CAP_SYS_ADMIN (a container?): run on the host, or "
                          "in a privileged container"
                        : "dropping the page cache needs root (CAP_SYS_ADMIN)");
    case ENOENT:
      return why + "no such file (is /proc mounted?)";
    default:
      return why + "cannot drop the page cache here";
  }
}

}  // namespace

Status CanDropPageCache() {
  int fd = ::open(kDropCaches, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(DropCachesRefusal(errno));
  ::close(fd);
  return Status::OK();
}

Status DropPageCache() {
  ::sync();
  int fd = ::open(kDropCaches, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(DropCachesRefusal(errno));
  ssize_t n = ::write(fd, "3\n", 2);
  int err = errno;
  ::close(fd);
  if (n != 2) return Status::InvalidArgument(DropCachesRefusal(n < 0 ? err : EIO));
  return Status::OK();
}

namespace {

double CpuSeconds() {
  struct rusage u;
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto sec = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

}  // namespace

std::vector<TimelinePoint> TimelineIntervals(const std::vector<TimelineSample>& samples,
                                             double min_interval) {
  std::vector<TimelinePoint> out;
  if (samples.size() < 2) return out;
  size_t n = samples.size() - 1;
  size_t k = (n + kMaxTimelinePoints - 1) / kMaxTimelinePoints;
  std::vector<size_t> cuts;
  for (size_t i = 0; i < n; i += k) cuts.push_back(i);
  cuts.push_back(n);
  if (cuts.size() > 2 && samples[n].t - samples[cuts[cuts.size() - 2]].t < min_interval / 2)
    cuts.erase(cuts.end() - 2);
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const TimelineSample &a = samples[cuts[c]], &b = samples[cuts[c + 1]];
    double dt = b.t - a.t;
    if (dt <= 0) continue;
    TimelinePoint p;
    p.t_s = b.t - samples[0].t;
    p.images_per_s = static_cast<double>(b.images - a.images) / dt;
    p.utilization = (b.busy - a.busy) / dt;
    for (size_t m = cuts[c] + 1; m <= cuts[c + 1]; ++m) {
      const DeviceStats& d = samples[m].device;
      double w = (samples[m].t - samples[m - 1].t) / dt;
      if (!d.device.empty()) p.device.device = d.device;
      p.device.read_mb_s += d.read_mb_s * w;
      p.device.write_mb_s += d.write_mb_s * w;
      p.device.reads_per_s += d.reads_per_s * w;
      p.device.r_await_ms += d.r_await_ms * w;
      p.device.aqu_sz += d.aqu_sz * w;
      p.device.util_pct += d.util_pct * w;
    }
    out.push_back(p);
  }
  return out;
}

namespace {

// Samples an epoch's progress between batches (cumulative images and
// accelerator time, the device's counters), then turns the samples into
// intervals, at most kMaxTimelinePoints of them.
class TimelineRecorder {
 public:
  // t0: the epoch's start, on Now()'s clock.
  TimelineRecorder(const std::string& device_path, double t0)
      : t0_(t0), dev_(device_path.empty() ? "/" : device_path), has_dev_(!device_path.empty()) {
    samples_.push_back({t0_, 0, 0, {}});
  }
  // After each batch; samples when kInterval has passed since the last.
  void Tick(uint64_t images, double busy) {
    double now = Now();
    if (now - samples_.back().t < kInterval) return;
    Add(now, images, busy);
  }
  // t_end: the epoch's end, the last interval's.
  std::vector<TimelinePoint> Finish(uint64_t images, double busy, double t_end) {
    Add(t_end, images, busy);
    return TimelineIntervals(samples_, kInterval);
  }

 private:
  static constexpr double kInterval = 0.1;
  void Add(double now, uint64_t images, double busy) {
    samples_.push_back({now, images, busy, has_dev_ ? dev_.Sample() : DeviceStats{}});
  }
  double t0_;
  DeviceSampler dev_;
  bool has_dev_;
  std::vector<TimelineSample> samples_;
};

// A deep copy of a batch's images: the headspace epoch hands it out again
// while the loader's own buffers go back to its pool.
Batch CopyBatch(const Batch& b) {
  Batch c = b;
  c.buffer = std::make_shared<BatchBuffer>();
  c.buffer->images = b.buffer->images;
  c.buffer->labels = b.buffer->labels;
  return c;
}

Result<LoaderBenchEpoch> RunEpoch(Loader* l, int epoch, double compute_s,
                                  const std::string& device_path = "", Batch* keep = nullptr) {
  LoaderStats before = l->stats();
  DeviceSampler dev(device_path.empty() ? "/" : device_path);
  l->SetEpoch(static_cast<uint64_t>(epoch));
  std::vector<double> waits;
  uint64_t images = 0, bytes = 0;
  double t0 = Now(), busy = 0, cpu0 = CpuSeconds();
  TimelineRecorder timeline(device_path, t0);
  while (true) {
    Batch b;
    double w0 = Now();
    SSDFEED_ASSIGN_OR_RETURN(bool more, l->Next(&b));
    if (!more) break;
    waits.push_back(Now() - w0);
    images += b.size;
    bytes += b.buffer->images.size() / std::max<size_t>(1, b.shape[0]) * b.size;
    if (keep != nullptr && waits.size() == 1) *keep = CopyBatch(b);
    if (compute_s > 0) {  // the accelerator is busy; the loader keeps working
      std::this_thread::sleep_for(std::chrono::duration<double>(compute_s));
      busy += compute_s;
    }
    timeline.Tick(images, busy);
  }
  double t_end = Now();
  double secs = t_end - t0, cpu = CpuSeconds() - cpu0;
  LoaderStats after = l->stats();
  DeviceStats ds = device_path.empty() ? DeviceStats{} : dev.Stop();
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
  e.device = ds;
  e.cpu_seconds = cpu;
  e.batches = waits.size();
  e.images = images;
  e.timeline = timeline.Finish(images, busy, t_end);
  for (double& w : waits) w *= 1e3;
  e.waits = MakeWaitHistogram(waits);
  if (hits > 0)
    e.record_bytes = static_cast<double>(after.cache_bytes - before.cache_bytes) / hits + 40;
  auto b = LoaderStatsFields(before), a = LoaderStatsFields(after);
  // Cumulative fields per epoch; the step-wait window's as they stand at its end.
  for (size_t i = 0; i < a.size(); ++i) {
    bool window = a[i].first.starts_with("step_wait_");
    e.stats.emplace_back(a[i].first, window ? a[i].second : a[i].second - b[i].second);
  }
  return e;
}

// The compute floor: `batch` handed to the consumer `batches` times with no
// read behind it. The consumer copies it (as it would to the accelerator)
// and runs the emulated compute, so the epoch's images/s is what the
// consumer alone can take.
LoaderBenchEpoch RunHeadspace(const Batch& batch, uint64_t batches, double compute_s, int epoch) {
  std::vector<uint8_t> staging(batch.buffer->images.size());
  std::vector<double> waits;
  uint64_t images = 0;
  double t0 = Now(), busy = 0, cpu0 = CpuSeconds();
  TimelineRecorder timeline("", t0);
  for (uint64_t i = 0; i < batches; ++i) {
    // The hand-off: nothing to read or wait for, so no wait is recorded
    // (timing an empty statement would only time the scheduler).
    const Batch& b = batch;
    waits.push_back(0);
    if (!staging.empty())  // a batch of fields alone has no image bytes
      std::memcpy(staging.data(), b.buffer->images.data(), staging.size());
    images += b.size;
    if (compute_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(compute_s));
      busy += compute_s;
    }
    timeline.Tick(images, busy);
  }
  double t_end = Now();
  LoaderBenchEpoch e;
  e.epoch = epoch;
  e.seconds = t_end - t0;
  e.cpu_seconds = CpuSeconds() - cpu0;
  e.images_per_s = e.seconds > 0 ? images / e.seconds : 0;
  e.mb_per_s = e.seconds > 0 ? static_cast<double>(staging.size()) * batches / e.seconds / 1e6 : 0;
  e.hit_rate = 1;
  e.p50_wait_ms = Percentile(waits, 0.5) * 1e3;
  e.p99_wait_ms = Percentile(waits, 0.99) * 1e3;
  e.utilization = compute_s > 0 && e.seconds > 0 ? busy / e.seconds : 0;
  e.batches = batches;
  e.images = images;
  e.timeline = timeline.Finish(images, busy, t_end);
  for (double& w : waits) w *= 1e3;
  e.waits = MakeWaitHistogram(waits);
  return e;
}

}  // namespace

// The storage row the warm epochs are held to: random O_DIRECT reads of the
// window a record read takes (its bytes rounded out to 4 KiB at both ends)
// at the queue depth the loader keeps, on the cache root's filesystem.
Status MeasureStorage(const LoaderBenchOptions& o, double record_bytes, LoaderBenchResult* r) {
  StorageBenchOptions so;
  uint32_t window = static_cast<uint32_t>((record_bytes + 4095) / 4096 + 1) * 4096;
  so.block_sizes = {window};
  so.queue_depths = {32};
  so.seconds_per_row = 3;
  so.file_bytes = 1ull << 30;
  SSDFEED_ASSIGN_OR_RETURN(StorageResult sr, BenchStorage(o.loader.cache.root, so));
  for (const auto& row : sr.rows)
    if (row.pattern == "randread") r->storage = row;
  r->storage_engine = sr.engine + (sr.direct ? "" : " (buffered: O_DIRECT refused)");
  return Status::OK();
}

double ThreadCpuSeconds() {
  struct timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Single-thread images/s of decode + prepare and of the augmentation alone
// (RandomResizedCrop + flip into the output), on the source's first samples:
// what one core can do at best on a cold and on a warm epoch.
Status MeasureBounds(const LoaderBenchOptions& o, LoaderBenchResult* r) {
  const LoaderOptions& lo = o.loader;
  SSDFEED_ASSIGN_OR_RETURN(auto src, OpenSource(lo.source, lo.source_options));
  // Three groups of up to 200 different samples, each decoded once as an
  // epoch decodes them (no input hot in the CPU's caches); the fastest
  // group counts, so a neighbour's burst on a shared core (a hyperthread
  // sibling, another VM) during one does not lower the bound.
  size_t total = std::min<size_t>(600, src->size());
  size_t groups = total >= 3 ? 3 : 1, n = total / groups;
  std::vector<EncodedSample> enc(groups * n);
  for (size_t i = 0; i < enc.size(); ++i) SSDFEED_RETURN_IF_ERROR(src->Read(i, &enc[i]));
  Decoder dec;
  std::vector<Image> prepared(enc.size());
  // Untimed first: the decoder's and the caches' first-use costs are not
  // the steady state an epoch runs in.
  Image warmup;
  for (size_t i = 0; i < std::min<size_t>(20, n); ++i)
    SSDFEED_RETURN_IF_ERROR(dec.DecodeAndPrepare(enc[i].bytes, lo.prepare, &warmup));
  // CPU time of this thread, like the epochs' per-CPU-second rates.
  double decode_s = 0;
  for (size_t g = 0; g < groups; ++g) {
    double t0 = ThreadCpuSeconds();
    for (size_t i = g * n; i < (g + 1) * n; ++i)
      SSDFEED_RETURN_IF_ERROR(dec.DecodeAndPrepare(enc[i].bytes, lo.prepare, &prepared[i]));
    double s = ThreadCpuSeconds() - t0;
    if (g == 0 || s < decode_s) decode_s = s;
  }
  AugmentSpec aug = lo.augment;
  int oh = aug.enabled ? aug.height : 0, ow = aug.enabled ? aug.width : 0;
  std::vector<uint8_t> out, scratch;
  // Several passes: one is too short to time on a fast core.
  constexpr int kPasses = 5;
  double t0 = ThreadCpuSeconds();
  for (int pass = 0; pass < kPasses; ++pass) {
    for (size_t i = 0; i < n; ++i) {
      const Image& im = prepared[i];
      PixelsView px{im.pixels.data(), im.height, im.width, im.channels};
      CropBox box{0, 0, im.height, im.width, false};
      int h = oh ? oh : im.height, w = ow ? ow : im.width;
      if (aug.enabled) box = SampleCrop(aug, im.height, im.width, AugmentKey(lo.seed, pass, i));
      out.resize(static_cast<size_t>(h) * w * im.channels * DTypeSize(lo.output.dtype));
      SSDFEED_RETURN_IF_ERROR(RenderSample(px, box, h, w, lo.output, out.data(), &scratch));
    }
  }
  double aug_s = ThreadCpuSeconds() - t0;
  // The same crops through OpenCV alone (cv::resize INTER_LINEAR, then
  // cv::flip, into uint8 HWC): the render's reference, reported next to it.
  cv::Mat resized, flipped;
  t0 = ThreadCpuSeconds();
  SSDFEED_RETURN_IF_ERROR(CvCall("bench the OpenCV crop and resize", [&] {
    for (int pass = 0; pass < kPasses; ++pass) {
      for (size_t i = 0; i < n; ++i) {
        const Image& im = prepared[i];
        cv::Mat img(im.height, im.width, CV_8UC(im.channels),
                    const_cast<uint8_t*>(im.pixels.data()));
        CropBox box{0, 0, im.height, im.width, false};
        if (aug.enabled) box = SampleCrop(aug, im.height, im.width, AugmentKey(lo.seed, pass, i));
        cv::Size size(ow ? ow : im.width, oh ? oh : im.height);
        cv::resize(img(cv::Rect(box.left, box.top, box.width, box.height)), resized, size, 0, 0,
                   cv::INTER_LINEAR);
        if (box.flip) cv::flip(resized, flipped, 1);
      }
    }
  }));
  double opencv_s = ThreadCpuSeconds() - t0;
  r->decode_prepare_per_core = decode_s > 0 ? n / decode_s : 0;
  r->augment_per_core = aug_s > 0 ? n * kPasses / aug_s : 0;
  r->augment_opencv_per_core = opencv_s > 0 ? n * kPasses / opencv_s : 0;
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  int workers = lo.workers > 0 ? lo.workers : DefaultWorkers();
  r->cores = std::max(1, hw > 0 ? std::min(workers, hw) : workers);
  return Status::OK();
}

Result<LoaderBenchResult> BenchLoader(const LoaderBenchOptions& o) {
  if (o.drop_caches) SSDFEED_RETURN_IF_ERROR(CanDropPageCache());
  SSDFEED_ASSIGN_OR_RETURN(auto loader, Loader::Open(o.loader));
  const std::string& dev = o.loader.cache.root;
  LoaderBenchResult r;
  Batch kept;  // the last epoch's first batch, for the headspace epoch
  Batch* keep = o.headspace ? &kept : nullptr;
  for (int e = 0; e < o.epochs; ++e) {
    bool drop = o.drop_caches && e > 0;
    if (drop) SSDFEED_RETURN_IF_ERROR(DropPageCache());
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch ep,
                             RunEpoch(loader.get(), e, o.compute_seconds, dev, keep));
    ep.dropped_caches = drop;
    r.epochs.push_back(ep);
  }
  if (o.drop_caches && o.epochs > 1) {  // the page-cache figure, next to the device's
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch ep,
                             RunEpoch(loader.get(), o.epochs, o.compute_seconds, dev, keep));
    r.epochs.push_back(ep);
  }
  if (o.headspace && kept.buffer != nullptr) {
    const LoaderBenchEpoch& last = r.epochs.back();
    r.headspace = RunHeadspace(kept, last.batches, o.compute_seconds, last.epoch + 1);
    r.headspace_gap = last.images_per_s > 0 ? r.headspace.images_per_s / last.images_per_s : 0;
  }
  if (o.compute_seconds > 0) {
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch cap, RunEpoch(loader.get(), o.epochs + 1, 0));
    r.capacity_images_per_s = cap.images_per_s;
    // One accelerator at 90% busy consumes 0.9 * batch / compute images/s.
    double per_gpu = 0.9 * o.loader.batch_size / o.compute_seconds;
    r.accelerators_at_90 = static_cast<int>(std::floor(cap.images_per_s / per_gpu));
  } else if (!r.epochs.empty()) {
    r.capacity_images_per_s = r.epochs.back().images_per_s;
  }
  if (o.vs_storage && !dev.empty()) {
    double rec = 0;
    for (const auto& e : r.epochs) rec = std::max(rec, e.record_bytes);
    if (rec > 0) SSDFEED_RETURN_IF_ERROR(MeasureStorage(o, rec, &r));
  }
  if (o.bounds) {
    // What a buffered fill left dirty is written back first: the writeback
    // threads would take CPU from the one-core bounds and flatter the ratio.
    ::sync();
    SSDFEED_RETURN_IF_ERROR(MeasureBounds(o, &r));
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
  // Which loader goes first alternates: the second epoch of a round finds
  // the caches and the CPU clock as the first left them, and on a shared
  // machine that order alone was worth several percent.
  for (int i = 0; i < rounds; ++i) {
    LoaderBenchEpoch a, b;
    if (i % 2 == 0) {
      SSDFEED_ASSIGN_OR_RETURN(a, RunEpoch(with.get(), i + 1, 0));
      SSDFEED_ASSIGN_OR_RETURN(b, RunEpoch(without.get(), i + 1, 0));
    } else {
      SSDFEED_ASSIGN_OR_RETURN(b, RunEpoch(without.get(), i + 1, 0));
      SSDFEED_ASSIGN_OR_RETURN(a, RunEpoch(with.get(), i + 1, 0));
    }
    r.with_metrics.push_back(a.images_per_s);
    r.without_metrics.push_back(b.images_per_s);
    r.cpu_us_with.push_back(a.cpu_seconds * 1e6 / (a.images_per_s * a.seconds));
    r.cpu_us_without.push_back(b.cpu_seconds * 1e6 / (b.images_per_s * b.seconds));
  }
  r.median_with = Percentile(r.with_metrics, 0.5);
  r.median_without = Percentile(r.without_metrics, 0.5);
  r.median_cpu_us_with = Percentile(r.cpu_us_with, 0.5);
  r.median_cpu_us_without = Percentile(r.cpu_us_without, 0.5);
  return r;
}

}  // namespace ssdfeed

namespace ssdfeed {

namespace {

// Reads an entry's files once through the page cache, so that the next
// epoch is served from memory (what a second epoch on a fitting dataset
// sees) without an untimed epoch of the loader.
void LoadIntoPageCache(const std::string& dir) {
  std::vector<char> buf(4 << 20);
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (!f.is_regular_file(ec)) continue;
    int fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

Result<EntryInfo> FindEntry(const CacheOptions& cache, const std::string& fingerprint) {
  SSDFEED_ASSIGN_OR_RETURN(std::vector<EntryInfo> entries, ListEntries(cache));
  for (auto& e : entries)
    if (e.name == fingerprint) return e;
  return Status::NotFound(cache.root + ": no entry " + fingerprint + " after its fill");
}

// One timed warm epoch of a freshly opened loader; the page cache dropped
// first when drop.
Result<LoaderBenchEpoch> WarmEpoch(LoaderOptions lo, WarmRead read, bool drop, int epoch) {
  lo.cache.warm_read = read;
  SSDFEED_ASSIGN_OR_RETURN(auto loader, Loader::Open(lo));
  if (drop) SSDFEED_RETURN_IF_ERROR(DropPageCache());
  SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch e, RunEpoch(loader.get(), epoch, 0));
  if (e.hit_rate < 0.999)
    return Status::Aborted("warm epoch " + std::to_string(epoch) + " missed the cache (hit rate " +
                           std::to_string(e.hit_rate) + "): was the entry evicted?");
  return e;
}

// The cold fill: the entry removed, one epoch that prepares and stores
// every sample.
Status FillFresh(const LoaderOptions& lo, const std::string& fingerprint, CodecBenchRow* row) {
  Status rm = RemoveEntry(lo.cache, fingerprint);
  if (!rm.ok() && !rm.IsNotFound()) return rm;
  {
    SSDFEED_ASSIGN_OR_RETURN(auto loader, Loader::Open(lo));
    SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch e, RunEpoch(loader.get(), 0, 0));
    row->cold_images_per_s = e.images_per_s;
  }
  SSDFEED_ASSIGN_OR_RETURN(EntryInfo info, FindEntry(lo.cache, fingerprint));
  row->entry_bytes = info.bytes;
  row->samples = info.samples_present;
  return Status::OK();
}

// plan's device rows again, measured while the throttle holds.
Status PlanThrottled(const CodecBenchOptions& o, const std::string& root, int cores,
                     std::vector<CodecBenchRow>* rows) {
  DeviceReadOptions dopt;
  dopt.seconds = o.plan_device_seconds;
  SSDFEED_ASSIGN_OR_RETURN(auto probe, DeviceReadProbe::Create(root, dopt));
  std::vector<CodecPlan> plans;
  for (auto& r : *rows) {
    r.plan_throttled = r.plan;
    r.plan_throttled.device = probe->Measure(r.plan.device.block);
    plans.push_back(r.plan_throttled);
  }
  ApplyPlanModel(&plans, cores);
  for (size_t i = 0; i < rows->size(); ++i) (*rows)[i].plan_throttled = plans[i];
  return Status::OK();
}

}  // namespace

namespace {

double Over(double x, double raw) { return raw > 0 ? x / raw : 0; }

// Each row's medians over raw's row's (the targets are such ratios,
// and only ratios from one run compare on a shared machine).
void SetRatiosToRaw(std::vector<CodecBenchRow>* rows) {
  const CodecBenchRow* raw = nullptr;
  for (const auto& row : *rows)
    if (row.codec == RecordCodec::kRaw) raw = &row;
  if (raw == nullptr) return;
  CodecBenchRow base = *raw;
  for (auto& row : *rows) {
    row.x_raw.footprint = row.footprint_x_raw;
    row.x_raw.page_cache = Over(row.page_cache_median, base.page_cache_median);
    row.x_raw.page_cache_per_cpu_s =
        Over(row.page_cache_per_cpu_s_median, base.page_cache_per_cpu_s_median);
    row.x_raw.dropped = Over(row.dropped_median, base.dropped_median);
    row.x_raw.throttled = Over(row.throttled_median, base.throttled_median);
  }
}

}  // namespace

Result<CodecBenchResult> BenchCodecs(const CodecBenchOptions& o) {
  const LoaderOptions& base = o.loader;
  const std::string& root = base.cache.root;
  SSDFEED_ASSIGN_OR_RETURN(auto src, OpenSource(base.source, base.source_options));
  CodecBenchResult r;
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  int workers = base.workers > 0 ? base.workers : DefaultWorkers();
  r.cores = std::max(1, hw > 0 ? std::min(workers, hw) : workers);
  // The root is made now rather than by the first fill: the throttle's
  // device and plan's scratch file are found through it. Made as the cache
  // makes it (0700, 02770 group-shared) and checked as it checks it, not
  // with the umask's 0755 that let every user read the records.
  CacheOptions root_opts = base.cache;
  if (root_opts.env == nullptr) root_opts.env = Env::Default();
  SSDFEED_RETURN_IF_ERROR(
      PrepareRoot(root_opts.env, root_opts).WithContext("cannot create the cache root"));
  if (o.dropped) {
    if (Status s = CanDropPageCache(); !s.ok()) r.dropped_skipped = s.message();
  } else {
    r.dropped_skipped = "not asked for";
  }
  if (o.throttle_read_bps == 0) {
    r.throttle_skipped = "not asked for (--throttle-read-bps)";
  } else if (Status s = CanThrottleReads(root); !s.ok()) {
    r.throttle_skipped = s.message();
  } else if (!r.dropped_skipped.empty()) {
    r.throttle_skipped =
        "throttled epochs read the device, so need the page cache dropped: " + r.dropped_skipped;
  }
  // plan first, as a user would run it, before any epoch warms the CPU
  // caches or fills the page cache.
  CodecPlanOptions po;
  po.codecs = o.codecs;
  po.probes = o.plan_probes;
  po.augment = base.augment;
  po.output = base.output;
  po.cores = r.cores;
  po.device_dir = root;
  po.device.seconds = o.plan_device_seconds;
  SSDFEED_ASSIGN_OR_RETURN(std::vector<CodecPlan> plans, PlanCodecs(*src, base.prepare, po));
  r.recommended = RecommendCodec(plans);
  std::vector<LoaderOptions> opts;
  std::vector<std::string> dirs;
  for (size_t i = 0; i < o.codecs.size(); ++i) {
    LoaderOptions lo = base;
    lo.prepare.codec = o.codecs[i].first;
    lo.prepare.quality = o.codecs[i].second;
    CodecBenchRow row;
    row.codec = lo.prepare.codec;
    row.quality = lo.prepare.quality;
    row.plan = plans[i];
    std::string fp = MakeEntryKey(*src, lo.source_options, lo.prepare).fingerprint();
    SSDFEED_RETURN_IF_ERROR(FillFresh(lo, fp, &row));
    SSDFEED_ASSIGN_OR_RETURN(EntryInfo info, FindEntry(lo.cache, fp));
    dirs.push_back(info.dir);
    opts.push_back(lo);
    r.rows.push_back(row);
  }
  double raw_bytes = 0;
  for (const auto& row : r.rows)
    if (row.codec == RecordCodec::kRaw) raw_bytes = static_cast<double>(row.entry_bytes);
  for (auto& row : r.rows) row.footprint_x_raw = raw_bytes > 0 ? row.entry_bytes / raw_bytes : 0;
  if (r.throttle_skipped.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(auto t, ReadThrottle::Start(root, o.throttle_read_bps));
    r.throttle_device = t->device();
    SSDFEED_RETURN_IF_ERROR(PlanThrottled(o, root, r.cores, &r.rows));
  }
  std::vector<CodecPlan> throttled_plans;
  for (const auto& row : r.rows) throttled_plans.push_back(row.plan_throttled);
  if (r.throttle_skipped.empty()) r.recommended_throttled = RecommendCodec(throttled_plans);
  int epoch = 1;
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < r.rows.size(); ++i) {
      LoadIntoPageCache(dirs[i]);
      SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch e,
                               WarmEpoch(opts[i], WarmRead::kBuffered, false, epoch++));
      r.rows[i].page_cache.push_back(e.images_per_s);
      if (e.cpu_seconds > 0)
        r.rows[i].page_cache_per_cpu_s.push_back(e.images_per_s * e.seconds / e.cpu_seconds);
    }
    if (!r.dropped_skipped.empty()) continue;
    // The loader's path for an entry larger than memory: O_DIRECT reads,
    // about kPlanQueueDepth in flight.
    for (size_t i = 0; i < r.rows.size(); ++i) {
      SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch e,
                               WarmEpoch(opts[i], WarmRead::kDirect, true, epoch++));
      r.rows[i].dropped.push_back(e.images_per_s);
    }
    if (!r.throttle_skipped.empty()) continue;
    SSDFEED_ASSIGN_OR_RETURN(auto t, ReadThrottle::Start(root, o.throttle_read_bps));
    for (size_t i = 0; i < r.rows.size(); ++i) {
      SSDFEED_ASSIGN_OR_RETURN(LoaderBenchEpoch e,
                               WarmEpoch(opts[i], WarmRead::kDirect, true, epoch++));
      r.rows[i].throttled.push_back(e.images_per_s);
    }
  }
  for (auto& row : r.rows) {
    row.page_cache_median = Percentile(row.page_cache, 0.5);
    row.page_cache_per_cpu_s_median = Percentile(row.page_cache_per_cpu_s, 0.5);
    row.dropped_median = Percentile(row.dropped, 0.5);
    row.throttled_median = Percentile(row.throttled, 0.5);
  }
  SetRatiosToRaw(&r.rows);
  return r;
}

Status PrepareBenchRoot(const CacheOptions& opts) {
  CacheOptions root = opts;
  if (root.env == nullptr) root.env = Env::Default();
  return PrepareRoot(root.env, root);
}

}  // namespace ssdfeed
