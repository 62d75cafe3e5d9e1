#include "ssdfeed/plan.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>

#include "cache/field_section.h"
#include "cache/record_format.h"
#include "image/augment.h"
#include "image/pixel_codec.h"
#include "image/yuv420_crop.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"
#include "ssdfeed/warm.h"
#include "util/latch.h"

namespace ssdfeed {

EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec, int probes) {
  EntryEstimate e;
  e.samples = source.size();
  if (e.samples == 0 || probes <= 0) return e;
  uint64_t n = std::min<uint64_t>(e.samples, static_cast<uint64_t>(probes));
  // The origin path the fetcher stores from, so that fields (masks, boxes,
  // arrays) are prepared and counted as a record holds them.
  SampleFetcher origin(&source, spec, nullptr, 0, nullptr, /*time_stages=*/false);
  FetchScratch scratch;
  CachedSample prepared;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id = i * e.samples / n;
    e.tried++;
    if (!origin.Fetch(id, &scratch, &prepared).ok()) continue;
    e.probed++;
    e.origin_bytes += scratch.encoded.bytes.size();
    e.pixel_bytes += prepared.bytes();
    // As the record stores them (masks as runs), not as prepared.
    e.field_bytes +=
        prepared.fields.empty() ? 0 : cache_format::PreparedSectionSize(scratch.fields);
  }
  return e;
}

uint32_t RecordReadWindow(double record_bytes) {
  // Records are packed: one starts anywhere in a page, so its read takes the
  // pages it touches, on average one more than its size rounds up to.
  uint64_t pages = (static_cast<uint64_t>(std::max(0.0, record_bytes)) + 4095) / 4096 + 1;
  return static_cast<uint32_t>(pages * 4096);
}

namespace {

constexpr uint64_t kAlign = 4096;

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

// Writes n bytes of non-zero data (an allocated but unwritten extent reads
// as zeros without touching the device).
Status FillScratch(int fd, uint64_t n, const std::string& path) {
  constexpr size_t kChunk = 4 << 20;
  std::unique_ptr<char, decltype(&std::free)> buf(
      static_cast<char*>(std::aligned_alloc(kAlign, kChunk)), &std::free);
  if (!buf) return Status::IOError(path + ": out of memory for the scratch buffer");
  for (size_t i = 0; i < kChunk; ++i) buf.get()[i] = static_cast<char>(i * 131 + 7);
  for (uint64_t off = 0; off < n; off += kChunk) {
    ssize_t w = ::pwrite(fd, buf.get(), kChunk, static_cast<off_t>(off));
    if (w != static_cast<ssize_t>(kChunk))
      return Status::IOError(Errno(path + ": writing the scratch file", w < 0 ? errno : ENOSPC));
  }
  if (::fsync(fd) != 0) return Status::IOError(Errno(path + ": fsync", errno));
  return Status::OK();
}

// The scratch file, open and already nameless: nothing is left in dir when
// the process is killed mid-measurement. An O_TMPFILE file never has a
// name; where the filesystem has no O_TMPFILE, a named one (exclusive, so
// nothing placed there is written through) is unlinked at once. O_DIRECT
// where the filesystem takes it (tmpfs and some network filesystems refuse
// it with EINVAL): *direct says which.
Result<int> OpenNamelessScratch(const std::string& dir, const std::string& named, bool* direct) {
  int err = 0;
  for (bool d : {true, false}) {
    int flags = O_RDWR | O_CLOEXEC | (d ? O_DIRECT : 0);
    *direct = d;
    int fd = ::open(dir.c_str(), flags | O_TMPFILE, 0600);
    if (fd >= 0) return fd;
    fd = ::open(named.c_str(), flags | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      if (::unlink(named.c_str()) == 0) return fd;
      err = errno;
      ::close(fd);
      return Status::IOError(Errno(named + ": cannot unlink the scratch file", err));
    }
    err = errno;
    if (err != EINVAL) break;
  }
  return Status::IOError(Errno(named + ": cannot create the scratch file", err));
}

}  // namespace

Result<std::unique_ptr<DeviceReadProbe>> DeviceReadProbe::Create(const std::string& dir,
                                                                 const DeviceReadOptions& o) {
  std::string path = dir + "/.ssdfeed-plan-" + std::to_string(::getpid()) + ".scratch";
  uint64_t bytes = std::max<uint64_t>(o.file_bytes / (4 << 20), 1) * (4 << 20);
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0)
    return Status::IOError(Errno(dir + ": cannot measure the device there", errno));
  if (static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < 2 * bytes)
    return Status::IOError(dir + ": less than " + std::to_string(2 * bytes >> 20) +
                           " MiB free for the device measurement's scratch file");
  bool direct = true;
  SSDFEED_ASSIGN_OR_RETURN(int fd, OpenNamelessScratch(dir, path, &direct));
  std::unique_ptr<DeviceReadProbe> p(new DeviceReadProbe(path, fd, direct, o));
  p->o_.file_bytes = bytes;
  SSDFEED_RETURN_IF_ERROR(FillScratch(fd, bytes, path));
  return p;
}

