// One cache root shared by many jobs on a node: slots instead of pids,
// bounded files, eviction races, damaged manifests, untrusted roots, planted
// FIFOs, last_used bookkeeping, and faults on every namespace call.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <atomic>
#include <chrono>
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
