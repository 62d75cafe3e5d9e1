#include "ssdfeed/cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <fstream>
#include <random>

#include "cache_test_util.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using test::FakeKey;
using test::PutFake;
using test::ReadsBackFake;

CacheOptions Opts(const std::string& root) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.sync_bytes = 4096;
  o.reserve_chunk = 16384;
  return o;
}

std::vector<std::string> EntryFiles(const std::string& dir, const std::string& ext) {
  std::vector<std::string> names, out;
  Status s = Env::Default()->GetChildren(dir, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (auto& n : names)
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0)
      out.push_back(JoinPath(dir, n));
  return out;
}

TEST(Cache, PutGetAndReopen) {
  test::TempDir root;
  std::string dir;
  {
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(50));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < 50; id += 2) ASSERT_TRUE(PutFake(e->get(), id).ok());
    for (uint64_t id = 0; id < 50; ++id) EXPECT_EQ(ReadsBackFake(e->get(), id), id % 2 == 0);
    EXPECT_EQ((*e)->samples_present(), 25u);
    dir = (*e)->dir();
  }
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(50));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->dir(), dir);
  EXPECT_EQ((*e)->samples_present(), 25u);
  for (uint64_t id = 0; id < 50; id += 2) EXPECT_TRUE(ReadsBackFake(e->get(), id));
  // Files carry no group/world access.
  for (const auto& f : EntryFiles(dir, ".dat")) {
    auto fi = Env::Default()->Stat(f);
    EXPECT_EQ(fi->mode & 077u, 0u) << f;
  }
  auto list = ListEntries(Opts(root.path()));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].samples_present, 25u);
  EXPECT_EQ((*list)[0].state, "partial");
  EXPECT_TRUE((*list)[0].in_use);
}

TEST(Cache, DifferentKeyIsDifferentEntry) {
  test::TempDir root;
  auto a = CacheEntry::Open(Opts(root.path()), FakeKey(10, "a"));
  auto b = CacheEntry::Open(Opts(root.path()), FakeKey(10, "b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->dir(), (*b)->dir());
  ASSERT_TRUE(PutFake(a->get(), 1).ok());
  EXPECT_FALSE((*b)->Contains(1));
}

// A sample count past the format's bound (2^32; `cache import` and every
// manifest reader refuse it) is refused at Open, before the entry, its
// claims file or its index is made. 2^32 itself is the bound, not past it.
TEST(Cache, OpenRefusesMoreSamplesThanTheFormatHolds) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey((uint64_t{1} << 32) + 1));
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(e.status().IsInvalidArgument()) << e.status().ToString();
  EXPECT_NE(e.status().message().find("test:a: 4294967297 samples is more than a cache entry"),
            std::string::npos)
      << e.status().message();
  auto list = ListEntries(Opts(root.path()));
  EXPECT_TRUE(!list.ok() || list->empty()) << "an entry was made";
}

TEST(Cache, ConcurrentWritersInOneEntrySeeEachOther) {
  test::TempDir root;
  auto a = CacheEntry::Open(Opts(root.path()), FakeKey(100));
  auto b = CacheEntry::Open(Opts(root.path()), FakeKey(100));
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint64_t id = 0; id < 100; ++id) ASSERT_TRUE(PutFake(id % 2 ? a->get() : b->get(), id).ok());
  ASSERT_TRUE((*a)->Sync().ok());
  ASSERT_TRUE((*b)->Sync().ok());
  ASSERT_TRUE((*a)->Refresh().ok());
  for (uint64_t id = 0; id < 100; ++id) EXPECT_TRUE(ReadsBackFake(a->get(), id)) << id;
}

