// Env as the one seam: what a wrapping Env (fake clock, captured log, fault
// injection, counted listings) observes or controls in the core.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "cache/claims.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/source.h"
#include "test_util.h"
#include "util/fake_env.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;

bool Contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST(EnvWrapper, ForwardsWhatItDoesNotOverride) {
  test::TempDir dir;
  FakeClockEnv env(Env::Default());
  ASSERT_TRUE(env.WriteFileAtomic(dir.Sub("f"), "abc").ok());
  std::string s;
  ASSERT_TRUE(env.ReadFileToString(dir.Sub("f"), &s).ok());
  EXPECT_EQ(s, "abc");
  std::vector<std::string> names;
  ASSERT_TRUE(env.GetChildren(dir.path(), &names).ok());
  EXPECT_EQ(names, std::vector<std::string>{"f"});
  std::thread t = env.StartThread([&] { s = "ran"; });
  t.join();
  EXPECT_EQ(s, "ran");
  EXPECT_GT(env.NowMicros(), 1'600'000'000'000'000) << "the wall clock is the target's";
}

// True when this process may install a seccomp filter that refuses
// io_uring_setup (probed in a child, so this process stays unfiltered).
bool CanRefuseIoUring();
// Installs it: io_uring_setup then fails with EPERM, as under Docker's
// default policy.
bool RefuseIoUring() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{sizeof(f) / sizeof(f[0]), f};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
bool CanRefuseIoUring() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(RefuseIoUring() ? 0 : 1);
  int st = 0;
  return pid > 0 && ::waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// With io_uring refused, reads a file through a wrapper with a captured log:
// 0 when the refusal was logged there and not on stderr.
int ReadWithIoUringRefused(const std::string& dir) {
  if (!RefuseIoUring()) return 2;
  std::string err = dir + "/stderr";  // what the default logger would write
  int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::dup2(fd, 2) < 0) return 3;
  FakeClockEnv logged(Env::Default());
  auto f = logged.NewRandomAccessFile(dir + "/f");
  if (!f.ok()) return 4;
  char buf[2][4096];
  ReadRequest reqs[2];
  for (int i = 0; i < 2; ++i) {
    reqs[i].file = f->get();
    reqs[i].offset = 4096 * i;
    reqs[i].n = 4096;
    reqs[i].scratch = buf[i];
  }
  logged.ReadMany(reqs, 2);
  if (!reqs[0].status.ok() || reqs[1].got != 4096) return 5;  // read one at a time
  std::string on_stderr;
  if (!Env::Default()->ReadFileToString(err, &on_stderr).ok()) return 6;
  if (on_stderr.find("io_uring") != std::string::npos) return 7;
  return logged.log().Has("io_uring unavailable") ? 0 : 8;
}

// Where io_uring is refused, the POSIX Env says so once: through the logger
// of the Env the files were opened through (a wrapper's), not on stderr.
TEST(EnvWrapper, IoUringRefusalWarnsThroughTheWrappersLogger) {
#ifndef SSDFEED_HAVE_URING
  GTEST_SKIP() << "built without liburing: nothing to refuse";
#endif
  if (!CanRefuseIoUring()) GTEST_SKIP() << "cannot install a seccomp filter here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no ring yet
  EXPECT_EXIT(
      {
        test::TempDir dir;
        if (!Env::Default()->WriteFileAtomic(dir.Sub("f"), std::string(8192, 'x')).ok())
          std::exit(1);
        int rc = ReadWithIoUringRefused(dir.path());
        std::error_code ec;
        std::filesystem::remove_all(dir.path(), ec);
        std::exit(rc);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MappedFile, SharedBetweenMappingsAndRefusesLinks) {
  test::TempDir dir;
  Env* env = Env::Default();
  std::string p = dir.Sub("m");
  MappedFileOptions o;
  o.mode = 0640;
  auto a = env->NewMappedFile(p, 8192, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = env->NewMappedFile(p, 8192, o);
  ASSERT_TRUE(b.ok());
  (*a)->data()[100] = 42;
  EXPECT_EQ((*b)->data()[100], 42) << "MAP_SHARED: one file, two views";
  ASSERT_TRUE((*a)->Sync().ok());
  EXPECT_EQ(env->Stat(p)->size, 8192u) << "allocated to the mapped size";
  EXPECT_EQ(env->Stat(p)->mode, 0640u) << "exact mode, whatever the umask";

  MappedFileOptions ro;
  ro.writable = false;
  auto r = env->NewMappedFile(p, 1 << 20, ro);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->size(), 8192u) << "read-only maps no further than the file";
  EXPECT_EQ((*r)->data()[100], 42);

  ASSERT_TRUE((*a)->Lock(/*exclusive=*/false, /*blocking=*/true).ok());
  EXPECT_TRUE((*r)->Lock(/*exclusive=*/true, /*blocking=*/false).IsBusy());
  a->reset();  // unmapping and closing drops the lock
  EXPECT_TRUE((*r)->Lock(/*exclusive=*/true, /*blocking=*/false).ok());

  ASSERT_EQ(::symlink(p.c_str(), dir.Sub("link").c_str()), 0);
  auto l = env->NewMappedFile(dir.Sub("link"), 8192, o);
  EXPECT_FALSE(l.ok()) << "never through a symlink";
  MappedFileOptions excl = o;
  excl.exclusive = true;
  EXPECT_FALSE(env->NewMappedFile(p, 8192, excl).ok());
}

TEST(Claims, MappingFailureIsCleanAndLeavesNoCoordination) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  env.FailAfter(Op::kMap, 0, -1, Status::NoSpace("disk full"), "claims");
  Claims c;
  Status s = c.Open(&env, dir.Sub("claims"), 100, 0600, 0, [](uint32_t) { return true; });
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("claims")), std::string::npos) << s.message();
  EXPECT_FALSE(c.mapped());
  EXPECT_TRUE(c.TryClaim(7)) << "unmapped: every claim succeeds";
  EXPECT_TRUE(c.TryClaim(7));
  EXPECT_EQ(c.NextSeq(41), 42u);
}