// The file has no name (OpenNamelessScratch): closing it frees its blocks.
DeviceReadProbe::~DeviceReadProbe() { ::close(fd_); }

DeviceReadRate DeviceReadProbe::Measure(uint32_t block) const {
  DeviceReadRate r;
  r.block = block;
  r.qd = std::max(1, o_.qd);
  r.direct = direct_;
  uint64_t slots = o_.file_bytes > block ? (o_.file_bytes - block) / kAlign + 1 : 1;
  std::atomic<uint64_t> reads{0};
  auto t0 = std::chrono::steady_clock::now();
  auto deadline = t0 + std::chrono::duration<double>(o_.seconds);
  // One thread per read in flight, as the loader's workers keep about
  // kPlanQueueDepth reads queued: the device sees the same depth.
  std::vector<std::thread> threads;
  for (int t = 0; t < r.qd; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<char, decltype(&std::free)> buf(
          static_cast<char*>(std::aligned_alloc(kAlign, block)), &std::free);
      if (!buf) return;
      uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1), n = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
        off_t off = static_cast<off_t>(x % slots * kAlign);
        if (::pread(fd_, buf.get(), block, off) != static_cast<ssize_t>(block)) break;
        ++n;
      }
      reads += n;
    });
  }
  for (auto& th : threads) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.iops = s > 0 ? reads / s : 0;
  r.mb_s = r.iops * block / 1e6;
  return r;
}

void ApplyPlanModel(std::vector<CodecPlan>* rows, int cores) {
  double raw = 0;
  for (const auto& r : *rows)
    if (r.codec == RecordCodec::kRaw) raw = r.record_bytes;
  for (auto& r : *rows) {
    r.footprint_x_raw = raw > 0 ? r.record_bytes / raw : 0;
    r.cores_images_per_s = r.cores_measured_images_per_s > 0
                               ? r.cores_measured_images_per_s
                               : r.per_core_images_per_s * std::max(1, cores);
    r.device_images_per_s = r.device.iops;
    r.predicted_images_per_s = r.device_images_per_s > 0
                                   ? std::min(r.cores_images_per_s, r.device_images_per_s)
                                   : r.cores_images_per_s;
  }
}

int RecommendCodec(const std::vector<CodecPlan>& rows) {
  double best = 0;
  for (const auto& r : rows) best = std::max(best, r.predicted_images_per_s);
  int pick = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].predicted_images_per_s < best * (1 - kPlanTie)) continue;
    if (pick < 0 || rows[i].record_bytes < rows[pick].record_bytes) pick = static_cast<int>(i);
  }
  return pick;
}

