// ssdfeed plan's codec comparison (include/ssdfeed/plan.h): the model and the
// recommendation as pure functions of given measurements, the measurements'
// plumbing on a generated dataset, and bench loader's blkio read throttle.
// Nothing here asserts a rate: the machine running the tests may be slow
// or shared.
#include "ssdfeed/plan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "bench/bench.h"
#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

CodecPlan Row(RecordCodec c, double record_bytes, double per_core, double iops) {
  CodecPlan r;
  r.codec = c;
  r.record_bytes = record_bytes;
  r.per_core_images_per_s = per_core;
  r.device.iops = iops;
  return r;
}

TEST(PlanModel, PredictedRateIsTheLowerOfDeviceAndCores) {
  std::vector<CodecPlan> rows = {Row(RecordCodec::kRaw, 200000, 10000, 3000),
                                 Row(RecordCodec::kZstd, 150000, 2500, 4000),
                                 Row(RecordCodec::kJpeg, 40000, 1000, 15000)};
  ApplyPlanModel(&rows, 2);
  EXPECT_DOUBLE_EQ(rows[0].cores_images_per_s, 20000);
  EXPECT_DOUBLE_EQ(rows[0].predicted_images_per_s, 3000);  // the device's
  EXPECT_DOUBLE_EQ(rows[1].predicted_images_per_s, 4000);
  EXPECT_DOUBLE_EQ(rows[2].predicted_images_per_s, 2000);  // the cores'
  EXPECT_DOUBLE_EQ(rows[1].footprint_x_raw, 0.75);
  EXPECT_DOUBLE_EQ(rows[2].footprint_x_raw, 0.2);
  EXPECT_EQ(RecommendCodec(rows), 1);
}

TEST(PlanModel, AFasterDeviceRecommendsRawAndASlowerOneTheSmallestRecord) {
  // The same cores on an NVMe-class and on a SATA-class device.
  std::vector<CodecPlan> fast = {Row(RecordCodec::kRaw, 200000, 10000, 30000),
                                 Row(RecordCodec::kZstd, 150000, 2500, 40000),
                                 Row(RecordCodec::kJpeg, 40000, 1000, 150000)};
  std::vector<CodecPlan> slow = fast;
  for (auto& r : slow) r.device.iops /= 20;
  ApplyPlanModel(&fast, 4);
  ApplyPlanModel(&slow, 4);
  EXPECT_EQ(RecommendCodec(fast), 0);
  EXPECT_EQ(RecommendCodec(slow), 2);  // 4000 images/s against raw's 1500
}

TEST(PlanModel, PredictionsWithinTheTieFractionGoToTheSmallerRecord) {
  std::vector<CodecPlan> rows = {Row(RecordCodec::kRaw, 200000, 5000, 10000),
                                 Row(RecordCodec::kZstd, 150000, 5000 * (1 - kPlanTie / 2), 0)};
  ApplyPlanModel(&rows, 1);
  EXPECT_EQ(RecommendCodec(rows), 1);
  // Just outside the tie: the faster one, whatever its size.
  rows[1].per_core_images_per_s = 5000 * (1 - 2 * kPlanTie);
  ApplyPlanModel(&rows, 1);
  EXPECT_EQ(RecommendCodec(rows), 0);
}

TEST(PlanModel, WithoutADeviceMeasurementTheCoresDecide) {
  std::vector<CodecPlan> rows = {Row(RecordCodec::kRaw, 200000, 9000, 0),
                                 Row(RecordCodec::kJpeg, 40000, 1000, 0)};
  ApplyPlanModel(&rows, 2);
  EXPECT_DOUBLE_EQ(rows[0].predicted_images_per_s, 18000);
  EXPECT_EQ(RecommendCodec(rows), 0);
  std::vector<CodecPlan> none;
  EXPECT_EQ(RecommendCodec(none), -1);
}

TEST(PlanModel, RecordWindowCoversAPackedRecordWhereverItStarts) {
  EXPECT_EQ(RecordReadWindow(1), 8192u);
  EXPECT_EQ(RecordReadWindow(4096), 8192u);
  EXPECT_EQ(RecordReadWindow(4097), 12288u);
}

TEST(PlanCodecList, ParsesAndNamesWhatIsWrong) {
  auto ok = ParseCodecList("jpeg,raw", 75, "--codec");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0], std::make_pair(RecordCodec::kJpeg, 75));
  EXPECT_EQ((*ok)[1].first, RecordCodec::kRaw);
  auto bad = ParseCodecList("raw,png", 90, "--codec");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--codec"), std::string::npos);
  EXPECT_NE(bad.status().message().find("png"), std::string::npos);
  auto twice = ParseCodecList("raw,zstd,raw", 90, "--codecs");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
  EXPECT_FALSE(ParseCodecList("", 90, "--codec").ok());
  EXPECT_EQ(CodecLabel(RecordCodec::kJpeg, 80), "jpeg q80");
  EXPECT_EQ(CodecLabel(RecordCodec::kZstd, 80), "zstd");
}

