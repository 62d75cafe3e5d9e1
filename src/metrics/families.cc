#include "metrics/families.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <limits>
#include <sstream>

namespace ssdfeed::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

struct HistName {
  const char* name;
  const char* help;
  std::vector<std::pair<Hist, const char*>> tiers;  // label tier=...; none: no label
};

const HistName kHistNames[] = {
    {"ssdfeed_read_seconds",
     "Latency of one sample's read, per tier (cache or origin).",
     {{Hist::kReadCache, "cache"}, {Hist::kReadOrigin, "origin"}}},
    {"ssdfeed_prepare_seconds", "Decode + prepare time of one sample.", {{Hist::kPrepare, ""}}},
    {"ssdfeed_batch_wait_seconds",
     "Time the consumer waited for one batch (non-zero: the accelerator starves).",
     {{Hist::kBatchWait, ""}}},
};

ClientMetric::Label L(const char* k, const std::string& v) { return {k, v}; }

MetricFamily Family(const std::string& name, const std::string& help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void AddGauge(MetricFamily* f, std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = v;
  f->metric.push_back(std::move(m));
}

void AddCounter(MetricFamily* f, std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = v;
  f->metric.push_back(std::move(m));
}

ClientMetric HistogramMetric(const HistSnapshot& h) {
  ClientMetric m;
  const auto& bounds = HistogramBounds();
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cum += h.buckets[i];
    m.histogram.bucket.push_back({cum, bounds[i]});
  }
  cum += h.buckets[bounds.size()];
  m.histogram.bucket.push_back({cum, std::numeric_limits<double>::infinity()});
  // The count is the +Inf bucket, so a reader never sees them disagree.
  m.histogram.sample_count = cum;
  m.histogram.sample_sum = h.sum_seconds();
  return m;
}

double Seconds(uint64_t ms) { return static_cast<double>(ms) / 1e3; }

void AddDeviceFamilies(const DiskStats& d, Families* out) {
  std::vector<ClientMetric::Label> dev{L("device", d.device)};
  struct Row {
    const char* name;
    const char* help;
    double value;
    bool gauge;
  } rows[] = {
      {"ssdfeed_device_reads_total", "Reads completed by the cache's block device.",
       static_cast<double>(d.reads), false},
      {"ssdfeed_device_read_bytes_total", "Bytes read by the cache's block device.",
       static_cast<double>(d.read_sectors) * 512, false},
      {"ssdfeed_device_read_time_seconds_total",
       "Time spent on reads (rate / rate(reads) = iostat r_await).", Seconds(d.read_ms), false},
      {"ssdfeed_device_writes_total", "Writes completed by the cache's block device.",
       static_cast<double>(d.writes), false},
      {"ssdfeed_device_write_bytes_total", "Bytes written by the cache's block device.",
       static_cast<double>(d.write_sectors) * 512, false},
      {"ssdfeed_device_write_time_seconds_total", "Time spent on writes.", Seconds(d.write_ms),
       false},
      {"ssdfeed_device_io_in_progress", "I/Os in flight on the cache's block device now.",
       static_cast<double>(d.in_flight), true},
      {"ssdfeed_device_io_time_seconds_total",
       "Time the device had I/O in flight (rate = iostat %util / 100).", Seconds(d.io_ms), false},
      {"ssdfeed_device_io_weighted_seconds_total",
       "I/O time weighted by the I/Os in flight (rate = iostat aqu-sz, the queue depth).",
       Seconds(d.weighted_ms), false},
  };
  for (const auto& r : rows) {
    auto f = Family(r.name, r.help, r.gauge ? MetricType::Gauge : MetricType::Counter);
    if (r.gauge)
      AddGauge(&f, dev, r.value);
    else
      AddCounter(&f, dev, r.value);
    out->push_back(std::move(f));
  }
}