// A claims file cut while mapped: no SIGBUS; the claims stop coordinating
// (every claim succeeds) and the logger hears it once.
TEST(Claims, FileCutWhileMappedWarnsOnceAndStopsCoordinating) {
  test::TempDir dir;
  FakeClockEnv logged(Env::Default());
  EXPECT_EXIT(
      {
        Claims c;
        std::string path = dir.Sub("claims");
        auto alive = [](uint32_t) { return true; };
        if (!c.Open(&logged, path, 100000, 0600, 0, alive).ok() || !c.TryClaim(5)) std::exit(2);
        Claims other;  // slot 1, alive: it holds 6 until the file is cut
        if (!other.Open(&logged, path, 100000, 0600, 1, alive).ok() || !other.TryClaim(6))
          std::exit(3);
        if (c.TryClaim(6) || !logged.TruncateFile(path, 0).ok()) std::exit(4);
        // The first access after the cut faults and finds zeros; the next one warns.
        if (!c.TryClaim(6) || !c.TryClaim(99999) || !other.TryClaim(5) || !other.TryClaim(7))
          std::exit(5);
        int warned = 0;
        for (const auto& l : logged.log().lines())
          warned += l.find(path + " shrank while in use") != std::string::npos;
        std::exit(warned == 2 ? 0 : 6);  // once per Claims
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Claims, EntryWithoutClaimsWarnsThroughTheLoggerAndStillFills) {
  test::TempDir dir;
  FakeClockEnv logged(Env::Default());
  FaultInjectionEnv env(&logged);
  env.FailAfter(Op::kMap, 0, -1, Status::IOError("EIO"), "claims");
  CacheOptions co;
  co.root = dir.Sub("cache");
  co.env = &env;
  auto e = CacheEntry::Open(co, EntryKey{"test:a", "id-a", "spec", 10});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto lines = logged.log().lines();
  EXPECT_TRUE(Contains(lines, "injected fault on " + (*e)->dir() + "/claims")) << lines.size();
  EXPECT_TRUE(Contains(lines, "filling without coordination"));
  EXPECT_TRUE((*e)->TryClaim(3));
  uint8_t px[12] = {1, 2, 3};
  EXPECT_TRUE((*e)->Put(3, 1, px, 2, 2, 3).ok());
  EXPECT_TRUE((*e)->Contains(3));
}

TEST(StatsFile, MappingFailureFallsBackToMemoryAndLeavesNothing) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  env.FailAfter(Op::kMap, 0, -1, Status::NoSpace("disk full"), "/stats/");
  CacheOptions co;
  co.root = dir.path();
  std::string warning;
  auto p = StatsPublisher::Create(&env, co, "0123456789abcdef", &warning);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->path().empty()) << "in memory";
  EXPECT_NE(warning.find("disk full"), std::string::npos) << warning;
  std::vector<std::string> left;
  ASSERT_TRUE(env.GetChildren(dir.Sub("stats"), &left).ok());
  for (const auto& n : left) EXPECT_EQ(n.rfind(".new-", 0), std::string::npos) << n;
  env.ClearFaults();
  auto q = StatsPublisher::Create(&env, co, "0123456789abcdef", &warning);
  EXPECT_FALSE(q->path().empty()) << "mapped once the fault is gone";
}

