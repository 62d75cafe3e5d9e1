// Crash, disk-full, capacity and hostile-filesystem tests of the cache.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;
using test::FakeKey;
using test::PutFake;
using test::ReadsBackFake;

CacheOptions Opts(const std::string& root, Env* env = nullptr) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.sync_bytes = 1000;  // a sync every few records
  o.reserve_chunk = 8192;
  o.env = env;
  return o;
}

constexpr uint64_t kN = 40;

// Fills every sample; returns how many Puts succeeded.
uint64_t FillAll(CacheEntry* e) {
  uint64_t ok = 0;
  for (uint64_t id = 0; id < kN; ++id) {
    if (e->Contains(id)) continue;
    if (!PutFake(e, id).ok()) break;
    ++ok;
  }
  return ok;
}

// A power cut after the k-th successful sync, for every k of a whole fill:
// unsynced data is dropped; the entry must open, serve only intact samples,
// keep at least what was synced, and resume to completion.
TEST(CacheCrash, DropUnsyncedDataAtEverySyncPoint) {
  int total_syncs = 0;
  {
    test::TempDir root;
    FaultInjectionEnv env(Env::Default());
    auto e = CacheEntry::Open(Opts(root.path(), &env), FakeKey(kN));
    ASSERT_TRUE(e.ok());
    ASSERT_EQ(FillAll(e->get()), kN);
    e->reset();
    total_syncs = env.Count(Op::kSync);
  }
  // The manifest, the close, and background syncs (coalesced, so how many
  // depends on timing): every one of them is a crash point below.
  ASSERT_GE(total_syncs, 3);
  for (int k = 0; k <= total_syncs; ++k) {
    test::TempDir root;
    FaultInjectionEnv env(Env::Default());
    {
      auto e = CacheEntry::Open(Opts(root.path(), &env), FakeKey(kN));
      ASSERT_TRUE(e.ok());
      // The last round cuts no power: everything must then be present.
      if (k < total_syncs) env.FailAfter(Op::kSync, k, -1, Status::IOError("power cut"));
      FillAll(e->get());  // stops admitting at the failed sync
    }
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    env.ClearFaults();
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
    ASSERT_TRUE(e.ok()) << "k=" << k << ": " << e.status().ToString();
    uint64_t present = 0;
    for (uint64_t id = 0; id < kN; ++id) {
      if (!(*e)->Contains(id)) continue;
      Status st;
      // Present means intact: a power cut never leaves a bad record indexed
      // past the size check, and any that slipped through would fail here.
      EXPECT_TRUE(ReadsBackFake(e->get(), id, &st))
          << "k=" << k << " id=" << id << " " << st.ToString();
      ++present;
    }
    FillAll(e->get());
    for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBackFake(e->get(), id)) << k << " " << id;
    if (k == total_syncs) {
      EXPECT_EQ(present, kN);
    }
  }
}

TEST(CacheDiskFull, InjectedEnospcStopsAdmissionKeepsEntryConsistent) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  auto e = CacheEntry::Open(Opts(root.path(), &env), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  env.FailAfter(Op::kWrite, 1, -1, Status::NoSpace("No space left on device"), ".dat");
  Status s = PutFake(e->get(), 10);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_FALSE((*e)->admitting());
  EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
  EXPECT_NE((*e)->warning().find("No space left"), std::string::npos);
  EXPECT_TRUE(PutFake(e->get(), 11).IsNoSpace());  // no more writes tried
  for (uint64_t id = 0; id < 10; ++id) EXPECT_TRUE(ReadsBackFake(e->get(), id));
  env.ClearFaults();
  e->reset();
  auto again = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->samples_present(), 10u);
  EXPECT_TRUE((*again)->admitting());
  ASSERT_EQ(FillAll(again->get()), kN - 10);
}

// An explicit Sync that fails is counted and warned like a failed background
// sync: a loader's Stop, which cannot return it, still leaves a trace.
TEST(CacheDiskFull, FailedSyncIsCountedAndStopsAdmission) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  CacheOptions o = Opts(root.path(), &env);
  o.sync_bytes = 1ull << 30;  // no background sync: only ours fails
  auto e = CacheEntry::Open(o, FakeKey(kN));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 3; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  env.FailAfter(Op::kSync, 0, -1, Status::IOError("Input/output error"), ".dat");
  Status s = (*e)->Sync();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
  EXPECT_FALSE((*e)->admitting());
  EXPECT_NE((*e)->warning().find("Input/output error"), std::string::npos);
  env.ClearFaults();
  for (uint64_t id = 0; id < 3; ++id) EXPECT_TRUE(ReadsBackFake(e->get(), id));
}

