// The memory an entry's page cache may use, read through the Env, and the
// warm_read=auto and write-mode choices made from it.
#include "cache/memory_fit.h"

#include <gtest/gtest.h>

#include "util/fake_env.h"

namespace ssdfeed {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A machine with avail_gib of MemAvailable and, in cgroup v2 at /job, the
// memory.max given ("max": unlimited; "": no such file).
void Machine(SurroundingsEnv* env, uint64_t avail_gib, const std::string& memory_max) {
  env->SetFile("/proc/meminfo", "MemTotal:       999999999 kB\nMemAvailable:   " +
                                    std::to_string(avail_gib * kGiB / 1024) + " kB\n");
  env->SetFile("/proc/self/cgroup", "0::/job\n");
  if (!memory_max.empty()) env->SetFile("/sys/fs/cgroup/job/memory.max", memory_max + "\n");
}

TEST(MemoryFit, TheLesserOfMemAvailableAndTheCgroupLimit) {
  SurroundingsEnv host(Env::Default());
  Machine(&host, 64, "max");
  EXPECT_EQ(AvailableMemoryBytes(&host), 64 * kGiB) << "no cgroup limit";
  SurroundingsEnv boxed(Env::Default());
  Machine(&boxed, 64, std::to_string(2 * kGiB));
  EXPECT_EQ(AvailableMemoryBytes(&boxed), 2 * kGiB) << "a container's own limit";
  SurroundingsEnv roomy(Env::Default());
  Machine(&roomy, 3, std::to_string(8 * kGiB));
  EXPECT_EQ(AvailableMemoryBytes(&roomy), 3 * kGiB) << "the host has less than the limit";
}

TEST(MemoryFit, CgroupSeenAtTheMountRootAndInV1) {
  SurroundingsEnv ns(Env::Default());  // a cgroup namespace: the path is not mounted
  ns.SetFile("/proc/self/cgroup", "0::/elsewhere\n");
  ns.SetFile("/sys/fs/cgroup/memory.max", std::to_string(kGiB));
  EXPECT_EQ(AvailableMemoryBytes(&ns), kGiB) << "no meminfo: the limit alone";

  SurroundingsEnv v1(Env::Default());
  v1.SetFile("/proc/self/cgroup", "5:cpu,cpuacct:/j\n4:memory:/j\n");
  v1.SetFile("/sys/fs/cgroup/memory/j/memory.limit_in_bytes", std::to_string(5 * kGiB));
  EXPECT_EQ(AvailableMemoryBytes(&v1), 5 * kGiB);
  v1.SetFile("/sys/fs/cgroup/memory/j/memory.limit_in_bytes", "9223372036854771712");
  EXPECT_EQ(AvailableMemoryBytes(&v1), 0u) << "v1's 'unlimited' is a huge number";
}

TEST(MemoryFit, UnknownMemoryFitsAndReadsBuffered) {
  SurroundingsEnv bare(Env::Default());  // not Linux: no /proc at all
  EXPECT_EQ(AvailableMemoryBytes(&bare), 0u);
  EXPECT_TRUE(FitsInMemory(&bare, ~0ull));
  EXPECT_FALSE(UseDirect(&bare, WarmRead::kAuto, ~0ull, false));
}

// The same 4 GiB entry reads buffered on a roomy machine and direct in a
// 2 GiB container; the writer's fit test follows the same numbers.
TEST(MemoryFit, AutoModeFlipsWithTheMemoryTheEnvReports) {
  constexpr uint64_t kEntry = 4 * kGiB;
  SurroundingsEnv roomy(Env::Default());
  Machine(&roomy, 64, "max");
  SurroundingsEnv boxed(Env::Default());
  Machine(&boxed, 64, std::to_string(2 * kGiB));
  EXPECT_FALSE(UseDirect(&roomy, WarmRead::kAuto, kEntry, false));
  EXPECT_TRUE(UseDirect(&boxed, WarmRead::kAuto, kEntry, false));
  EXPECT_TRUE(FitsInMemory(&roomy, kEntry));
  EXPECT_FALSE(FitsInMemory(&boxed, kEntry));
  EXPECT_FALSE(UseDirect(&boxed, WarmRead::kBuffered, kEntry, false)) << "fixed modes ignore it";
  EXPECT_TRUE(UseDirect(&roomy, WarmRead::kDirect, kEntry, false));
}

}  // namespace
}  // namespace ssdfeed