// major:minor of the block device behind a mount of an anonymous device
// (btrfs, some device-mapper setups): its source in /proc/self/mountinfo.
bool MountSourceDevice(unsigned maj, unsigned min, dev_t* out) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, want = std::to_string(maj) + ":" + std::to_string(min);
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string id, parent, devno;
    ss >> id >> parent >> devno;
    if (devno != want) continue;
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3));
    std::string fstype, source, options;
    tail >> fstype >> source >> options;
    struct stat st;
    if (::stat(source.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      *out = st.st_rdev;
      return true;
    }
    // A container's overlay root: its writes (and our cache) land on the
    // filesystem of upperdir.
    size_t up = options.find("upperdir=");
    if (fstype == "overlay" && up != std::string::npos) {
      std::string dir = options.substr(up + 9, options.find(',', up) - up - 9);
      if (::stat(dir.c_str(), &st) == 0 && major(st.st_dev) != 0) {
        *out = st.st_dev;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

Result<DiskStats> DiskStatsFor(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, path);
  dev_t dev = st.st_dev;
  if (major(dev) == 0 && !MountSourceDevice(major(dev), minor(dev), &dev))
    return Status::NotFound(path + ": not on a block device");
  std::ifstream in("/proc/diskstats");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    unsigned maj = 0, min = 0;
    DiskStats d;
    uint64_t reads_merged = 0, writes_merged = 0;
    ss >> maj >> min >> d.device >> d.reads >> reads_merged >> d.read_sectors >> d.read_ms >>
        d.writes >> writes_merged >> d.write_sectors >> d.write_ms >> d.in_flight >> d.io_ms >>
        d.weighted_ms;
    if (ss && maj == major(dev) && min == minor(dev)) return d;
  }
  return Status::NotFound(path + ": device " + std::to_string(major(dev)) + ":" +
                          std::to_string(minor(dev)) + " not in /proc/diskstats");
}

namespace {

// One family per Prometheus name of the timer table (seconds), its rows told
// apart by label stage; the help is the family's first row's.
void AddTimerFamilies(const std::vector<std::pair<std::string, StatsSnapshot>>& per_entry,
                      Families* out) {
  for (size_t i = 0; i < kNumTimers; ++i) {
    const TimerInfo& first = kTimers[i];
    if (i > 0 && kTimers[i - 1].name == first.name) continue;  // rows of one family are adjacent
    auto f = Family(std::string(first.name), std::string(first.help), MetricType::Counter);
    for (size_t j = i; j < kNumTimers && kTimers[j].name == first.name; ++j) {
      for (const auto& [entry, s] : per_entry) {
        std::vector<ClientMetric::Label> labels{L("entry", entry)};
        if (kTimers[j].is_stage()) labels.push_back(L("stage", std::string(kTimers[j].stage)));
        AddCounter(&f, std::move(labels), static_cast<double>(s[kTimers[j].slot]) * 1e-9);
      }
    }
    out->push_back(std::move(f));
  }
}

}  // namespace

void AddStatsFamilies(const std::vector<std::pair<std::string, StatsSnapshot>>& per_entry,
                      Families* out) {
  for (const auto& c : kCounters) {
    auto f = Family(std::string(c.name), std::string(c.help), MetricType::Counter);
    for (const auto& [entry, s] : per_entry)
      AddCounter(&f, {L("entry", entry)}, static_cast<double>(s[c.slot]));
    out->push_back(std::move(f));
  }
  AddTimerFamilies(per_entry, out);
  for (const auto& h : kHistNames) {
    auto f = Family(h.name, h.help, MetricType::Histogram);
    for (const auto& [entry, s] : per_entry) {
      for (const auto& [slot, tier] : h.tiers) {
        ClientMetric m = HistogramMetric(s.hist(slot));
        m.label.push_back(L("entry", entry));
        if (*tier != '\0') m.label.push_back(L("tier", tier));
        f.metric.push_back(std::move(m));
      }
    }
    out->push_back(std::move(f));
  }
  auto adm = Family("ssdfeed_admission_stopped",
                    "1 when a live job's entry stopped admitting new samples, with the reason.",
                    MetricType::Gauge);
  for (const auto& [entry, s] : per_entry)
    AddGauge(&adm, {L("entry", entry), L("reason", AdmissionReason(s.admission))},
             s.admission == Admission::kAdmitting ? 0 : 1);
  out->push_back(std::move(adm));
}

Status AddRootFamilies(Env* env, const CacheOptions& c, const RootStats& stats,
                       const std::vector<EntryInfo>& entries, Families* out) {
  auto procs = Family("ssdfeed_processes", "Live processes using the entry.", MetricType::Gauge);
  for (const auto& [entry, e] : stats.entries)
    AddGauge(&procs, {L("entry", entry)}, e.live_processes);
  out->push_back(std::move(procs));
  auto skipped = Family("ssdfeed_stats_files_skipped",
                        "Stats files skipped at the last scrape (truncated, foreign version).",
                        MetricType::Gauge);
  AddGauge(&skipped, {}, static_cast<double>(stats.warnings.size()));
  out->push_back(std::move(skipped));

  uint64_t free_bytes = 0, fs_bytes = 0;
  SSDFEED_RETURN_IF_ERROR(env->FsSpace(c.root, &free_bytes, &fs_bytes));
  // Busy: a stopped process holds the capacity lock; the gauge is left out
  // of this scrape rather than read without the lock (it could count an
  // entry being evicted twice, over the capacity).
  auto sampled = RootBytes(c);
  if (!sampled.ok() && !sampled.status().IsBusy()) return sampled.status();
  double used = sampled.ok() ? static_cast<double>(*sampled) : -1;
  auto effective = EffectiveCapacity(c);
  double capacity = effective.ok() ? static_cast<double>(*effective) : -1;
  struct {
    const char* name;
    const char* help;
    double v;
  } root[] = {
      {"ssdfeed_cache_capacity_bytes", "Most bytes the cache root may hold.", capacity},
      {"ssdfeed_cache_used_bytes", "Bytes the cache root holds.", used},
      {"ssdfeed_filesystem_free_bytes", "Free bytes (unprivileged) on the root's filesystem.",
       static_cast<double>(free_bytes)},
      {"ssdfeed_filesystem_size_bytes", "Size of the root's filesystem.",
       static_cast<double>(fs_bytes)},
  };
  for (const auto& r : root) {
    if (r.v < 0) continue;  // not sampled (above)
    auto f = Family(r.name, r.help, MetricType::Gauge);
    AddGauge(&f, {}, r.v);
    out->push_back(std::move(f));
  }

  auto bytes = Family("ssdfeed_entry_bytes", "Bytes an entry holds.", MetricType::Gauge);
  auto present =
      Family("ssdfeed_entry_samples_present", "Samples an entry holds.", MetricType::Gauge);
  auto total =
      Family("ssdfeed_entry_samples_total", "Samples of the entry's source.", MetricType::Gauge);
  auto last = Family("ssdfeed_entry_last_used_timestamp_seconds",
                     "When a job last opened the entry (unix seconds).", MetricType::Gauge);
  auto in_use =
      Family("ssdfeed_entry_in_use", "1 while a job holds the entry open.", MetricType::Gauge);
  for (const auto& e : entries) {
    std::vector<ClientMetric::Label> l{L("entry", EntryShortId(e.name))};
    AddGauge(&bytes, l, static_cast<double>(e.bytes));
    AddGauge(&present, l, static_cast<double>(e.samples_present));
    AddGauge(&total, l, static_cast<double>(e.samples_total));
    AddGauge(&last, l, static_cast<double>(e.last_used));
    AddGauge(&in_use, l, e.in_use ? 1 : 0);
  }
  for (auto* f : {&bytes, &present, &total, &last, &in_use}) out->push_back(std::move(*f));

  auto disk = DiskStatsFor(c.root);
  if (disk.ok()) AddDeviceFamilies(*disk, out);
  return Status::OK();
}

}  // namespace ssdfeed::metrics