TEST(CacheDiskFull, EioOnReadIsAnErrorNotWrongData) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  auto e = CacheEntry::Open(Opts(root.path(), &env), FakeKey(kN));
  ASSERT_TRUE(PutFake(e->get(), 1).ok());
  env.FailAfter(Op::kRead, 0, 1, Status::IOError("Input/output error"), ".dat");
  Status st;
  EXPECT_FALSE(ReadsBackFake(e->get(), 1, &st));
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_TRUE(ReadsBackFake(e->get(), 1));
}

// A real small filesystem: a 2 MiB tmpfs mounted by the test (root only).
TEST(CacheDiskFull, RealEnospcOnSmallTmpfs) {
  test::TempDir mnt;
  if (::mount("tmpfs", mnt.path().c_str(), "tmpfs", 0, "size=2m") != 0)
    GTEST_SKIP() << "cannot mount tmpfs here: " << std::strerror(errno)
                 << " (needs CAP_SYS_ADMIN in the mount namespace)";
  struct Unmount {
    std::string p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt.path()};
  CacheOptions o = Opts(mnt.Sub("cache"));
  o.capacity_bytes = 1ull << 40;  // only the filesystem limits us
  o.reserve_chunk = 1ull << 20;
  auto e = CacheEntry::Open(o, FakeKey(100000));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 50; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  {  // someone else fills the disk
    std::ofstream filler(mnt.Sub("filler"), std::ios::binary);
    std::string mb(1 << 20, 'x');
    for (int i = 0; i < 4 && filler; ++i) filler.write(mb.data(), mb.size());
  }
  uint64_t stored = 50;
  Status s;
  for (uint64_t id = 50; id < 100000; ++id) {
    s = PutFake(e->get(), id);
    if (!s.ok()) break;
    ++stored;
  }
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_FALSE((*e)->admitting());
  // The reservation made before the filler came is written into until the
  // kernel says ENOSPC: a real write error, not a capacity refusal.
  EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
  for (uint64_t id = 0; id < stored; id += 7) EXPECT_TRUE(ReadsBackFake(e->get(), id));
  e->reset();
  ::unlink(mnt.Sub("filler").c_str());
  auto again = CacheEntry::Open(o, FakeKey(100000));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_LE((*again)->samples_present(), stored);
  EXPECT_GE((*again)->samples_present(), 50u);
  for (uint64_t id = 0; id < 100000; ++id)
    if ((*again)->Contains(id)) {
      ASSERT_TRUE(ReadsBackFake(again->get(), id)) << id;
    }
}

