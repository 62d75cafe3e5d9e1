// One cache root shared by many jobs on a node: slots instead of pids,
// bounded files, eviction races, damaged manifests, untrusted roots, planted
// FIFOs, last_used bookkeeping, and faults on every namespace call.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "cache/capacity.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using test::FakeKey;
using test::PutFake;
using test::ReadsBackFake;
using Op = FaultInjectionEnv::Op;

CacheOptions Opts(const std::string& root, Env* env = nullptr) {
  CacheOptions o;
  o.root = root;
  o.env = env;
  o.capacity_bytes = 1ull << 30;
  o.reserve_chunk = 1 << 20;
  o.claim_wait_seconds = 0.2;
  return o;
}

size_t CountFiles(const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  return names.size();
}

TEST(SharedNode, ThousandShortJobsKeepAnEntrysFilesBounded) {
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  std::string dir;
  for (int job = 0; job < 1000; ++job) {
    auto e = CacheEntry::Open(o, FakeKey(1000));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(PutFake(e->get(), job).ok()) << job;
    dir = (*e)->dir();
  }
  size_t files = CountFiles(dir);
  std::printf("files in the entry after 1000 short jobs: %zu\n", files);
  EXPECT_LE(files, 24u) << "each job added files";
  auto e = CacheEntry::Open(o, FakeKey(1000));
  EXPECT_EQ((*e)->samples_present(), 1000u);
  for (uint64_t id = 0; id < 1000; ++id) ASSERT_TRUE(ReadsBackFake(e->get(), id)) << id;
}

TEST(SharedNode, ANewWriterCutsADeadWritersTornTailAndAppends) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(50));
    for (uint64_t id = 0; id < 20; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
    dir = (*e)->dir();
  }
  // A crash mid-append: half an index entry and a record without one.
  std::string idx = JoinPath(dir, "seg-0-0000.idx"), dat = JoinPath(dir, "seg-0-0000.dat");
  ASSERT_EQ(::truncate(idx.c_str(), 19 * 48 + 20), 0);
  {
    std::FILE* f = std::fopen(dat.c_str(), "ab");
    std::fputs("a torn record without its index entry", f);
    std::fclose(f);
  }
  {
    auto e = CacheEntry::Open(o, FakeKey(50));
    EXPECT_EQ((*e)->samples_present(), 19u);
    for (uint64_t id = 19; id < 50; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  }
  auto e = CacheEntry::Open(o, FakeKey(50));
  EXPECT_EQ((*e)->samples_present(), 50u);
  for (uint64_t id = 0; id < 50; ++id) ASSERT_TRUE(ReadsBackFake(e->get(), id)) << id;
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(dir, "seg-0-0001.dat")))
      << "the slot's segment was not reused";
}