namespace {

struct PreparedProbe {
  std::vector<uint8_t> pixels;
  int h = 0, w = 0, c = 0;
  size_t field_bytes = 0;
};

Result<std::vector<PreparedProbe>> PrepareProbes(const Source& source, PrepareSpec spec,
                                                 int probes) {
  spec.codec = RecordCodec::kRaw;
  SampleFetcher origin(&source, spec, nullptr, 0, nullptr, /*time_stages=*/false);
  FetchScratch scratch;
  CachedSample s;
  uint64_t total = source.size(), n = std::min<uint64_t>(total, std::max(1, probes));
  std::vector<PreparedProbe> out;
  Status last;
  for (uint64_t i = 0; i < n; ++i) {
    last = origin.Fetch(i * total / n, &scratch, &s);
    if (!last.ok() || s.bytes() == 0) continue;
    out.push_back({std::vector<uint8_t>(s.pixels, s.pixels + s.bytes()), s.height, s.width,
                   s.channels,
                   s.fields.empty() ? 0 : cache_format::PreparedSectionSize(scratch.fields)});
  }
  if (out.empty())
    return Status::InvalidArgument(
        "none of the " + std::to_string(n) + " sampled items could be prepared to time the codecs" +
        (last.ok() ? std::string(" (no image field)") : ": " + last.message()));
  return out;
}

std::atomic<uint64_t> g_checksum_sink{0};

double ThreadCpuSeconds() {
  struct timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// The warm path's work per sample once its record is read: the checksum of
// the stored bytes, the codec's decode, the crop into a batch. As in an
// epoch, no record is in the CPU's caches when its turn comes (it arrives
// from the page cache or by DMA): the probes are copied into a pool larger
// than a last-level cache, and the crops go to a batch-sized ring. So do the
// decoded pixels: the loader decodes each record of a batch into that
// sample's own buffer, so the crop reads them back from memory, not from a
// buffer that one reused slot would keep in the core's cache (which made
// yuv420's prediction 1.45x what it measured). The ring holds at most a
// batch's worth and the pool's 96 MiB, so large unresized probes stay
// bounded.
class WarmPathWork {
  static constexpr size_t kBatchRing = 256;

 public:
  WarmPathWork(const std::vector<PreparedProbe>& probes, const std::vector<std::string>& stored,
               RecordCodec codec, const CodecPlanOptions& o)
      : probes_(probes), codec_(codec), o_(o) {
    constexpr size_t kPoolBytes = 96u << 20, kMaxPool = 600;
    size_t mean = 1;
    for (const auto& x : stored) mean += x.size() / stored.size();
    pool_.resize(std::clamp<size_t>(kPoolBytes / mean, 3 * probes.size(), kMaxPool));
    for (size_t i = 0; i < pool_.size(); ++i) pool_[i] = stored[i % stored.size()];
    size_t pixels = 1;
    for (const auto& p : probes) pixels += p.pixels.size() / probes.size();
    decoded_ring_ = std::clamp<size_t>(kPoolBytes / pixels, 1, kBatchRing);
  }
  size_t pool_size() const { return pool_.size(); }

  // One thread's state, reused from sample to sample as a worker's is.
  struct Worker {
    PixelCodecScratch cs;
    std::vector<uint8_t> render;
    std::vector<std::vector<uint8_t>> batch = std::vector<std::vector<uint8_t>>(kBatchRing);
    std::vector<std::vector<uint8_t>> decoded;  // decoded_ring_ buffers, made on first use
    uint64_t sink = 0;
  };

  // Pool records [begin, end) (wrapping), cropped for epoch.
  Status Run(size_t begin, size_t end, int epoch, Worker* w) const {
    for (size_t i = begin; i < end; ++i) SSDFEED_RETURN_IF_ERROR(One(i % pool_.size(), epoch, w));
    g_checksum_sink.fetch_add(
        w->sink,
        std::memory_order_relaxed);  // the checksums are work the warm path does: keep them
    return Status::OK();
  }

 private:
  Status One(size_t k, int epoch, Worker* w) const {
    const PreparedProbe& p = probes_[k % probes_.size()];
    const std::string& record = pool_[k];
    w->sink += XXH3_64bits(record.data(), record.size());
    CropBox box{0, 0, p.h, p.w, false};
    int oh = p.h, ow = p.w;
    if (o_.augment.enabled) {
      box = SampleCrop(o_.augment, p.h, p.w, AugmentKey(0, epoch, k));
      oh = o_.augment.height, ow = o_.augment.width;
    }
    std::vector<uint8_t>& out = w->batch[k % w->batch.size()];
    out.resize(static_cast<size_t>(oh) * ow * p.c * DTypeSize(o_.output.dtype));
    // As the loader renders a crop of yuv420: from the planes (SampleRenderer).
    if (codec_ == RecordCodec::kYuv420 && Yuv420CropApplies(p.h, p.w, p.c, box, oh, ow))
      return RenderYuv420Sample(record, p.h, p.w, box, oh, ow, o_.output, out.data(), &w->render);
    const uint8_t* px = reinterpret_cast<const uint8_t*>(record.data());
    if (codec_ != RecordCodec::kRaw) {
      if (w->decoded.size() != decoded_ring_) w->decoded.resize(decoded_ring_);
      std::vector<uint8_t>& decoded = w->decoded[k % decoded_ring_];
      decoded.resize(p.pixels.size());
      SSDFEED_RETURN_IF_ERROR(DecodePixels(codec_, record, p.h, p.w, p.c, decoded.data(), &w->cs));
      px = decoded.data();
    }
    return RenderSample(PixelsView{px, p.h, p.w, p.c}, box, oh, ow, o_.output, out.data(),
                        &w->render);
  }

  const std::vector<PreparedProbe>& probes_;
  RecordCodec codec_;
  const CodecPlanOptions& o_;
  std::vector<std::string> pool_;
  size_t decoded_ring_ = 1;
};

// One core's images/s: the fastest of 3 groups of the pool, in this
// thread's CPU time, so a neighbour's burst on a shared machine does not
// lower it. The first pass is untimed: first-use costs are not the steady
// state an epoch runs in.
Result<double> TimePerCore(const WarmPathWork& work, size_t warmup) {
  WarmPathWork::Worker w;
  SSDFEED_RETURN_IF_ERROR(work.Run(0, warmup, 0, &w));
  size_t group = work.pool_size() / 3;
  double best = 0;
  for (size_t g = 0; g < 3; ++g) {
    double t0 = ThreadCpuSeconds();
    SSDFEED_RETURN_IF_ERROR(work.Run(g * group, (g + 1) * group, 1, &w));
    double s = ThreadCpuSeconds() - t0;
    if (g == 0 || s < best) best = s;
  }
  return best > 0 ? group / best : 0;
}

// What `cores` threads do together, in wall-clock time: on a node whose
// cores other work shares (the training process, other jobs), less than
// one core's rate times cores, and that is what the loader will get.
Result<double> TimeOnCores(const WarmPathWork& work, size_t warmup, int cores) {
  Latch ready(cores), go(1);
  std::vector<Status> status(cores);
  std::vector<std::thread> threads;
  size_t n = work.pool_size();
  for (int t = 0; t < cores; ++t) {
    threads.emplace_back([&, t] {
      WarmPathWork::Worker w;
      status[t] = work.Run(0, warmup, 0, &w);
      ready.CountDown();
      go.Wait();
      // Each thread starts elsewhere in the pool: different records at once.
      size_t start = t * n / cores;
      if (status[t].ok()) status[t] = work.Run(start, start + n, 2, &w);
    });
  }
  ready.Wait();
  auto t0 = std::chrono::steady_clock::now();
  go.CountDown();
  for (auto& th : threads) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const Status& st : status) SSDFEED_RETURN_IF_ERROR(st);
  return s > 0 ? static_cast<double>(n) * cores / s : 0;
}

// Decodes every stored probe and compares it with the prepared pixels.
Status MeasureFidelity(const std::vector<PreparedProbe>& probes,
                       const std::vector<std::string>& stored, CodecPlan* row) {
  PixelCodecScratch cs;
  std::vector<uint8_t> out;
  double sq = 0, n = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const PreparedProbe& p = probes[i];
    out.resize(p.pixels.size());
    SSDFEED_RETURN_IF_ERROR(DecodePixels(row->codec, stored[i], p.h, p.w, p.c, out.data(), &cs));
    for (size_t k = 0; k < out.size(); ++k) {
      double d = static_cast<double>(out[k]) - p.pixels[k];
      sq += d * d;
    }
    n += static_cast<double>(out.size());
  }
  row->identical = sq == 0;
  row->psnr_db = sq == 0 ? 0 : 10 * std::log10(255.0 * 255.0 / (sq / n));
  return Status::OK();
}

}  // namespace

