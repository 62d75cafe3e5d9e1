// Reads through the O_DIRECT path (warm_read = direct): records come back
// intact from their aligned windows, and a flipped byte is still caught.
#include <gtest/gtest.h>

#include <fstream>

#include "cache/memory_fit.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using test::FakeKey;
using test::FakePixels;
using test::PutFake;

CacheOptions DirectOpts(const std::string& root) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.warm_read = WarmRead::kDirect;
  return o;
}

std::string OnlyDat(const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  for (const auto& n : names)
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".dat") == 0) return JoinPath(dir, n);
  return "";
}

bool SameAsFake(uint64_t id, const CacheRead& r) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  return r.status.ok() && r.sample.height == h && r.sample.width == w &&
         r.sample.label == int64_t(id % 7) && std::equal(p.begin(), p.end(), r.sample.pixels);
}

// Two batches in flight on one thread's ring, waited for in the opposite
// order: each completion is credited to its own batch, short reads at the
// end of the file come back short, and every byte lands where it belongs.
TEST(CacheDirect, StartReadsKeepsSeveralBatchesApart) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  std::string path = JoinPath(root.path(), "f");
  const size_t kSize = 64 * 4096 + 100;  // the last block is partial
  std::string data(kSize, '\0');
  for (size_t i = 0; i < kSize; ++i) data[i] = static_cast<char>(i * 131 + i / 4096);
  std::ofstream(path, std::ios::binary) << data;
  RandomAccessFileOptions o;
  o.direct = true;
  auto f = Env::Default()->NewRandomAccessFile(path, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ReadBuffers bufs;
  std::vector<ReadRequest> a(16), b(17);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = {f->get(), (i * 3 % 64) * 4096, 4096, bufs.Get(i, 4096), 0, Status::OK()};
  for (size_t i = 0; i < b.size(); ++i)  // b[16] reads past the end
    b[i] = {f->get(), (i == 16 ? 64 : i * 5 % 61) * 4096,
            2 * 4096, bufs.Get(100 + i, 2 * 4096),
            0,        Status::OK()};
  auto pa = Env::Default()->StartReads(a.data(), a.size());
  auto pb = Env::Default()->StartReads(b.data(), b.size());
  pb->Wait();
  pa->Wait();
  auto expect = [&](const ReadRequest& r) {
    size_t want = std::min<size_t>(r.n, kSize - r.offset);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(r.got, want) << "offset " << r.offset;
    EXPECT_EQ(std::string(r.scratch, r.got), data.substr(r.offset, want)) << r.offset;
  };
  for (const auto& r : a) expect(r);
  for (const auto& r : b) expect(r);
  EXPECT_EQ(b[16].got, 100u);
}

TEST(CacheDirect, GetManyReadsEveryRecordDirect) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  auto e = CacheEntry::Open(DirectOpts(root.path()), FakeKey(40));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->direct_reads());
  for (uint64_t id = 0; id < 40; id += 2) ASSERT_TRUE(PutFake(e->get(), id).ok());
  std::vector<CacheRead> reads(40);
  for (uint64_t id = 0; id < 40; ++id) reads[id].id = id;
  ReadBuffers bufs;
  (*e)->GetMany(reads.data(), reads.size(), &bufs);
  for (uint64_t id = 0; id < 40; ++id) {
    if (id % 2 == 0)
      EXPECT_TRUE(SameAsFake(id, reads[id])) << id << ": " << reads[id].status.ToString();
    else
      EXPECT_TRUE(reads[id].status.IsNotFound()) << id;
  }
  EXPECT_EQ((*e)->counters().direct_reads.load(), 20u);
}

// EIO on one read of a batch in flight through io_uring: that record alone
// fails, with the error (not "corrupt": the record is kept and reads back
// once the device answers), and every other one comes back intact.
TEST(CacheDirect, ReadErrorInABatchFailsOnlyItsRecord) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  CacheOptions o = DirectOpts(root.path());
  o.env = &env;
  auto e = CacheEntry::Open(o, FakeKey(20));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < 20; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
  std::vector<CacheRead> reads(20);
  for (uint64_t id = 0; id < 20; ++id) reads[id].id = id;
  ReadBuffers bufs;
  env.FailAfter(FaultInjectionEnv::Op::kRead, 5, 1, Status::IOError("EIO"), ".dat");
  (*e)->GetMany(reads.data(), reads.size(), &bufs);
  int failed = 0;
  for (uint64_t id = 0; id < 20; ++id) {
    if (reads[id].status.ok()) {
      EXPECT_TRUE(SameAsFake(id, reads[id])) << id;
      continue;
    }
    ++failed;
    EXPECT_TRUE(reads[id].status.IsIOError()) << reads[id].status.ToString();
    EXPECT_TRUE((*e)->Contains(id)) << "an I/O error is not corruption: the record stays";
    CacheRead again;
    again.id = id;
    (*e)->GetMany(&again, 1, &bufs);
    EXPECT_TRUE(SameAsFake(id, again)) << again.status.ToString();
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ((*e)->counters().corrupt_records.load(), 0u);
  bool batched = false;
  for (const auto& b : rec.batches()) {
    batched = batched || (!b.write && b.n > 1);
  }
  EXPECT_TRUE(batched) << "no read batch reached the POSIX Env: io_uring was not under test";
}