// Flips random bytes of the segment and index files; every read is then
// either the right sample or a detected corruption, and Put repairs it.
TEST(Cache, ByteFlipsAreDetectedAndRepaired) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    test::TempDir root;
    std::string dir;
    {
      auto e = CacheEntry::Open(Opts(root.path()), FakeKey(30));
      ASSERT_TRUE(e.ok());
      for (uint64_t id = 0; id < 30; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
      dir = (*e)->dir();
    }
    auto files = EntryFiles(dir, round % 4 == 3 ? ".idx" : ".dat");
    ASSERT_FALSE(files.empty());
    for (int flips = 0; flips < 3; ++flips) {
      std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(0, std::ios::end);
      uint64_t size = f.tellg();
      uint64_t off = rng() % size;
      f.seekg(off);
      char c;
      f.read(&c, 1);
      c ^= static_cast<char>(1 + rng() % 255);
      f.seekp(off);
      f.write(&c, 1);
    }
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(30));
    ASSERT_TRUE(e.ok());
    uint64_t bad = 0;
    for (uint64_t id = 0; id < 30; ++id) {
      Status st;
      if (ReadsBackFake(e->get(), id, &st)) continue;
      ASSERT_TRUE(st.IsCorruption() || st.IsNotFound()) << st.ToString();
      if (st.IsCorruption()) {
        EXPECT_NE(st.message().find(".dat offset"), std::string::npos) << st.message();
        EXPECT_FALSE((*e)->Contains(id)) << "dropped from the index";
      }
      ++bad;
      ASSERT_TRUE(PutFake(e->get(), id).ok());  // repair
      EXPECT_TRUE(ReadsBackFake(e->get(), id));
    }
    EXPECT_GT(bad, 0u) << "round " << round << ": three flips hit nothing we read";
    // A flip in a record is counted; one in an index entry only hides it.
    if (round % 4 != 3) {
      EXPECT_GT((*e)->counters().corrupt_records.load(), 0u) << "round " << round;
    }
    // A fresh reader prefers the repaired (newer) records.
    auto again = CacheEntry::Open(Opts(root.path()), FakeKey(30));
    for (uint64_t id = 0; id < 30; ++id) EXPECT_TRUE(ReadsBackFake(again->get(), id)) << id;
  }
}

TEST(Cache, VerifyFindsCorruption) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(10));
  for (uint64_t id = 0; id < 8; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  ASSERT_TRUE((*e)->Sync().ok());
  auto files = EntryFiles((*e)->dir(), ".dat");
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);  // inside the first record's payload
    f.write("\xff\xfe", 2);
  }
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
  EXPECT_EQ(r.good, 7u);
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.missing, 2u);
  ASSERT_EQ(r.corrupt_ids.size(), 1u);
  EXPECT_EQ(r.corrupt_ids[0], 0u);
}

TEST(Cache, ClaimsExcludeOthersAndAreReleased) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(10));
  ASSERT_TRUE((*e)->TryClaim(3));
  // The same process may claim again (threads of one job share claims).
  EXPECT_TRUE((*e)->TryClaim(3));
  pid_t child = fork();
  if (child == 0) {
    auto c = CacheEntry::Open(Opts(root.path()), FakeKey(10));
    bool got3 = (*c)->TryClaim(3), got4 = (*c)->TryClaim(4);
    _exit(got3 ? 1 : (got4 ? 0 : 2));  // 4 stays claimed by this dying child
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 0) << "child could claim 3 held by a live process";
  // The child died holding 4: it can be taken over.
  EXPECT_TRUE((*e)->TryClaim(4));
  (*e)->ReleaseClaim(3);
}

// A claim let go of by another process says so to the next claimant, which
// then looks in the index once more (that process may have stored the
// sample); a claim nobody ever held does not, so a fill's claims cost no
// second look. In a child process: claims of one process never exclude it.
TEST(Cache, AClaimLetGoOfSaysSoToTheNextClaimant) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(10));
  ASSERT_TRUE(e.ok());
  bool released = true;
  ASSERT_TRUE((*e)->TryClaim(3, &released));
  EXPECT_FALSE(released) << "nobody held 3 before";
  ASSERT_TRUE(PutFake(e->get(), 3).ok());
  (*e)->ReleaseClaim(3);
  pid_t child = fork();
  if (child == 0) {
    auto c = CacheEntry::Open(Opts(root.path()), FakeKey(10));
    bool r3 = false, r4 = true;
    bool got3 = (*c)->TryClaim(3, &r3), got4 = (*c)->TryClaim(4, &r4);
    _exit(!got3 || !got4 ? 1 : !r3 ? 2 : r4 ? 3 : 0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: a claim refused, 2: 3's release not seen, "
                                   "3: 4 looked released";
  // The child died holding 4: whoever takes it over looks again too.
  ASSERT_TRUE((*e)->TryClaim(4, &released));
  EXPECT_TRUE(released) << "a dead claimant may have stored it";
}

}  // namespace
}  // namespace ssdfeed