TEST(PlanDevice, ScratchFileIsReadThenRemoved) {
  test::TempDir d;
  DeviceReadOptions o;
  o.seconds = 0.05;
  o.file_bytes = 8 << 20;
  o.qd = 4;
  std::string path;
  {
    auto p = DeviceReadProbe::Create(d.path(), o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    path = (*p)->path();
    DeviceReadRate r = (*p)->Measure(RecordReadWindow(150000));
    EXPECT_EQ(r.block, RecordReadWindow(150000));
    EXPECT_EQ(r.qd, 4);
    EXPECT_GT(r.iops, 0);
    EXPECT_EQ(r.direct, test::DirectIoWorks(d.path()));
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
  EXPECT_FALSE(DeviceReadProbe::Create(d.Sub("absent"), o).ok());
}

TEST(PlanCodecs, MeasuresEachCodecAndRecommendsFromItsOwnRows) {
  test::TempDir d;
  std::string uri = test::MakeTestDataset(
      {.dir = d.Sub("data"), .count = 12, .min_side = 96, .max_side = 128, .threads = 1});
  auto src = OpenSource(uri);
  ASSERT_TRUE(src.ok()) << src.status().message();
  CodecPlanOptions o;
  o.probes = 6;
  o.augment.enabled = true;
  o.augment.height = o.augment.width = 64;
  o.cores = 3;
  o.device_dir = d.path();
  o.device.seconds = 0.02;
  o.device.file_bytes = 8 << 20;
  PrepareSpec spec;
  spec.resize_short = 96;
  auto rows = PlanCodecs(**src, spec, o);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 4u);
  for (const auto& r : *rows) {
    SCOPED_TRACE(CodecLabel(r.codec, r.quality));
    EXPECT_GT(r.per_core_images_per_s, 0);
    // The cores' rate is what 3 threads did together, measured.
    EXPECT_GT(r.cores_measured_images_per_s, 0);
    EXPECT_DOUBLE_EQ(r.cores_images_per_s, r.cores_measured_images_per_s);
    EXPECT_EQ(r.device.block, RecordReadWindow(r.record_bytes));
    EXPECT_GT(r.device_images_per_s, 0);
    EXPECT_DOUBLE_EQ(r.predicted_images_per_s,
                     std::min(r.device_images_per_s, r.cores_images_per_s));
  }
  // Photo-like pixels: the lossless codec stores less than raw, jpeg far
  // less.
  EXPECT_EQ((*rows)[0].codec, RecordCodec::kRaw);
  EXPECT_DOUBLE_EQ((*rows)[0].footprint_x_raw, 1);
  EXPECT_LT((*rows)[1].footprint_x_raw, 1);
  EXPECT_LT((*rows)[2].footprint_x_raw, (*rows)[1].footprint_x_raw);
  // zstd is lossless; jpeg q90 is close but not exact.
  EXPECT_TRUE((*rows)[0].identical);
  EXPECT_TRUE((*rows)[1].identical);
  EXPECT_FALSE((*rows)[2].identical);
  EXPECT_GT((*rows)[2].psnr_db, 20);
  // yuv420: the planes, half raw's pixels in records of the same headers;
  // only chroma is lost.
  EXPECT_EQ((*rows)[3].codec, RecordCodec::kYuv420);
  EXPECT_GE((*rows)[3].footprint_x_raw, 0.5);
  EXPECT_LT((*rows)[3].footprint_x_raw, 0.52);
  EXPECT_FALSE((*rows)[3].identical);
  EXPECT_GT((*rows)[3].psnr_db, (*rows)[2].psnr_db);
  EXPECT_GE(RecommendCodec(*rows), 0);
  // The scratch file is gone.
  for (const auto& e : std::filesystem::directory_iterator(d.path()))
    EXPECT_EQ(e.path().filename(), "data");
}

TEST(PlanCodecs, ASourceOfNothingToTimeSaysSo) {
  test::TempDir d;
  std::string uri = test::MakeTestDataset({.dir = d.Sub("data"), .count = 4, .corrupt = 1.0});
  auto src = OpenSource(uri);
  ASSERT_TRUE(src.ok()) << src.status().message();
  CodecPlanOptions o;
  auto rows = PlanCodecs(**src, PrepareSpec{}, o);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("could be prepared"), std::string::npos)
      << rows.status().message();
}

TEST(ReadThrottleTest, NoBlockDeviceUnderTmpfsSaysSo) {
  if (test::FastTmp() == nullptr) GTEST_SKIP() << "no /dev/shm here";
  Status s = CanThrottleReads("/dev/shm");
  ASSERT_FALSE(s.ok());
  // Not root: that is the reason; root: the device is.
  EXPECT_NE(s.message().find(::geteuid() == 0 ? "not a block device" : "needs root"),
            std::string::npos)
      << s.message();
}

