// Where a training step's data time goes: the loader's stage clocks (one
// per worker, src/util/stage_clock.h) and the per-step wait window, read
// through LoaderStats and the exporter's families.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <numeric>
#include <string>
#include <thread>

#include "metrics/families.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

struct Data {
  test::TempDir dir;
  std::string uri;
  Data() {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .format = "tfrecord",
                                 .count = 96,
                                 .classes = 5,
                                 .shard_size = 48,
                                 .min_side = 160,
                                 .max_side = 240});
  }
  LoaderOptions Opts() const {
    LoaderOptions o;
    o.source = uri;
    o.prepare.resize_short = 128;
    o.prepare.codec = RecordCodec::kZstd;  // a warm hit decodes its record
    o.augment.enabled = true;
    o.augment.height = o.augment.width = 96;
    o.batch_size = 8;
    o.shuffle = true;
    o.workers = 2;
    o.cache.root = dir.Sub("cache");
    return o;
  }
};

size_t Epoch(Loader* l) {
  Batch b;
  size_t batches = 0;
  while (true) {
    auto r = l->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) return batches;
    ++batches;
  }
}

double T(const std::array<double, kNumTimers>& t, Tmr s) { return t[static_cast<size_t>(s)]; }

double StageSum(const std::array<double, kNumTimers>& t) {
  double sum = 0;
  for (const auto& info : kTimers)
    if (info.is_stage()) sum += t[static_cast<size_t>(info.slot)];
  return sum;
}

std::array<double, kNumTimers> Minus(const std::array<double, kNumTimers>& a,
                                     const std::array<double, kNumTimers>& b) {
  std::array<double, kNumTimers> d{};
  for (size_t i = 0; i < kNumTimers; ++i) d[i] = a[i] - b[i];
  return d;
}

// Each worker's stages of one epoch add up to its busy time in that epoch
// (within 5%: what is left is the bookkeeping between samples).
void ExpectStagesCoverBusy(const LoaderStats& before, const LoaderStats& after, const char* epoch) {
  ASSERT_EQ(after.worker_times.size(), 2u);
  for (size_t w = 0; w < after.worker_times.size(); ++w) {
    auto d = before.worker_times.empty() ? after.worker_times[w]
                                         : Minus(after.worker_times[w], before.worker_times[w]);
    double busy = T(d, Tmr::kWorkerBusy), sum = StageSum(d);
    EXPECT_GT(busy, 0) << epoch << " worker " << w;
    EXPECT_NEAR(sum, busy, 0.05 * busy) << epoch << " worker " << w;
    EXPECT_EQ(T(d, Tmr::kCollate), 0) << "collate is the consumer's";
  }
}

TEST(StageTime, BreakdownAddsUpToEachWorkersBusyTimeColdAndWarm) {
  Data d;
  auto l = Loader::Open(d.Opts());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  LoaderStats none = (*l)->stats();
  ASSERT_EQ(Epoch(l->get()), 12u);
  LoaderStats cold = (*l)->stats();
  ASSERT_EQ(cold.cache_misses, 96u);
  ExpectStagesCoverBusy(none, cold, "cold");
  for (Tmr s : {Tmr::kOriginRead, Tmr::kDecode, Tmr::kPrepare, Tmr::kCacheWrite, Tmr::kAugment,
                Tmr::kHandoff})
    EXPECT_GT(cold[s], 0) << "cold epoch: " << Timer(s).key;

  ASSERT_EQ(Epoch(l->get()), 12u);
  LoaderStats warm = (*l)->stats();
  ASSERT_EQ(warm.cache_hits, 96u);
  ExpectStagesCoverBusy(cold, warm, "warm");
  auto dw = Minus(warm.times, cold.times);
  for (Tmr s : {Tmr::kCacheRead, Tmr::kRecordDecode, Tmr::kAugment, Tmr::kHandoff})
    EXPECT_GT(T(dw, s), 0) << "warm epoch: " << Timer(s).key;
  for (Tmr s : {Tmr::kOriginRead, Tmr::kDecode, Tmr::kPrepare, Tmr::kCacheWrite})
    EXPECT_EQ(T(dw, s), 0) << "a warm epoch has no " << Timer(s).key;

  // The process totals are the workers' and the consumer's, as published.
  double busy = 0;
  for (const auto& w : warm.worker_times) busy += T(w, Tmr::kWorkerBusy);
  EXPECT_DOUBLE_EQ(warm[Tmr::kWorkerBusy], busy);
  EXPECT_GT(warm[Tmr::kStep], 0);
}

