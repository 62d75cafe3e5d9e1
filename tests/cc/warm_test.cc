// The library warm-up (ssdfeed/warm.h) that `ssdfeed warm` and Python's
// ssdfeed.warm() call.
#include "ssdfeed/warm.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipeline/entry_key.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"
#include "util/units.h"

namespace ssdfeed {
namespace {

struct WarmFixture {
  test::TempDir dir;
  std::string uri;
  WarmOptions opts;

  explicit WarmFixture(double corrupt = 0) {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .count = 24,
                                 .classes = 3,
                                 .corrupt = corrupt,
                                 .min_side = 16,
                                 .max_side = 24,
                                 .threads = 1});
    opts.cache.root = dir.Sub("cache");
    opts.workers = 2;
  }
};

TEST(Warm, FillsTheWholeEntryAndALaterOpenFindsEverySample) {
  WarmFixture f;
  WarmResult r;
  ASSERT_TRUE(Warm(f.uri, f.opts, &r).ok());
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.samples_total, 24u);
  EXPECT_EQ(r.samples_present, 24u);
  EXPECT_EQ(r.prepared, 24u);
  EXPECT_GT(r.bytes_prepared, 0u);
  EXPECT_FALSE(r.cache_full);
  EXPECT_FALSE(r.interrupted);

  auto src = OpenSource(f.uri);
  ASSERT_TRUE(src.ok());
  auto entry = CacheEntry::Open(f.opts.cache, MakeEntryKey(**src, f.opts.source, f.opts.prepare));
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_EQ((*entry)->dir(), r.dir);
  for (uint64_t id = 0; id < 24; ++id) EXPECT_TRUE((*entry)->Contains(id)) << id;
}

TEST(Warm, SkipsBadSamplesAndRecordsThemInTheEntry) {
  WarmFixture f(0.25);
  f.opts.source.on_error = OnError::kSkip;
  WarmResult r;
  ASSERT_TRUE(Warm(f.uri, f.opts, &r).ok());
  ASSERT_FALSE(r.skipped.empty());
  EXPECT_EQ(r.samples_present + r.skipped.size(), 24u);
  EXPECT_TRUE(r.complete());
  for (size_t i = 1; i < r.skipped.size(); ++i) EXPECT_LT(r.skipped[i - 1].id, r.skipped[i].id);
  EXPECT_NE(r.skipped[0].sample, "");
  std::string doc;
  ASSERT_TRUE(Env::Default()->ReadFileToString(JoinPath(r.dir, "skipped.json"), &doc).ok());
  EXPECT_NE(doc.find(r.skipped[0].sample), std::string::npos) << doc;
}

TEST(Warm, UnderRaiseABadSampleIsTheError) {
  WarmFixture f(0.25);
  WarmResult r;
  Status s = Warm(f.uri, f.opts, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(r.started);
  EXPECT_GT(r.errors, 0u);
  EXPECT_TRUE(r.skipped.empty());
}

TEST(Warm, ProgressReturningFalseStopsBeforeAnyWork) {
  WarmFixture f;
  int calls = 0;
  f.opts.progress = [&calls](const WarmProgress& p) {
    calls++;
    EXPECT_EQ(p.total, 24u);
    return false;
  };
  WarmResult r;
  ASSERT_TRUE(Warm(f.uri, f.opts, &r).ok());
  EXPECT_GE(calls, 1);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.prepared, 0u);
  EXPECT_FALSE(r.complete());
}

TEST(Warm, AMissingSourceIsAnErrorNamingIt) {
  test::TempDir d;
  WarmOptions o;
  o.cache.root = d.Sub("cache");
  WarmResult r;
  Status s = Warm("folder:" + d.Sub("nope"), o, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(d.Sub("nope")), std::string::npos) << s.message();
  EXPECT_FALSE(r.started);
}

// `plan` and the line `warm` prints first size the entry with one
// estimator: they once differed by the format's per-sample overhead.
TEST(Warm, PrintsTheEntrySizePlanPrints) {
  WarmFixture f;
  std::string plan, warm;
  ASSERT_EQ(
      test::RunCommand(test::CliPath() + " plan --json --samples 32 --source " + f.uri, &plan), 0)
      << plan;
  uint64_t bytes = nlohmann::json::parse(plan)["entry_bytes"].get<uint64_t>();
  ASSERT_EQ(test::RunCommand(test::CliPath() + " warm --workers 1 --source " + f.uri + " --cache " +
                                 f.opts.cache.root + " 2>&1",
                             &warm),
            0)
      << warm;
  EXPECT_NE(warm.find("pixels: ~" + FormatBytes(bytes) + " for 24 samples"), std::string::npos)
      << FormatBytes(bytes) << "\n"
      << warm;
}

}  // namespace
}  // namespace ssdfeed