Result<std::vector<std::pair<RecordCodec, int>>> ParseCodecList(std::string_view text, int quality,
                                                                std::string_view option) {
  std::vector<std::pair<RecordCodec, int>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    SSDFEED_ASSIGN_OR_RETURN(RecordCodec c,
                             ParseEnum<RecordCodec>(text.substr(start, comma - start), option));
    for (const auto& [have, q] : out)
      if (have == c)
        return Status::InvalidArgument(std::string(option) + ": '" + EnumName(c) +
                                       "' is listed twice in '" + std::string(text) + "'");
    out.emplace_back(c, quality);
    start = comma + 1;
  }
  return out;
}

std::string CodecLabel(RecordCodec codec, int quality) {
  std::string s = EnumName(codec);
  if (codec == RecordCodec::kJpeg) s += " q" + std::to_string(quality);
  return s;
}

Result<std::vector<CodecPlan>> PlanCodecs(const Source& source, const PrepareSpec& spec,
                                          const CodecPlanOptions& o) {
  SSDFEED_ASSIGN_OR_RETURN(std::vector<PreparedProbe> probes,
                           PrepareProbes(source, spec, o.probes));
  std::unique_ptr<DeviceReadProbe> device;
  if (!o.device_dir.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(device, DeviceReadProbe::Create(o.device_dir, o.device));
  }
  std::vector<CodecPlan> rows;
  PixelCodecScratch cs;
  for (const auto& [codec, quality] : o.codecs) {
    CodecPlan row;
    row.codec = codec;
    row.quality = quality;
    std::vector<std::string> stored(probes.size());
    double bytes = 0;
    for (size_t i = 0; i < probes.size(); ++i) {
      const PreparedProbe& p = probes[i];
      SSDFEED_RETURN_IF_ERROR(
          EncodePixels(codec, quality, p.pixels.data(), p.h, p.w, p.c, &stored[i], &cs));
      bytes += cache_format::kRecordHeaderSize + stored[i].size() + p.field_bytes;
    }
    row.record_bytes = bytes / probes.size();
    SSDFEED_RETURN_IF_ERROR(MeasureFidelity(probes, stored, &row));
    WarmPathWork work(probes, stored, codec, o);
    SSDFEED_ASSIGN_OR_RETURN(row.per_core_images_per_s, TimePerCore(work, probes.size()));
    SSDFEED_ASSIGN_OR_RETURN(row.cores_measured_images_per_s,
                             TimeOnCores(work, probes.size(), std::max(1, o.cores)));
    if (device) row.device = device->Measure(RecordReadWindow(row.record_bytes));
    rows.push_back(row);
  }
  ApplyPlanModel(&rows, o.cores);
  return rows;
}

}  // namespace ssdfeed