TEST(SharedNode, OpenNeverFailsWhileAnotherProcessEvictsTheEntry) {
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  std::string name;
  {
    auto e = CacheEntry::Open(o, FakeKey(10));
    name = Basename((*e)->dir());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> evicted{0};
  std::thread evictor([&] {
    while (!stop) evicted += RemoveEntry(o, name).ok();  // Busy while open: fine
  });
  int failures = 0;
  std::string last;
  for (int i = 0; i < 300; ++i) {
    auto e = CacheEntry::Open(o, FakeKey(10));
    if (!e.ok()) {
      ++failures;
      last = e.status().ToString();
      continue;
    }
    if (!PutFake(e->get(), i % 10).ok()) ++failures;
  }
  stop = true;
  evictor.join();
  EXPECT_EQ(failures, 0) << last;
  EXPECT_GT(evicted.load(), 0) << "the race was never exercised";
}

TEST(SharedNode, ManifestThatIsValidJsonButNotAnObjectIsRebuilt) {
  for (const char* bad : {"[]", "42", "\"x\"", "{\"fingerprint\": 7}", "null"}) {
    test::TempDir root;
    CacheOptions o = Opts(root.Sub("c"));
    std::string dir;
    {
      auto e = CacheEntry::Open(o, FakeKey(5));
      ASSERT_TRUE(PutFake(e->get(), 1).ok());
      dir = (*e)->dir();
    }
    std::FILE* f = std::fopen(JoinPath(dir, "manifest.json").c_str(), "w");
    std::fputs(bad, f);
    std::fclose(f);
    auto e = CacheEntry::Open(o, FakeKey(5));
    ASSERT_TRUE(e.ok()) << bad << ": " << e.status().ToString();
    EXPECT_EQ((*e)->samples_present(), 0u) << "a damaged entry was kept: " << bad;
    ASSERT_TRUE(PutFake(e->get(), 2).ok());
    EXPECT_TRUE(ReadsBackFake(e->get(), 2));
    auto list = ListEntries(o);
    ASSERT_TRUE(list.ok());
  }
}

TEST(SharedNode, RootWritableByOthersIsRefused) {
  test::TempDir root;
  std::string r = root.Sub("c");
  ASSERT_EQ(::mkdir(r.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(r.c_str(), 0777), 0);
  auto e = CacheEntry::Open(Opts(r), FakeKey(5));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("writable by all users"), std::string::npos)
      << e.status().ToString();
  ASSERT_EQ(::chmod(r.c_str(), 01777), 0);  // sticky, as /tmp: others cannot move our files
  EXPECT_TRUE(CacheEntry::Open(Opts(r), FakeKey(5)).ok());
  ASSERT_EQ(::chmod(r.c_str(), 0770), 0);
  EXPECT_FALSE(CacheEntry::Open(Opts(r), FakeKey(5)).ok()) << "group-writable, not group-shared";
  CacheOptions g = Opts(r);
  g.group_shared = true;
  EXPECT_TRUE(CacheEntry::Open(g, FakeKey(5)).ok()) << "a group's cache";
  ASSERT_EQ(::chmod(r.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(JoinPath(r, "entries").c_str(), 0777), 0);
  EXPECT_FALSE(CacheEntry::Open(Opts(r), FakeKey(5)).ok()) << "entries/ writable by all";
}

TEST(SharedNode, PlantedFifosNeverBlock) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(5));
    ASSERT_TRUE(PutFake(e->get(), 0).ok());
    dir = (*e)->dir();
  }
  ASSERT_EQ(::mkfifo(JoinPath(dir, "seg-7-0000.idx").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(JoinPath(dir, "seg-8-0000.dat").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(JoinPath(dir, "seg-8-0000.idx").c_str(), 0600), 0);
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto e = CacheEntry::Open(o, FakeKey(5));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (e.ok()) {
      EXPECT_TRUE(ReadsBackFake(e->get(), 0));
    }
    auto list = ListEntries(o);
    EXPECT_TRUE(list.ok());
    // A FIFO in place of the lock file: a clear error, not a hang.
    ::unlink(JoinPath(dir, "use.lock").c_str());
    ::mkfifo(JoinPath(dir, "use.lock").c_str(), 0600);
    auto e2 = CacheEntry::Open(o, FakeKey(5));
    EXPECT_FALSE(e2.ok());
    if (!e2.ok()) {
      EXPECT_NE(e2.status().message().find("not a regular file"), std::string::npos);
    }
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(done.load()) << "blocked on a FIFO";
  t.join();
}

TEST(SharedNode, ClaimsFileIsAllocatedNotSparse) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.Sub("c")), FakeKey(100000));
  ASSERT_TRUE(e.ok());
  struct stat st;
  ASSERT_EQ(::stat(JoinPath((*e)->dir(), "claims").c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, static_cast<uint64_t>(st.st_size))
      << "a sparse shared mapping raises SIGBUS on a full disk";
}