// Several entries filled at once never push the root over its capacity.
// RootBytes reads under the capacity lock: a sum the disk held at one moment
// (read without it, an entry counted before its eviction plus its evictor
// counted after growing could add up to more than the disk ever held).
TEST(CacheCapacity, ConcurrentFillsStayUnderCapacitySampledContinuously) {
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  o.capacity_bytes = 400 * 1024;
  o.reserve_chunk = 32 * 1024;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> max_seen{0};
  std::thread sampler([&] {
    while (!stop) {
      auto b = RootBytes(o);
      if (b.ok() && *b > max_seen) max_seen = *b;
      // Pacing, so that the fills get the capacity lock too.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<std::thread> fillers;
  std::atomic<uint64_t> denied{0};
  std::atomic<int> opened{0};
  for (int t = 0; t < 3; ++t) {
    fillers.emplace_back([&, t] {
      auto e = CacheEntry::Open(o, FakeKey(5000, std::to_string(t) + "e"));
      ASSERT_TRUE(e.ok());
      // Each entry stores its first record before any fills on, then all
      // three fill at once, waiting at most 5 s for the others: a thread the
      // scheduler left aside while the other two filled the root found it
      // full and stored nothing (seen in a --gtest_repeat=50 run on 2 busy
      // cores). Three first records (one 32 KiB reservation each) always fit.
      ASSERT_TRUE(PutFake(e->get(), 0).ok());
      ++opened;
      for (int i = 0; i < 5000 && opened.load() < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (uint64_t id = 1; id < 5000; ++id)
        if (!PutFake(e->get(), id).ok()) break;
      denied += (*e)->counters().capacity_denied.load();
      EXPECT_FALSE((*e)->admitting());
      EXPECT_GT((*e)->samples_present(), 0u);
    });
  }
  for (auto& f : fillers) f.join();
  stop = true;
  sampler.join();
  EXPECT_EQ(denied.load(), 3u);
  EXPECT_LE(max_seen.load(), o.capacity_bytes);
  // Up to a reserve chunk per writer (3 x 32 KiB) and each entry's unused
  // small-file allowance may be charged but not yet on disk.
  EXPECT_GT(max_seen.load(), o.capacity_bytes / 2) << "capacity was barely used";
}

// A direct fill on a device slower than its puts: the staged chunks (up to
// 8 MiB) are on no disk yet when the writer renews its reservation, so they
// must stay charged, or their room is granted again. Sampled under the
// capacity lock, and once more when everything is written.
TEST(CacheCapacity, DirectFillOnASlowDeviceStaysUnderCapacity) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  FaultInjectionEnv env(Env::Default());
  env.DelayWrites(20000);  // 20 ms a write: several chunks queue up
  CacheOptions o = Opts(root.path(), &env);
  o.capacity_bytes = 6 << 20;
  o.reserve_chunk = 256 << 10;
  o.fill_write = FillWrite::kDirect;
  o.sync_bytes = 64 << 20;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> max_seen{0};
  std::thread sampler([&] {
    while (!stop) {
      auto b = RootBytes(o);
      if (b.ok() && *b > max_seen) max_seen = *b;
      // Pacing, so that the fills get the capacity lock too.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  constexpr int kSide = 128;  // 48 KiB a record
  std::vector<uint8_t> pixels(kSide * kSide * 3, 7);
  uint64_t stored = 0;
  {
    auto e = CacheEntry::Open(o, FakeKey(1000, "slow"));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    while (stored < 1000 && (*e)->Put(stored, 1, pixels.data(), kSide, kSide, 3).ok()) ++stored;
    EXPECT_EQ((*e)->counters().capacity_denied.load(), 1u);
  }  // closed: every staged chunk written
  stop = true;
  sampler.join();
  EXPECT_GT(stored * kSide * kSide * 3, o.capacity_bytes / 2) << "capacity was barely used";
  EXPECT_LE(max_seen.load(), o.capacity_bytes);
  EXPECT_LE(*RootBytes(o), o.capacity_bytes);
}

void SetLastUsed(const std::string& dir, time_t t) {
  struct utimbuf u {
    t, t
  };
  ASSERT_EQ(::utime(JoinPath(dir, "last_used").c_str(), &u), 0);
}

TEST(CacheCapacity, EvictsLeastRecentlyUsedUnusedEntriesFirst) {
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  o.capacity_bytes = 1ull << 30;
  std::vector<std::string> dirs;
  uint64_t entry_bytes = 0;
  for (int i = 0; i < 4; ++i) {
    auto e = CacheEntry::Open(o, FakeKey(200, std::to_string(i) + "old"));
    for (uint64_t id = 0; id < 200; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
    dirs.push_back((*e)->dir());
  }
  entry_bytes = *RootBytes(o) / 4;
  // Ages: old0 oldest ... old3 newest; old0 stays open (in use).
  for (int i = 0; i < 4; ++i) SetLastUsed(dirs[i], 1000000 + i * 1000);
  auto in_use = CacheEntry::Open(o, FakeKey(200, "0old"));
  SetLastUsed(dirs[0], 1000000);
  // Room for the 4 old ones plus about 1.5 entries: the new entry's fill
  // must evict exactly old1, then old2, in that order, never old0.
  o.capacity_bytes = entry_bytes * 5 + entry_bytes / 2;
  auto fresh = CacheEntry::Open(o, FakeKey(400, "new"));
  ASSERT_TRUE(fresh.ok());
  uint64_t stored = 0;
  for (uint64_t id = 0; id < 400; ++id) {
    if (!PutFake(fresh->get(), id).ok()) break;
    ++stored;
    bool e1 = Env::Default()->FileExists(dirs[1]), e2 = Env::Default()->FileExists(dirs[2]);
    ASSERT_FALSE(!e2 && e1) << "old2 evicted before old1";
  }
  EXPECT_TRUE(Env::Default()->FileExists(dirs[0])) << "an entry in use was evicted";
  EXPECT_FALSE(Env::Default()->FileExists(dirs[1]));
  EXPECT_TRUE(Env::Default()->FileExists(dirs[3])) << "newest evicted although not needed";
  EXPECT_GE((*fresh)->counters().evictions.load(), 1u);
  EXPECT_LE(*RootBytes(o), o.capacity_bytes);
}

TEST(CacheSecurity, SymlinkedEntryIsRefusedAndNothingOutsideIsDeleted) {
  test::TempDir root, outside;
  std::ofstream(outside.Sub("precious")) << "keep me";
  CacheOptions o = Opts(root.path());
  EntryKey key = FakeKey(10);
  ASSERT_TRUE(CreateDirs(Env::Default(), root.Sub("entries")).ok());
  ASSERT_EQ(::symlink(outside.path().c_str(), root.Sub("entries/" + key.fingerprint()).c_str()), 0);
  auto e = CacheEntry::Open(o, key);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("symlink"), std::string::npos);
  ASSERT_TRUE(CollectGarbage(o, 1, 1).ok());
  EXPECT_FALSE(RemoveEntry(o, key.fingerprint()).ok());
  EXPECT_TRUE(Env::Default()->FileExists(outside.Sub("precious")));
}

TEST(CacheSecurity, SymlinkPlantedInsideAnEntryIsNotFollowed) {
  test::TempDir root, outside;
  std::ofstream(outside.Sub("secret.idx")) << std::string(96, 'z');
  CacheOptions o = Opts(root.path());
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(10));
    ASSERT_TRUE(PutFake(e->get(), 1).ok());
    dir = (*e)->dir();
  }
  ASSERT_EQ(
      ::symlink(outside.Sub("secret.idx").c_str(), JoinPath(dir, "seg-evil-0000.idx").c_str()), 0);
  ASSERT_EQ(
      ::symlink(outside.Sub("secret.idx").c_str(), JoinPath(dir, "seg-evil-0000.dat").c_str()), 0);
  {
    auto e = CacheEntry::Open(o, FakeKey(10));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_TRUE(ReadsBackFake(e->get(), 1));
  }
  auto removed = CollectGarbage(o, 1, 0);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->size(), 1u);
  EXPECT_TRUE(Env::Default()->FileExists(outside.Sub("secret.idx")));  // only the link went
}

TEST(CacheSecurity, EntryOfAnotherUserIsReadOnlyAndNeverDeleted) {
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(10));
    ASSERT_TRUE(PutFake(e->get(), 2).ok());
    dir = (*e)->dir();
  }
  // The root's owner's entry (a cache they made for others to read); one of
  // a user we have no reason to trust is not served at all
  // (RootConfinement.AnEntryPlantedByAnotherUserIsNotServed).
  // Root alone may not do it: a user namespace without uid 4242 refuses.
  if (::chown(dir.c_str(), 4242, 4242) != 0)
    GTEST_SKIP() << "cannot chown to another user here: " << std::strerror(errno);
  ASSERT_EQ(::chown(root.path().c_str(), 4242, 4242), 0);
  auto e = CacheEntry::Open(o, FakeKey(10));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*e)->read_only());
  EXPECT_TRUE(ReadsBackFake(e->get(), 2));
  EXPECT_FALSE(PutFake(e->get(), 3).ok());
  e->reset();
  EXPECT_FALSE(RemoveEntry(o, Basename(dir)).ok());
  ASSERT_TRUE(CollectGarbage(o, 1, 1).ok());
  EXPECT_TRUE(Env::Default()->FileExists(dir));
}

TEST(CacheSecurity, InUseEntryIsNotRemoved) {
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  auto e = CacheEntry::Open(o, FakeKey(10));
  Status s = RemoveEntry(o, Basename((*e)->dir()));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("in use"), std::string::npos);
  std::string name = Basename((*e)->dir());
  e->reset();
  EXPECT_TRUE(RemoveEntry(o, name).ok());
  EXPECT_TRUE(RemoveEntry(o, name).IsNotFound());
}

}  // namespace
}  // namespace ssdfeed