TEST(StageTime, StepWaitWindowHasEveryStepsWait) {
  Data d;
  LoaderOptions o = d.Opts();
  o.workers = 1;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ((*l)->stats().step_wait_steps, 0u);
  ASSERT_EQ(Epoch(l->get()), 12u);
  LoaderStats s = (*l)->stats();
  EXPECT_EQ(s.step_wait_steps, 12u);
  EXPECT_LE(s.step_wait_p50, s.step_wait_p99);
  // A cold epoch from one worker: the first batch is waited for.
  EXPECT_GT(s.step_wait_p99, 0);
  // The p99 of 12 steps is their largest; none exceeds the total wait.
  EXPECT_LE(s.step_wait_p99, s.wait_seconds + 1e-9);
  EXPECT_LE(s.step_wait_last, s.step_wait_p99);
  std::map<std::string, double> fields;
  for (const auto& [k, v] : LoaderStatsFields(s)) fields[k] = v;
  EXPECT_EQ(fields.at("step_wait_p99_seconds"), s.step_wait_p99);
  EXPECT_EQ(fields.at("step_wait_steps"), 12);
  for (const auto& t : kTimers)
    EXPECT_EQ(fields.at(std::string(t.key) + "_seconds"), s[t.slot]) << t.key;
}

// stats() from another thread while the consumer and workers publish: the
// published times never go back (Prometheus would read a counter reset).
TEST(StageTime, TimesReadWhileServingNeverGoBack) {
  Data d;
  auto l = Loader::Open(d.Opts());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::atomic<bool> done{false};
  std::atomic<int> polls{0};
  int backwards = 0;
  std::thread poller([&] {
    std::array<double, kNumTimers> last{};
    do {
      LoaderStats s = (*l)->stats();
      for (size_t i = 0; i < kNumTimers; ++i) {
        if (s.times[i] < last[i]) ++backwards;
        last[i] = s.times[i];
      }
      ++polls;
    } while (!done.load());
  });
  // On a loaded machine the two epochs (about 0.1 s) could end before the
  // poller thread first ran, and it then polled nothing: wait for its first
  // read, so it reads while they run.
  while (polls.load() == 0) std::this_thread::yield();
  for (int e = 0; e < 2; ++e) EXPECT_EQ(Epoch(l->get()), 12u);
  done = true;
  poller.join();
  EXPECT_GT(polls.load(), 1);
  EXPECT_EQ(backwards, 0);
}

TEST(StageTime, MetricsOffTimesNothing) {
  Data d;
  LoaderOptions o = d.Opts();
  o.metrics = false;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(Epoch(l->get()), 12u);
  LoaderStats s = (*l)->stats();
  EXPECT_TRUE(s.worker_times.empty());
  for (const auto& t : kTimers) EXPECT_EQ(s[t.slot], 0) << t.key;
  EXPECT_EQ(s.step_wait_steps, 12u);  // the window is the consumer's, always kept
}

TEST(StageTime, RanksMaxWaitAddsUp) {
  Data d;
  auto l = Loader::Open(d.Opts());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  (*l)->RecordRankMaxWait(0.25);
  (*l)->RecordRankMaxWait(0.5);
  EXPECT_NEAR((*l)->stats()[Tmr::kRankMaxWait], 0.75, 1e-9);
}

// Every timer row is exported, in seconds, its stage as a label.
TEST(StageTime, EveryTimerIsAnExportedSeries) {
  StatsSnapshot snap;
  for (size_t i = 0; i < kNumTimers; ++i) snap.times[i] = (i + 1) * 1000000000ull;
  metrics::Families families;
  metrics::AddStatsFamilies({{"0123456789ab", snap}}, &families);
  std::map<std::string, double> series;  // name{stage}
  for (const auto& f : families)
    for (const auto& m : f.metric) {
      std::string stage;
      for (const auto& l : m.label)
        if (l.name == "stage") stage = l.value;
      if (f.name.find("seconds_total") != std::string::npos)
        series[f.name + "{" + stage + "}"] = m.counter.value;
      if (f.name == std::string(kTimers[0].name)) {
        EXPECT_FALSE(f.help.empty());
      }
    }
  for (size_t i = 0; i < kNumTimers; ++i) {
    std::string k = std::string(kTimers[i].name) + "{" + std::string(kTimers[i].stage) + "}";
    ASSERT_TRUE(series.count(k)) << k << " not exported";
    EXPECT_EQ(series[k], static_cast<double>(i + 1)) << k;
  }
}

}  // namespace
}  // namespace ssdfeed