TEST(SharedNode, ClaimsOfADeadSlotAreTakenOverAndALiveSlotsAreNot) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  auto a = CacheEntry::Open(o, FakeKey(10));
  auto b = CacheEntry::Open(o, FakeKey(10));  // a second writer (slot 1) in this process
  ASSERT_TRUE((*a)->TryClaim(3));
  EXPECT_FALSE((*b)->TryClaim(3)) << "slot 0 is alive";
  a->reset();  // its slot lock is dropped, as when a process dies
  EXPECT_TRUE((*b)->TryClaim(3)) << "a dead slot's claim blocks";
}

// A member of a group-shared root truncates the claims file while jobs have
// it mapped: their next claim must not die of SIGBUS; they go on filling
// (and serving) without coordination.
TEST(SharedNode, ClaimsFileCutWhileMappedFillsWithoutCoordination) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  EXPECT_EXIT(
      {
        auto a = CacheEntry::Open(o, FakeKey(4000));
        auto b = CacheEntry::Open(o, FakeKey(4000));  // slot 1: shares the claims file
        if (!a.ok() || !b.ok() || !(*a)->TryClaim(3)) std::exit(2);
        if (::truncate(JoinPath((*a)->dir(), "claims").c_str(), 0) != 0) std::exit(3);
        // Slot 0 is alive and held 3; with the file gone nobody coordinates.
        if (!(*b)->TryClaim(3) || !(*b)->TryClaim(3999)) std::exit(4);
        for (uint64_t id : {3, 3999})
          if (!PutFake(b->get(), id).ok() || !ReadsBackFake(b->get(), id)) std::exit(5);
        if (!(*a)->TryClaim(7) || !PutFake(a->get(), 7).ok()) std::exit(6);
        a->reset();
        b->reset();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A sparse 1 TiB .idx (any member of a group-shared root can make one) is
// read only as far as its .dat could have entries, in bounded chunks: by a
// reader's refresh and by the slot's next writer cutting its torn tail.
TEST(SharedNode, ASparseHugeIndexNeverBecomesOneAllocation) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  o.capacity_bytes = 1ull << 42;  // the 1 TiB is charged at its apparent size
  std::string dir;
  {
    auto a = CacheEntry::Open(o, FakeKey(10));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    for (uint64_t id : {1, 2}) ASSERT_TRUE(PutFake(a->get(), id).ok());
    dir = (*a)->dir();
  }
  int cut = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".idx") cut += ::truncate(f.path().c_str(), off_t{1} << 40) == 0;
  ASSERT_EQ(cut, 1);
  auto b = CacheEntry::Open(o, FakeKey(10));  // reads the index, then takes over slot 0
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(ReadsBackFake(b->get(), 1));
  EXPECT_TRUE(ReadsBackFake(b->get(), 2));
  ASSERT_TRUE(PutFake(b->get(), 3).ok());
  EXPECT_TRUE(ReadsBackFake(b->get(), 3));
  b->reset();
  auto c = CacheEntry::Open(o, FakeKey(10));
  ASSERT_TRUE(c.ok());
  for (uint64_t id : {1, 2, 3}) EXPECT_TRUE(ReadsBackFake(c->get(), id)) << id;
}

// Trash left by a killed gc or evictor counts against the capacity until it
// is gone, and the next open or reservation empties it.
TEST(SharedNode, TrashIsChargedAndEmptied) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(300, "old"));
    for (uint64_t id = 0; id < 300; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
    dir = (*e)->dir();
  }
  uint64_t before = *RootBytes(o);
  // As a gc killed right after its rename into trash/ leaves it.
  ASSERT_EQ(::rename(dir.c_str(), JoinPath(root.Sub("c"), "trash/x").c_str()), 0);
  EXPECT_GE(*RootBytes(o), before - 20000) << "trash/ is not counted";
  auto e = CacheEntry::Open(o, FakeKey(10, "new"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(CountFiles(root.Sub("c/trash")), 0u) << "open did not empty the trash";
}

// A clock we can move, to test what happens "a minute later".
class ShiftedClockEnv : public FaultInjectionEnv {
 public:
  using FaultInjectionEnv::FaultInjectionEnv;
  int64_t NowMicros() override { return FaultInjectionEnv::NowMicros() + shift_us.load(); }
  std::atomic<int64_t> shift_us{0};
};

int64_t MtimeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_mtim.tv_sec;
}

