// SegmentWriter's policy, through the entry that owns it: why admission
// stopped comes from the failure's Status code (never from its message), the
// first reason is kept, and a reused writer slot takes over its last segment
// (its torn tail cut) instead of adding files.
#include "cache/segment_writer.h"

#include <gtest/gtest.h>

#include <fstream>

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

CacheOptions Opts(const std::string& root, Env* env) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.fill_write = FillWrite::kBuffered;
  o.env = env;
  return o;
}

// Admission after the first .dat write fails with `error`.
Admission AfterFailedWrite(const Status& error, std::string* warning) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  auto e = CacheEntry::Open(Opts(root.path(), &env), FakeKey(10));
  EXPECT_TRUE(e.ok());
  EXPECT_EQ((*e)->admission(), Admission::kAdmitting);
  env.FailAfter(Op::kWrite, 0, -1, error, ".dat");
  EXPECT_FALSE(PutFake(e->get(), 0).ok());
  EXPECT_FALSE((*e)->admitting());
  *warning = (*e)->warning();
  return (*e)->admission();
}

// fetcher.cc used to read the reason back from the warning's text: a quota
// (NoSpace, "Disk quota exceeded") read as an I/O error, and an I/O error
// whose message held "No space" (a path) as a full disk.
TEST(SegmentWriter, AdmissionComesFromTheStatusCodeNotTheMessage) {
  std::string w;
  EXPECT_EQ(AfterFailedWrite(Status::NoSpace("No space left on device"), &w), Admission::kDiskFull);
  EXPECT_NE(w.find("No space left on device"), std::string::npos) << w;
  EXPECT_EQ(AfterFailedWrite(Status::NoSpace("Disk quota exceeded"), &w), Admission::kDiskFull);
  EXPECT_EQ(AfterFailedWrite(Status::IOError("/srv/No space/x.dat: Input/output error"), &w),
            Admission::kIOError);
}

TEST(SegmentWriter, AFullRootIsCapacityAndStaysTheReason) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  CacheOptions o = Opts(root.path(), &env);
  o.capacity_bytes = 64 * 1024;  // the entry's metadata and a few records
  o.reserve_chunk = 4096;
  auto e = CacheEntry::Open(o, FakeKey(1000));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Status s;
  uint64_t id = 0;
  while ((s = PutFake(e->get(), id)).ok()) ++id;
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_EQ((*e)->admission(), Admission::kCapacity);
  EXPECT_EQ((*e)->counters().capacity_denied.load(), 1u);
  // A sync failing afterwards is counted, but the reason stays the first.
  env.FailAfter(Op::kSync, 0, -1, Status::IOError("Input/output error"), ".dat");
  EXPECT_TRUE((*e)->Sync().IsIOError());
  EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
  EXPECT_EQ((*e)->admission(), Admission::kCapacity);
  env.ClearFaults();
  for (uint64_t i = 0; i < id; ++i) EXPECT_TRUE(ReadsBackFake(e->get(), i));
}

// Files of the entry under root whose names end in ext.
std::vector<std::string> EntryFiles(const std::string& root, const std::string& ext,
                                    std::string* dir) {
  Env* env = Env::Default();
  std::vector<std::string> entries, names, out;
  EXPECT_TRUE(env->GetChildren(JoinPath(root, "entries"), &entries).ok());
  EXPECT_EQ(entries.size(), 1u);
  *dir = JoinPath(JoinPath(root, "entries"), entries.at(0));
  EXPECT_TRUE(env->GetChildren(*dir, &names).ok());
  for (const auto& n : names)
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0)
      out.push_back(n);
  return out;
}

TEST(SegmentWriter, AReusedSlotCutsTheTornTailAndAppendsToTheSameSegment) {
  test::TempDir root;
  CacheOptions o = Opts(root.path(), Env::Default());
  {
    auto e = CacheEntry::Open(o, FakeKey(20));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < 5; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  }
  std::string dir;
  auto dats = EntryFiles(root.path(), ".dat", &dir);
  ASSERT_EQ(dats.size(), 1u);
  std::string dat = JoinPath(dir, dats[0]);
  std::string idx = dat.substr(0, dat.size() - 4) + ".idx";
  uint64_t intact = Env::Default()->Stat(dat)->size;
  // A crash mid-append: half a record without its entry, half an entry.
  std::ofstream(dat, std::ios::app) << std::string(100, 'x');
  std::ofstream(idx, std::ios::app) << std::string(20, 'y');
  {
    auto e = CacheEntry::Open(o, FakeKey(20));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 5; id < 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  }
  EXPECT_EQ(EntryFiles(root.path(), ".dat", &dir), dats) << "no file added";
  EXPECT_EQ(Env::Default()->Stat(idx)->size, 10 * cache_format::kIndexEntrySize);
  uint64_t added = 0;
  for (uint64_t id = 5; id < 10; ++id) {
    int h, w;
    added += test::FakePixels(id, &h, &w).size() + cache_format::kRecordHeaderSize;
  }
  EXPECT_EQ(Env::Default()->Stat(dat)->size, intact + added) << "appended right after the cut";
  auto e = CacheEntry::Open(o, FakeKey(20));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 10; ++id) EXPECT_TRUE(ReadsBackFake(e->get(), id)) << id;
}

}  // namespace
}  // namespace ssdfeed