struct Dataset {
  test::TempDir dir;
  std::unique_ptr<Source> source;
  PrepareSpec spec;
  CacheOptions cache;

  Dataset() {
    const std::string data_uri = test::MakeTestDataset({.dir = dir.Sub("ds"),
                                                        .format = "folder",
                                                        .count = 6,
                                                        .classes = 2,
                                                        .min_side = 32,
                                                        .max_side = 48});
    source = std::move(OpenSource(data_uri).value());
    spec.resize_short = 16;
    cache.root = dir.Sub("cache");
  }
  std::unique_ptr<CacheEntry> Entry() {
    return std::move(CacheEntry::Open(cache, MakeEntryKey(*source, {}, spec)).value());
  }
};

// A writer that claimed a sample and stalls (alive, never storing it) holds
// the others up for claim_wait_seconds, then they prepare it themselves.
// With a fake clock the ten-second wait takes no real time.
TEST(ClaimWait, StalledWritersClaimIsTakenOverAfterTheTimeout) {
  Dataset d;
  auto stalled = d.Entry();  // writer slot 0, lock held: alive
  auto waiter = d.Entry();   // writer slot 1
  ASSERT_TRUE(stalled->TryClaim(3));
  FakeClockEnv clock(Env::Default());
  const double wait_s = 10;
  SampleFetcher f(d.source.get(), d.spec, waiter.get(), wait_s, nullptr, true, &clock);
  FetchScratch scratch;
  CachedSample out;
  int64_t t0 = clock.now();
  ASSERT_TRUE(f.Fetch(3, &scratch, &out).ok());
  int64_t waited = clock.now() - t0;
  EXPECT_GE(waited, static_cast<int64_t>(wait_s * 1e6)) << "gave up before the timeout";
  EXPECT_LT(waited, static_cast<int64_t>(wait_s * 1e6) + 10000) << "waited past it";
  EXPECT_EQ(f.stats().Snapshot()[Ctr::kClaimWaits], 1u);
  EXPECT_EQ(f.stats().Snapshot()[Ctr::kCacheMisses], 1u);
  EXPECT_TRUE(waiter->Contains(3)) << "the waiter prepared and stored it";
  // Not held up again once it is stored.
  int sleeps = clock.sleeps();
  ASSERT_TRUE(f.Fetch(3, &scratch, &out).ok());
  EXPECT_EQ(clock.sleeps(), sleeps);
  EXPECT_EQ(f.stats().Snapshot()[Ctr::kCacheHits], 1u);
}

// Counts the directory listings a glob makes.
class ListingEnv final : public EnvWrapper {
 public:
  explicit ListingEnv(Env* target) : EnvWrapper(target) {}
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    listed.push_back(dir);
    return EnvWrapper::GetChildren(dir, names);
  }
  std::vector<std::string> listed;
};

TEST(Glob, ListsThroughTheEnvLikeGlob3) {
  test::TempDir dir;
  Env* env = Env::Default();
  for (const char* d : {"a1", "a2", "b1", ".a3"}) ASSERT_TRUE(env->CreateDir(dir.Sub(d)).ok());
  for (const char* f : {"a1/s-0.tar", "a1/s-1.tar", "a2/s-0.tar", "a2/.s-2.tar", "b1/s-0.tar",
                        ".a3/s-0.tar", "a9.tar"})
    std::ofstream(dir.Sub(f)) << "x";
  ListingEnv counted(env);
  auto files = ExpandGlob(dir.Sub("a*/s-?.tar"), &counted);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::vector<std::string> want = {dir.Sub("a1/s-0.tar"), dir.Sub("a1/s-1.tar"),
                                   dir.Sub("a2/s-0.tar")};
  EXPECT_EQ(*files, want) << "sorted; dot files and non-directories are not matched";
  EXPECT_EQ(counted.listed.size(), 3u) << "the root, then a1 and a2";
  auto braces = ExpandGlob(dir.Sub("{a,b}1/s-[0-9].tar"), &counted);
  ASSERT_TRUE(braces.ok());
  EXPECT_EQ(braces->size(), 3u);
  auto literal = ExpandGlob(dir.Sub("a9.tar"), &counted);
  ASSERT_TRUE(literal.ok());
  EXPECT_EQ(*literal, std::vector<std::string>{dir.Sub("a9.tar")});
  auto none = ExpandGlob(dir.Sub("missing/*.tar"), &counted);
  EXPECT_TRUE(none.status().IsNotFound());
  EXPECT_NE(none.status().message().find(dir.Sub("missing/*.tar")), std::string::npos);
}

}  // namespace
}  // namespace ssdfeed