void Age(const std::string& path, time_t t) {
  struct utimbuf u {
    t, t
  };
  ASSERT_EQ(::utime(path.c_str(), &u), 0);
}

TEST(SharedNode, LastUsedFollowsUseNotInspection) {
  test::TempDir root;
  ShiftedClockEnv env(Env::Default());
  CacheOptions o = Opts(root.Sub("c"), &env);
  std::string lu;
  {
    auto e = CacheEntry::Open(o, FakeKey(5));
    ASSERT_TRUE(PutFake(e->get(), 0).ok());
    lu = JoinPath((*e)->dir(), "last_used");
  }
  Age(lu, 1000000);
  CacheOptions inspect = o;
  inspect.record_use = false;
  {
    auto e = CacheEntry::Open(inspect, FakeKey(5));
    VerifyReport r;
    ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
  }
  EXPECT_EQ(MtimeOf(lu), 1000000) << "verify counted as use";
  auto e = CacheEntry::Open(o, FakeKey(5));
  EXPECT_GT(MtimeOf(lu), 1000000) << "open is use";
  Age(lu, 1000000);
  std::string buf;
  CachedSample s;
  env.shift_us = 61ll * 1000000;  // a minute later, still in use
  ASSERT_TRUE((*e)->Get(0, &buf, &s).ok());
  EXPECT_GT(MtimeOf(lu), 1000000) << "an entry in use for long looks old";
}

