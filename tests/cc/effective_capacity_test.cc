// EffectiveCapacity: the one computation of a root's capacity that writers,
// `ssdfeed doctor` and the exporter share.
#include <gtest/gtest.h>

#include <sstream>

#include "cache/capacity.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/warm.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// Free space fixed, so two computations a moment apart see the same disk
// (other processes write to the real one meanwhile).
class FixedSpaceEnv : public EnvWrapper {
 public:
  FixedSpaceEnv() : EnvWrapper(Env::Default()) {}
  Status FsSpace(const std::string&, uint64_t* free_bytes, uint64_t* total) override {
    *free_bytes = 1ull << 30;
    *total = 10ull << 30;
    return Status::OK();
  }
};

// The value of a gauge without labels in Prometheus text, -1 if absent.
double Gauge(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

struct WarmedRoot {
  test::TempDir dir;
  FixedSpaceEnv env;
  CacheOptions cache;
  WarmedRoot() {
    const std::string data_uri = test::MakeTestDataset(
        {.dir = dir.Sub("data"), .count = 12, .min_side = 16, .max_side = 24, .threads = 1});
    cache.root = dir.Sub("cache");
    cache.env = &env;
    WarmOptions o;
    o.cache = cache;
    o.workers = 1;
    WarmResult r;
    EXPECT_TRUE(Warm(data_uri, o, &r).ok());
  }
};

TEST(EffectiveCapacity, IsTheSetCapacityWhenOneIsSet) {
  CacheOptions o;
  o.root = "/nonexistent/root";
  o.capacity_bytes = 12345;
  auto c = EffectiveCapacity(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c, 12345u);
}

TEST(EffectiveCapacity, DefaultsToWhatTheRootHoldsChargedPlusFourFifthsOfFree) {
  WarmedRoot w;
  auto c = EffectiveCapacity(w.cache);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto held = RootBytes(w.cache);
  ASSERT_TRUE(held.ok());
  // Entries are charged at least their small files' allowance: more than
  // their bytes on disk.
  EXPECT_GT(*c, *held + (1ull << 30) / 5 * 4);
  // What each writer enforces (Capacity computes it at construction).
  auto d = DefaultCapacity(w.cache);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*c, *d);
}

TEST(EffectiveCapacity, IsTheCapacityTheExporterReports) {
  WarmedRoot w;
  auto c = EffectiveCapacity(w.cache);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto text = RenderRootMetrics(w.cache);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(Gauge(*text, "ssdfeed_cache_capacity_bytes"), static_cast<double>(*c)) << *text;
}

}  // namespace
}  // namespace ssdfeed
