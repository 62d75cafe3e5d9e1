// The shared defaults, from the environment variables and cgroup files an
// Env gives (never the test process's own: no setenv).
#include "ssdfeed/defaults.h"

#include <gtest/gtest.h>

#include "util/fake_env.h"

namespace ssdfeed {
namespace {

TEST(Defaults, CacheRootFromSsdfeedCacheThenHome) {
  SurroundingsEnv env(Env::Default());
  EXPECT_EQ(DefaultCacheRoot(&env), "./.cache/ssdfeed") << "neither set";
  env.SetVar("HOME", "/home/u");
  EXPECT_EQ(DefaultCacheRoot(&env), "/home/u/.cache/ssdfeed");
  env.SetVar("SSDFEED_CACHE", "");
  EXPECT_EQ(DefaultCacheRoot(&env), "/home/u/.cache/ssdfeed") << "empty counts as unset";
  env.SetVar("SSDFEED_CACHE", "/nvme/cache");
  EXPECT_EQ(DefaultCacheRoot(&env), "/nvme/cache");
  SurroundingsEnv homeless(Env::Default());
  homeless.SetVar("HOME", "");
  EXPECT_EQ(DefaultCacheRoot(&homeless), "./.cache/ssdfeed");
}

TEST(Defaults, WorkersCappedByTheCgroupCpuQuota) {
  SurroundingsEnv unlimited(Env::Default());
  unlimited.SetFile("/sys/fs/cgroup/cpu.max", "max 100000\n");
  int cpus = DefaultWorkers(&unlimited);  // this machine's affinity mask
  ASSERT_GE(cpus, 1);
  SurroundingsEnv one(Env::Default());
  one.SetFile("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_EQ(DefaultWorkers(&one), 1);
  SurroundingsEnv half(Env::Default());
  half.SetFile("/sys/fs/cgroup/cpu.max", "50000 100000\n");
  EXPECT_EQ(DefaultWorkers(&half), 1) << "a part of a CPU is still one worker";
  SurroundingsEnv v1(Env::Default());
  v1.SetFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n");
  v1.SetFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(DefaultWorkers(&v1), 1) << "cgroup v1's cfs files";
  SurroundingsEnv many(Env::Default());
  many.SetFile("/sys/fs/cgroup/cpu.max", "100000000 100000\n");
  EXPECT_EQ(DefaultWorkers(&many), cpus) << "a quota above the CPUs left to us changes nothing";
}

}  // namespace
}  // namespace ssdfeed