// Every namespace call may fail (EIO, EMFILE, ENOSPC): never a crash, never
// wrong data, and once the fault is gone the entry serves what it held.
TEST(SharedNode, FaultsOnNamespaceCallsNeverBreakTheEntry) {
  for (auto op : {Op::kLock, Op::kMkdir, Op::kRename, Op::kSyncDir, Op::kList, Op::kFsSpace}) {
    for (int skip : {0, 1, 3, 6}) {
      test::TempDir root;
      FaultInjectionEnv env(Env::Default());
      CacheOptions o = Opts(root.Sub("c"), &env);
      {
        auto e = CacheEntry::Open(o, FakeKey(40));
        ASSERT_TRUE(e.ok());
        for (uint64_t id = 0; id < 20; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
      }
      env.FailAfter(op, skip, -1, Status::IOError("EIO"));
      {
        auto e = CacheEntry::Open(o, FakeKey(40));
        if (e.ok()) {
          for (uint64_t id = 20; id < 40; ++id) (void)PutFake(e->get(), id);
          for (uint64_t id = 0; id < 40; ++id) {
            Status st;
            if (!ReadsBackFake(e->get(), id, &st)) {
              ASSERT_FALSE(st.ok()) << "wrong data for " << id;
            }
          }
        }
      }
      env.ClearFaults();
      auto e = CacheEntry::Open(o, FakeKey(40));
      ASSERT_TRUE(e.ok()) << static_cast<int>(op) << "/" << skip << ": " << e.status().ToString();
      for (uint64_t id = 0; id < 20; ++id)
        ASSERT_TRUE(ReadsBackFake(e->get(), id))
            << static_cast<int>(op) << "/" << skip << " " << id;
      VerifyReport r;
      ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
      EXPECT_EQ(r.corrupt, 0u);
    }
  }
}

// Many writers at once leave one segment each; compaction folds them into
// one, keeps every record intact, and is refused while the entry is in use.
TEST(SharedNode, CompactFoldsManyWritersSegments) {
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  std::string dir;
  {
    std::vector<std::unique_ptr<CacheEntry>> writers;
    for (uint64_t w = 0; w < 12; ++w) {
      auto e = CacheEntry::Open(o, FakeKey(120));
      ASSERT_TRUE(e.ok());
      for (uint64_t id = w * 10u; id < w * 10u + 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
      dir = (*e)->dir();
      writers.push_back(std::move(*e));
    }
    CompactReport busy;
    EXPECT_TRUE(CompactEntry(o, Basename(dir), &busy).IsBusy());
  }
  size_t before = CountFiles(dir);
  CompactReport r;
  ASSERT_TRUE(CompactEntry(o, Basename(dir), &r).ok());
  EXPECT_EQ(r.records, 120u);
  EXPECT_LT(CountFiles(dir), before);
  EXPECT_EQ(r.files_after, 2u);
  auto e = CacheEntry::Open(o, FakeKey(120));
  EXPECT_EQ((*e)->samples_present(), 120u);
  for (uint64_t id = 0; id < 120; ++id) ASSERT_TRUE(ReadsBackFake(e->get(), id)) << id;
}

// Old segments that cannot be deleted leave duplicates and their bytes:
// compaction says so (it reported success before) and every record still
// reads back.
TEST(SharedNode, CompactThatCannotDeleteOldSegmentsFails) {
  test::TempDir root(test::FastTmp());
  FaultInjectionEnv env(Env::Default());
  CacheOptions o = Opts(root.Sub("c"), &env);
  std::string dir;
  {
    std::vector<std::unique_ptr<CacheEntry>> writers;
    for (uint64_t w = 0; w < 3; ++w) {
      auto e = CacheEntry::Open(o, FakeKey(30));
      ASSERT_TRUE(e.ok());
      for (uint64_t id = w * 10u; id < w * 10u + 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
      dir = (*e)->dir();
      writers.push_back(std::move(*e));
    }
  }
  env.FailAfter(Op::kRemove, 0, -1, Status::IOError("EIO"), "/seg-");
  CompactReport r;
  Status s = CompactEntry(o, Basename(dir), &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("old segments left"), std::string::npos) << s.ToString();
  env.ClearFaults();
  auto e = CacheEntry::Open(o, FakeKey(30));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < 30; ++id) ASSERT_TRUE(ReadsBackFake(e->get(), id)) << id;
}

// An entry of `n` segments, one record each (as n writers that ran at once
// leave), written with the default limit. Returns its directory.
std::string EntryOfManySegments(const CacheOptions& o, uint64_t n) {
  CacheOptions tiny = o;
  tiny.segment_bytes = 1;  // every record rolls a new segment
  auto e = CacheEntry::Open(tiny, FakeKey(n));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return "";
  for (uint64_t id = 0; id < n; ++id) EXPECT_TRUE(PutFake(e->get(), id).ok()) << id;
  EXPECT_TRUE((*e)->Sync().ok());
  return (*e)->dir();
}

// Runs fn in a child process under RLIMIT_NOFILE (soft, hard); fn returns
// what went wrong ("" for nothing). gtest's assertions stay in the parent.
std::string InChildWithFdLimit(rlim_t soft, rlim_t hard, const std::function<std::string()>& fn) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit r {
      soft, hard
    };
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::_exit(90);
    std::string why = fn();
    if (!why.empty()) std::fprintf(stderr, "child: %s\n", why.c_str());
    std::fflush(nullptr);
    ::_exit(why.empty() ? 0 : 1);
  }
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return "fork/wait failed";
  if (!WIFEXITED(st)) return "child killed by signal " + std::to_string(WTERMSIG(st));
  if (WEXITSTATUS(st) == 90) return "setrlimit failed";
  return WEXITSTATUS(st) == 0 ? "" : "child failed (its stderr says why)";
}