TEST(CacheDirect, FlippedByteIsDetectedThroughTheDirectPath) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  std::string dat;
  {
    CacheOptions o = DirectOpts(root.path());
    o.warm_read = WarmRead::kBuffered;
    auto e = CacheEntry::Open(o, FakeKey(10));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < 10; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
    dat = OnlyDat((*e)->dir());
  }
  ASSERT_FALSE(dat.empty());
  // Records are packed; the last byte of the file is sample 9's last pixel.
  {
    std::fstream f(dat, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  }
  auto e = CacheEntry::Open(DirectOpts(root.path()), FakeKey(10));
  ASSERT_TRUE(e.ok());
  std::vector<CacheRead> reads(10);
  for (uint64_t id = 0; id < 10; ++id) reads[id].id = id;
  ReadBuffers bufs;
  (*e)->GetMany(reads.data(), reads.size(), &bufs);
  for (uint64_t id = 0; id < 9; ++id) EXPECT_TRUE(SameAsFake(id, reads[id])) << id;
  ASSERT_TRUE(reads[9].status.IsCorruption()) << reads[9].status.ToString();
  EXPECT_NE(reads[9].status.message().find("checksum"), std::string::npos)
      << reads[9].status.message();
  EXPECT_GT((*e)->counters().direct_reads.load(), 0u);
  EXPECT_EQ((*e)->counters().corrupt_records.load(), 1u);
  EXPECT_FALSE((*e)->Contains(9));  // dropped: the loader re-prepares it
}

// The loader reads warm epochs through the direct path and serves the same
// pixels as through the page cache.
TEST(CacheDirect, LoaderServesTheSameBatchesDirect) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  const std::string data_uri = test::MakeTestDataset({.dir = JoinPath(root.path(), "data"),
                                                      .format = "tfrecord",
                                                      .count = 60,
                                                      .classes = 3,
                                                      .min_side = 60,
                                                      .max_side = 100});
  ASSERT_FALSE(data_uri.empty());
  auto epochs = [&](WarmRead mode, uint64_t* direct) {
    LoaderOptions o;
    o.source = data_uri;
    o.prepare.resize_short = 48;
    o.augment.enabled = true;
    o.augment.height = o.augment.width = 32;
    o.cache.root = JoinPath(root.path(), "cache");
    o.cache.warm_read = mode;
    o.batch_size = 16;
    o.workers = 2;
    o.shuffle = true;
    o.metrics = false;
    auto l = Loader::Open(o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    std::vector<uint8_t> all;
    for (int epoch = 0; epoch < 2; ++epoch) {
      (*l)->SetEpoch(epoch);
      Batch b;
      while (true) {
        auto more = (*l)->Next(&b);
        EXPECT_TRUE(more.ok()) << more.status().ToString();
        if (!more.ok() || !*more) break;
        const uint8_t* p = static_cast<const uint8_t*>(b.images());
        all.insert(all.end(), p, p + b.buffer->images.size());
      }
    }
    *direct = (*l)->stats().cache_hits;
    return all;
  };
  uint64_t hits_buffered = 0, hits_direct = 0;
  auto buffered = epochs(WarmRead::kBuffered, &hits_buffered);
  auto direct = epochs(WarmRead::kDirect, &hits_direct);
  EXPECT_EQ(hits_direct, 120u);  // the entry was filled by the first loader
  EXPECT_EQ(buffered, direct);
}

// warm_read=auto goes direct once the entry outgrows the memory available
// and back to buffered only with a quarter to spare, so an entry near the
// limit does not flip at every look; unknown memory reads buffered.
TEST(WarmReadAuto, GoesDirectPastTheMemoryAndBackOnlyWithAQuarterToSpare) {
  constexpr uint64_t kAvail = 1000;
  EXPECT_FALSE(AutoReadsDirect(1000, kAvail, false));
  EXPECT_TRUE(AutoReadsDirect(1001, kAvail, false));
  // Direct, as the available memory (or the entry) wobbles around the limit:
  for (uint64_t data : {1001u, 990u, 900u, 751u}) EXPECT_TRUE(AutoReadsDirect(data, kAvail, true));
  EXPECT_FALSE(AutoReadsDirect(750, kAvail, true));
  EXPECT_FALSE(AutoReadsDirect(1u << 30, 0, false)) << "memory unknown: buffered";
  EXPECT_FALSE(AutoReadsDirect(1u << 30, 0, true));
  // The fixed modes ignore memory.
  EXPECT_TRUE(UseDirect(Env::Default(), WarmRead::kDirect, 1, false));
  EXPECT_FALSE(UseDirect(Env::Default(), WarmRead::kBuffered, ~0ull, true));
  // This machine: an entry far larger than memory goes direct, a tiny one not.
  if (AvailableMemoryBytes(Env::Default()) > 0) {
    EXPECT_TRUE(UseDirect(Env::Default(), WarmRead::kAuto, ~0ull >> 1, false));
    EXPECT_FALSE(UseDirect(Env::Default(), WarmRead::kAuto, 4096, true));
  }
}

}  // namespace
}  // namespace ssdfeed