TEST(ReadThrottleTest, NamesAreParsedExactly) {
  EXPECT_EQ(ThrottleCgroupPid("ssdfeed-throttle-4242"), 4242);
  EXPECT_EQ(ThrottleCgroupPid("ssdfeed-throttle-4242-3"), 4242);
  for (const char* bad : {"ssdfeed-throttle-", "ssdfeed-throttle-abc", "ssdfeed-throttle-12x",
                          "ssdfeed-throttle-0", "ssdfeed-throttle-007", "ssdfeed-throttle--5",
                          "ssdfeed-throttle-12-", "ssdfeed-throttle-12-x", "ssdfeed-throttle-1-2-3",
                          "ssdfeed-throttle-99999999999", "xssdfeed-throttle-12"})
    EXPECT_EQ(ThrottleCgroupPid(bad), 0) << bad;
}

// A process id no process has: a child that has exited and been reaped.
pid_t GonePid() {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  return gone;
}

// Over a plain directory standing in for the process's blkio cgroup: only
// an exactly named dead bench's directory goes; one whose name merely
// starts like it (whatever its digits say) and a live process's stay.
TEST(ReadThrottleTest, StaleSweepRemovesOnlyWhatItParsedExactly) {
  test::TempDir home;
  std::string dead = "ssdfeed-throttle-" + std::to_string(GonePid());
  std::vector<std::string> kept = {"ssdfeed-throttle-abc",
                                   "ssdfeed-throttle-",
                                   "ssdfeed-throttle-0",
                                   dead + "x",
                                   dead + "-",
                                   dead + "-y",
                                   "ssdfeed-throttle-" + std::to_string(::getpid())};
  for (const auto& n : kept) ASSERT_EQ(::mkdir(home.Sub(n).c_str(), 0755), 0) << n;
  ASSERT_EQ(::mkdir(home.Sub(dead).c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(home.Sub(dead + "-2").c_str(), 0755), 0);
  RemoveStaleThrottles(home.path());
  struct stat st;
  for (const auto& n : kept) EXPECT_EQ(::stat(home.Sub(n).c_str(), &st), 0) << n << " removed";
  EXPECT_NE(::stat(home.Sub(dead).c_str(), &st), 0) << dead << " kept";
  EXPECT_NE(::stat(home.Sub(dead + "-2").c_str(), &st), 0) << dead << "-2 kept";
}

// A cgroup already at the process's name (made by someone else) is never
// joined: a fresh one is made beside it, and the other is left as it was.
TEST(ReadThrottleTest, NeverUsesACgroupItDidNotMake) {
  test::TempDir home;
  std::string taken = home.Sub("ssdfeed-throttle-" + std::to_string(::getpid()));
  ASSERT_EQ(::mkdir(taken.c_str(), 0755), 0);
  std::ofstream(taken + "/planted") << "x";
  auto dir = MakeThrottleCgroup(home.path());
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_EQ(*dir, taken + "-1");
  struct stat st;
  EXPECT_EQ(::stat((taken + "/planted").c_str(), &st), 0);
  for (int n = 2; n < 16; ++n)
    ASSERT_EQ(::mkdir((taken + "-" + std::to_string(n)).c_str(), 0755), 0);
  auto none = MakeThrottleCgroup(home.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("did not make"), std::string::npos)
      << none.status().message();
}

std::string BlkioLine() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.find(":blkio:") != std::string::npos) return line;
  return "";
}

TEST(ReadThrottleTest, JoinsALimitedCgroupAndLeavesNothingBehind) {
  test::TempDir d;
  if (Status s = CanThrottleReads(d.path()); !s.ok()) GTEST_SKIP() << s.message();
  std::string before = BlkioLine(), cgroup;
  // A killed bench's cgroup: its pid gone (a child that has exited and been
  // reaped), the directory left.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  std::string own = "/sys/fs/cgroup/blkio";
  if (size_t at = before.find(":blkio:"); at != std::string::npos && before.substr(at + 7) != "/")
    own += before.substr(at + 7);
  std::string stale = own + "/ssdfeed-throttle-" + std::to_string(gone);
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0) << stale;
  {
    auto t = ReadThrottle::Start(d.path(), 123456789);
    ASSERT_TRUE(t.ok()) << t.status().message();
    cgroup = (*t)->cgroup();
    EXPECT_NE(BlkioLine().find("ssdfeed-throttle-"), std::string::npos) << BlkioLine();
    std::ifstream limit(cgroup + "/blkio.throttle.read_bps_device");
    std::string dev;
    uint64_t bps = 0;
    limit >> dev >> bps;
    EXPECT_EQ(dev, (*t)->device().dev);
    EXPECT_EQ(bps, 123456789u);
  }
  EXPECT_EQ(BlkioLine(), before);
  struct stat st;
  EXPECT_NE(::stat(cgroup.c_str(), &st), 0) << cgroup << " left behind";
  EXPECT_NE(::stat(stale.c_str(), &st), 0) << stale << ": a dead bench's cgroup is kept";
}

}  // namespace
}  // namespace ssdfeed