std::string ReadsAll(const CacheOptions& o, uint64_t n) {
  auto e = CacheEntry::Open(o, FakeKey(n));
  if (!e.ok()) return "open: " + e.status().ToString();
  if ((*e)->samples_present() != n)
    return "present " + std::to_string((*e)->samples_present()) + " of " + std::to_string(n);
  for (uint64_t id = 0; id < n; ++id) {
    Status st;
    if (!ReadsBackFake(e->get(), id, &st))
      return "sample " + std::to_string(id) + ": " + st.ToString();
  }
  return "";
}

// More segments than the process may open descriptors (soft = hard = 64):
// the entry still opens and reads back (its readers keep a share of the
// limit open and reopen the others), and compaction, the remedy for many
// segments, works too. Both failed with EMFILE: every segment stayed open.
TEST(SharedNode, AnEntryOfMoreSegmentsThanDescriptorsOpensAndCompacts) {
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  const uint64_t n = 300;
  std::string dir = EntryOfManySegments(o, n);
  ASSERT_FALSE(dir.empty());
  ASSERT_GE(CountFiles(dir), 2 * n);
  EXPECT_EQ(InChildWithFdLimit(64, 64, [&] { return ReadsAll(o, n); }), "");
  EXPECT_EQ(InChildWithFdLimit(64, 64,
                               [&]() -> std::string {
                                 CompactReport r;
                                 Status s = CompactEntry(o, Basename(dir), &r);
                                 if (!s.ok()) return "compact: " + s.ToString();
                                 if (r.records != n)
                                   return "compacted " + std::to_string(r.records);
                                 return ReadsAll(o, n);
                               }),
            "");
  EXPECT_LT(CountFiles(dir), 10u);
}

// `ssdfeed cache compact` under `ulimit -n 64` (soft and hard), as the
// remedy is documented.
TEST(SharedNode, CacheCompactCliWorksUnderALowDescriptorLimit) {
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  const uint64_t n = 200;
  std::string dir = EntryOfManySegments(o, n);
  ASSERT_FALSE(dir.empty());
  std::string out;
  int rc = test::RunCommand("sh -c 'ulimit -n 64 && exec " + test::CliPath() + " cache compact " +
                                Basename(dir) + " --cache " + o.root + "'",
                            &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_LT(CountFiles(dir), 10u) << out;
  EXPECT_EQ(ReadsAll(o, n), "");
}

// A process started with a low soft limit (the common `ulimit -n 1024`
// under a high hard one) has it raised to the hard limit by the library.
TEST(SharedNode, OpeningAnEntryRaisesTheSoftDescriptorLimitToTheHard) {
  struct rlimit r;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  if (r.rlim_max != RLIM_INFINITY && r.rlim_max <= 64)
    GTEST_SKIP() << "the hard limit is already " << r.rlim_max;
  test::TempDir root(test::FastTmp());
  CacheOptions o = Opts(root.Sub("c"));
  EXPECT_EQ(InChildWithFdLimit(64, r.rlim_max,
                               [&]() -> std::string {
                                 auto e = CacheEntry::Open(o, FakeKey(4));
                                 if (!e.ok()) return e.status().ToString();
                                 struct rlimit now;
                                 ::getrlimit(RLIMIT_NOFILE, &now);
                                 if (now.rlim_cur != now.rlim_max)
                                   return "soft limit still " + std::to_string(now.rlim_cur);
                                 return "";
                               }),
            "");
}

std::vector<std::string> SortedFiles(const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t Charged(const CacheOptions& o, const std::string& dir) {
  std::vector<EntryDirInfo> all;
  EXPECT_TRUE(ScanEntries(Env::Default(), RootPaths(o.root), o, &all).ok());
  for (const auto& e : all)
    if (e.dir == dir || e.name == Basename(dir)) return e.charged;
  return 0;
}

// A disk that fills mid-compaction: the half-written new segments (records
// duplicated, bytes charged) are removed, so a failed compaction leaves the
// entry as it was, and retrying adds nothing. They stayed before.
TEST(SharedNode, CompactOnAFullDiskRemovesItsPartialSegments) {
  test::TempDir root(test::FastTmp());
  FaultInjectionEnv env(Env::Default());
  CacheOptions o = Opts(root.Sub("c"), &env);
  std::string dir;
  {
    std::vector<std::unique_ptr<CacheEntry>> writers;
    for (uint64_t w = 0; w < 3; ++w) {
      auto e = CacheEntry::Open(o, FakeKey(30));
      ASSERT_TRUE(e.ok());
      for (uint64_t id = w * 10u; id < w * 10u + 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
      dir = (*e)->dir();
      writers.push_back(std::move(*e));
    }
  }
  auto files = SortedFiles(dir);
  uint64_t charged = Charged(o, dir);
  ASSERT_GT(charged, 0u);
  CacheOptions small = o;
  small.segment_bytes = 1200;  // a few records per new segment: several segments
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The 9th append of the compaction's copy (its new segments, named
    // compact-<slot>-<k> until the swap) finds the disk full.
    env.FailAfter(Op::kWrite, 8, -1, Status::NoSpace("ENOSPC"), "/compact-");
    CompactReport r;
    Status s = CompactEntry(small, Basename(dir), &r);
    env.ClearFaults();
    EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
    EXPECT_NE(s.message().find("partial new segments removed"), std::string::npos) << s.ToString();
    EXPECT_EQ(SortedFiles(dir), files) << "attempt " << attempt;
    EXPECT_EQ(Charged(o, dir), charged) << "attempt " << attempt;
  }
  EXPECT_EQ(ReadsAll(o, 30), "");
  CompactReport r;
  ASSERT_TRUE(CompactEntry(o, Basename(dir), &r).ok());
  EXPECT_EQ(r.records, 30u);
  EXPECT_EQ(ReadsAll(o, 30), "");
}

// A staging directory lives exactly as long as its maker holds its lock: a
// killed maker's is deleted even when its root slot number was reused.
TEST(SharedNode, StagingOfAKilledMakerIsDeletedALiveOneIsKept) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  auto holder = CacheEntry::Open(o, FakeKey(5, "holder"));  // reuses root slot 0 meanwhile
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(PutFake(holder->get(), 0).ok());
  std::string dead = root.Sub("c/trash/new.0.dead"), live = root.Sub("c/trash/new.0.live");
  {
    auto lock = CreateStagingDir(Env::Default(), o, dead);  // dropped: its maker "died"
    ASSERT_TRUE(lock.ok());
  }
  auto maker = CreateStagingDir(Env::Default(), o, live);
  ASSERT_TRUE(maker.ok());
  auto e = CacheEntry::Open(o, FakeKey(5, "other"));  // empties the trash
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(Env::Default()->FileExists(dead)) << "a dead maker's staging dir is kept forever";
  EXPECT_TRUE(Env::Default()->FileExists(live)) << "a live maker's staging dir was deleted";
}

// An unreadable ledger must fail the reservation, never be rewritten as
// empty (which would drop every live writer's reservation).
TEST(SharedNode, UnreadableLedgerFailsTheReservation) {
  test::TempDir root;
  CacheOptions o = Opts(root.Sub("c"));
  {
    auto e = CacheEntry::Open(o, FakeKey(5));
    ASSERT_TRUE(e.ok());
  }
  ASSERT_EQ(::unlink(root.Sub("c/capacity.ledger").c_str()), 0);
  ASSERT_EQ(::mkfifo(root.Sub("c/capacity.ledger").c_str(), 0600), 0);
  auto e = CacheEntry::Open(o, FakeKey(5));
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(PutFake(e->get(), 1).ok());
  EXPECT_FALSE((*e)->admitting());
}

}  // namespace
}  // namespace ssdfeed
