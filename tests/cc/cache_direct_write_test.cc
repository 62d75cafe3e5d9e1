// Writes through the O_DIRECT path (fill_write = direct): records staged in
// 1 MiB chunks by Put and written by the entry's writer thread read back
// intact across chunk boundaries, carried blocks, segment roll-over and the
// takeover of a segment whose end is not aligned; a failed write or a power
// cut leaves only intact records indexed, and the fill resumes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;
using test::FakeKey;

CacheOptions Opts(const std::string& root, FillWrite mode = FillWrite::kDirect,
                  Env* env = nullptr) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.fill_write = mode;
  o.env = env;
  return o;
}

// Sample id's pixels: sizes from 1 KiB to about 400 KiB, so records end at
// every kind of place in a 1 MiB chunk and some span two.
std::vector<uint8_t> Pixels(uint64_t id, int* h, int* w) {
  *h = id % 4 == 0 ? 300 : 9 + static_cast<int>(id % 17);
  *w = id % 4 == 0 ? 400 + static_cast<int>(id % 13) : 40 + static_cast<int>(id % 11);
  std::vector<uint8_t> p(static_cast<size_t>(*h) * *w * 3);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(id * 131 + i * 7 + (i >> 9));
  return p;
}

Status Put(CacheEntry* e, uint64_t id) {
  int h, w;
  auto p = Pixels(id, &h, &w);
  return e->Put(id, static_cast<int64_t>(id % 5), p.data(), h, w, 3);
}

bool ReadsBack(CacheEntry* e, uint64_t id, Status* st = nullptr) {
  int h, w;
  auto p = Pixels(id, &h, &w);
  return test::ReadsBackAs(e, id, p, h, w, static_cast<int64_t>(id % 5), st);
}

// Every record e holds of ids [0, n) reads back intact.
void PresentReadBack(CacheEntry* e, uint64_t n, const std::string& what = "") {
  for (uint64_t id = 0; id < n; ++id) {
    if (!e->Contains(id)) continue;
    Status st;
    EXPECT_TRUE(ReadsBack(e, id, &st)) << what << " id " << id << " " << st.ToString();
  }
}

// Puts every sample of [0, n) e lacks (a fill resumed), then all read back.
void FillRestAndReadBack(CacheEntry* e, uint64_t n, const std::string& what = "") {
  for (uint64_t id = 0; id < n; ++id) {
    if (e->Contains(id)) continue;
    ASSERT_TRUE(Put(e, id).ok()) << what << " id " << id;
  }
  for (uint64_t id = 0; id < n; ++id) ASSERT_TRUE(ReadsBack(e, id)) << what << " id " << id;
}

uint64_t RecordBytes(uint64_t id) {
  int h, w;
  return Pixels(id, &h, &w).size() + 40;
}

// Sum of the entry's .dat sizes (there is one entry under root).
uint64_t DatBytes(const std::string& root, int* files = nullptr) {
  Env* env = Env::Default();
  std::vector<std::string> entries, names;
  EXPECT_TRUE(env->GetChildren(JoinPath(root, "entries"), &entries).ok());
  EXPECT_EQ(entries.size(), 1u);
  std::string dir = JoinPath(JoinPath(root, "entries"), entries[0]);
  EXPECT_TRUE(env->GetChildren(dir, &names).ok());
  uint64_t total = 0;
  int n = 0;
  for (const auto& name : names)
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".dat") == 0) {
      total += env->Stat(JoinPath(dir, name))->size;
      ++n;
    }
  if (files) *files = n;
  return total;
}

constexpr uint64_t kN = 48;

TEST(CacheDirectWrite, RecordsAcrossChunksReadBackBeforeAndAfterReopen) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  uint64_t bytes = 0;
  {
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < kN; ++id) {
      ASSERT_TRUE(Put(e->get(), id).ok()) << id;
      bytes += RecordBytes(id);
      // Our own Put is readable at once (a staged record is written first).
      if (id % 5 == 0) {
        ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
      }
    }
    EXPECT_EQ((*e)->samples_present(), kN);
    for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
    EXPECT_EQ((*e)->counters().direct_writes.load(), kN);
    EXPECT_EQ((*e)->counters().puts.load(), kN);
  }
  // Closed: the padding of the last block is cut, the data is the records.
  EXPECT_EQ(DatBytes(root.path()), bytes);
  auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kBuffered), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), kN);
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

// Another process's view: an entry opened separately sees a record once the
// writer has written and indexed it, never a staged one half there.
TEST(CacheDirectWrite, AnotherReaderSeesOnlyWrittenRecords) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  auto w = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  auto r = CacheEntry::Open(Opts(root.path(), FillWrite::kBuffered), FakeKey(kN));
  ASSERT_TRUE(w.ok() && r.ok());
  for (uint64_t id = 0; id < kN; ++id) {
    ASSERT_TRUE(Put(w->get(), id).ok());
    ASSERT_TRUE((*r)->Refresh().ok());
    PresentReadBack(r->get(), id + 1);
  }
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->samples_present(), kN);
}

// With nobody flushing, a staged record is written and indexed within the
// idle seal's 20 ms (plus the write): another process finds it, and its
// claim is released, without waiting for the chunk to fill.
TEST(CacheDirectWrite, AStagedRecordIsWrittenWithoutAFlush) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  auto w = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  auto r = CacheEntry::Open(Opts(root.path(), FillWrite::kBuffered), FakeKey(kN));
  ASSERT_TRUE(w.ok() && r.ok());
  for (uint64_t id : {1, 2, 3}) {  // small records: the chunk never fills
    ASSERT_TRUE((*w)->TryClaim(id));
    ASSERT_TRUE(Put(w->get(), id).ok());
    (*w)->ReleaseClaim(id);  // held on until the record is indexed
    bool seen = false;
    for (int i = 0; i < 500 && !seen; ++i) {  // up to 5 s on a loaded machine
      ASSERT_TRUE((*r)->Refresh().ok());
      seen = (*r)->Contains(id);
      if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(seen) << id;
    EXPECT_TRUE(ReadsBack(r->get(), id)) << id;
    EXPECT_TRUE((*r)->TryClaim(id)) << id << ": its claim is still held";
    (*r)->ReleaseClaim(id);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the writer idles again
  }
}

TEST(CacheDirectWrite, SegmentsRollOverWithoutPadding) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  CacheOptions o = Opts(root.path());
  o.segment_bytes = 3 << 20;  // several segments of a few records
  uint64_t bytes = 0;
  {
    auto e = CacheEntry::Open(o, FakeKey(kN));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < kN; ++id) {
      ASSERT_TRUE(Put(e->get(), id).ok()) << id;
      bytes += RecordBytes(id);
    }
  }
  int files = 0;
  EXPECT_EQ(DatBytes(root.path(), &files), bytes);
  EXPECT_GE(files, 2);
  auto e = CacheEntry::Open(o, FakeKey(kN));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

// A segment left by a buffered fill ends mid-block; a direct writer takes it
// over, writes that block again with its own records after the old ones.
TEST(CacheDirectWrite, TakesOverAnUnalignedSegmentEnd) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  {
    auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kBuffered), FakeKey(kN));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < kN / 2; ++id) ASSERT_TRUE(Put(e->get(), id).ok());
  }
  ASSERT_NE(DatBytes(root.path()) % 4096, 0u);
  {
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = kN / 2; id < kN; ++id) ASSERT_TRUE(Put(e->get(), id).ok());
    ASSERT_TRUE((*e)->Sync().ok());  // counted once written
    EXPECT_EQ((*e)->counters().direct_writes.load(), kN / 2);
  }
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), kN);
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

// ENOSPC on a direct write: admission stops, the error comes back from the
// next Put and from Sync, what was indexed stays intact, and a later fill
// (the disk freed) completes the entry.
TEST(CacheDirectWrite, FailedWriteStopsAdmissionKeepsIndexedRecords) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  FaultInjectionEnv env(Env::Default());
  {
    auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kDirect, &env), FakeKey(kN));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < 8; ++id) ASSERT_TRUE(Put(e->get(), id).ok());
    ASSERT_EQ((*e)->samples_present(), 8u);  // written and indexed
    env.FailAfter(Op::kWrite, 1, -1, Status::NoSpace("No space left on device"), ".dat");
    Status s;
    uint64_t id = 8;
    for (; id < kN && s.ok(); ++id) {
      s = Put(e->get(), id);
      (*e)->Contains(id);  // flushes: the writes happen now
    }
    EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
    EXPECT_FALSE((*e)->admitting());
    EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
    EXPECT_NE((*e)->warning().find("No space left"), std::string::npos);
    EXPECT_FALSE((*e)->Sync().ok());
    uint64_t present = (*e)->samples_present();
    EXPECT_GE(present, 8u);
    EXPECT_LT(present, kN);
    PresentReadBack(e->get(), kN);
  }
  env.ClearFaults();
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  EXPECT_GE((*e)->samples_present(), 8u);
  FillRestAndReadBack(e->get(), kN);
}

// ENOSPC inside a batch of direct writes in flight through io_uring. The
// writer takes a chunk only once every copy into it is done, and takes at
// most kWritesInFlight, so which writes share a batch depends on what is
// queued, and copied, when it looks: neither a timed delay nor holding the
// device until the putters had taken some ids fixed that (a putter
// preempted while copying into a sealed chunk cut the batch there, and
// writes 1, 2 and 3 after the fault was armed went down one by one, the
// 4th failing alone). So the test fixes the queue: the device is held on
// a write of one part-full chunk (record 1, sealed when idle), the putters
// then stage over five whole chunks behind it and return (every copy done),
// and only then is the device released. The writer's next batch is four
// whole chunks: writes 2 and 3 reach the POSIX Env together, the 4th
// fails inside that batch: admission stops, every indexed record reads
// back, nothing written before is lost, and a later fill completes the entry.
TEST(CacheDirectWrite, FailedWriteInsideABatchKeepsOnlyIntactRecords) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  constexpr uint64_t kMany = 400;
  // Ids [2, queued) are staged while the device is held: over 5 MiB of
  // records (five whole chunks behind the held one), under the 8 MiB of
  // chunks at which Add would wait for room.
  uint64_t queued = 2;
  for (uint64_t bytes = 0; bytes < (5ull << 20);) bytes += RecordBytes(queued++);
  size_t batches_before = 0;
  {
    auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kDirect, &env), FakeKey(kMany));
    ASSERT_TRUE(e.ok());
    // The first record starts the segment, with a write of its own from
    // the putter: done before the device stops.
    ASSERT_TRUE(Put(e->get(), 0).ok());
    ASSERT_TRUE((*e)->Sync().ok());
    batches_before = rec.batches().size();
    env.HoldWrites(".dat");
    // Record 1 alone: the writer seals its chunk when idle and writes it,
    // alone in its batch; the device holds that write (write 1 below).
    EXPECT_TRUE(Put(e->get(), 1).ok());
    bool held = env.WaitForHeldWrites(1, 60 * 1000 * 1000);
    EXPECT_TRUE(held) << "the writer did not write the idle chunk";
    env.FailAfter(Op::kWrite, 3, -1, Status::NoSpace("No space left on device"), ".dat");
    std::atomic<uint64_t> next{2};
    auto put_until = [&](uint64_t end) {
      std::vector<std::thread> ts;
      for (int t = 0; t < 6; ++t)
        ts.emplace_back([&] {
          for (uint64_t id; (id = next++) < end;)
            if (!Put(e->get(), id).ok()) break;
        });
      for (auto& t : ts) t.join();
    };
    // Returns when every copy into the queued chunks is done (Add never
    // waits for room here: the held write would keep it waiting).
    if (held) put_until(queued);
    env.ReleaseWrites();
    next = queued;
    put_until(kMany);
    EXPECT_FALSE((*e)->Sync().ok());
    EXPECT_FALSE((*e)->admitting());
    EXPECT_EQ((*e)->counters().write_errors.load(), 1u);
    uint64_t present = (*e)->samples_present();
    EXPECT_GT(present, 0u);
    EXPECT_LT(present, kMany);
    PresentReadBack(e->get(), kMany);
  }
  size_t batched = 0;
  std::string seen;
  auto batches = rec.batches();
  for (const auto& b : batches) {
    if (b.write && b.n > 1) ++batched;
    if (b.write) seen += " " + std::to_string(b.n);
  }
  EXPECT_GT(batched, 0u) << "no write batch reached the POSIX Env: io_uring was not under test"
                         << " (write batches:" << seen << ")";
  // After the held write (1), the batch of writes 2 to 5: the 4th and 5th
  // failed, 2 and 3 went down together.
  ASSERT_GE(batches.size(), batches_before + 2) << "write batches:" << seen;
  EXPECT_EQ(batches[batches_before].n, 1u) << "write batches:" << seen;
  EXPECT_EQ(batches[batches_before + 1].n, 2u) << "write batches:" << seen;
  env.ClearFaults();
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kMany));
  ASSERT_TRUE(e.ok());
  EXPECT_GT((*e)->samples_present(), 0u);
  FillRestAndReadBack(e->get(), kMany);
}

// A power cut after the k-th sync: unsynced bytes of both files are lost.
// The entry opens, indexes only intact records, keeps what was synced and
// fills to completion.
TEST(CacheDirectWrite, PowerCutAtEverySyncPointLeavesIntactRecords) {
  test::TempDir probe;
  if (!test::DirectIoWorks(probe.path())) GTEST_SKIP() << probe.path() << " refuses O_DIRECT";
  for (int k = 0; k <= 6; ++k) {
    test::TempDir root;
    FaultInjectionEnv env(Env::Default());
    CacheOptions o = Opts(root.path(), FillWrite::kDirect, &env);
    o.sync_bytes = 600 << 10;  // a sync every few records
    {
      auto e = CacheEntry::Open(o, FakeKey(kN));
      ASSERT_TRUE(e.ok());
      env.FailAfter(Op::kSync, k, -1, Status::IOError("power cut"));
      for (uint64_t id = 0; id < kN && Put(e->get(), id).ok(); ++id) {
      }
    }
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    env.ClearFaults();
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
    ASSERT_TRUE(e.ok()) << "k=" << k << ": " << e.status().ToString();
    PresentReadBack(e->get(), kN, "k=" + std::to_string(k));
    FillRestAndReadBack(e->get(), kN, "k=" + std::to_string(k));
  }
}

// Where O_DIRECT is refused, a direct fill writes buffered instead.
TEST(CacheDirectWrite, FallsBackToBufferedWhereDirectIsRefused) {
  test::TempDir root;
  FaultInjectionEnv env(Env::Default());
  env.RefuseDirectWrites(true);
  {
    auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kDirect, &env), FakeKey(kN));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(Put(e->get(), id).ok()) << id;
    EXPECT_EQ((*e)->counters().direct_writes.load(), 0u);
    EXPECT_EQ((*e)->counters().puts.load(), kN);  // buffered: counted at once
  }
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), kN);
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

// Some filesystems take O_DIRECT at open and refuse it at the first write:
// the probe write at open finds out, and the fill writes buffered.
TEST(CacheDirectWrite, FallsBackWhenTheFirstDirectWriteIsRefused) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  FaultInjectionEnv env(Env::Default());
  env.FailAfter(Op::kWrite, 0, 1, Status::NotSupported("O_DIRECT writes refused"), ".dat");
  {
    auto e = CacheEntry::Open(Opts(root.path(), FillWrite::kDirect, &env), FakeKey(kN));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(Put(e->get(), id).ok()) << id;
    EXPECT_EQ((*e)->counters().direct_writes.load(), 0u);
    EXPECT_EQ((*e)->counters().write_errors.load(), 0u);
    EXPECT_TRUE((*e)->admitting());
  }
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(kN));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), kN);
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

// Env::WriteMany on the POSIX Env: direct writes all in flight through
// io_uring land where they belong, each with its own status (a misaligned
// one fails alone), and the file's size follows the furthest.
TEST(CacheDirectWrite, WriteManyPutsEveryBlockInPlace) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  Env* env = Env::Default();
  WritableFileOptions o;
  o.direct = true;
  o.truncate = true;
  auto f = env->NewWritableFile(JoinPath(root.path(), "w"), o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr size_t kBlocks = 6, kLen = 3 * 4096;
  void* mem = nullptr;
  ASSERT_EQ(::posix_memalign(&mem, 4096, kBlocks * kLen + 4096), 0);
  char* buf = static_cast<char*>(mem);
  for (size_t i = 0; i < kBlocks * kLen; ++i) buf[i] = static_cast<char>('a' + (i / kLen) + i % 7);
  std::vector<WriteRequest> reqs;
  for (size_t k = 0; k < kBlocks; ++k)  // written in reverse file order
    reqs.push_back({f->get(), (kBlocks - 1 - k) * kLen, buf + (kBlocks - 1 - k) * kLen, kLen, {}});
  reqs.push_back({f->get(), 100, buf, 4096, {}});  // not aligned: refused
  env->WriteMany(reqs.data(), reqs.size());
  for (size_t k = 0; k < kBlocks; ++k)
    EXPECT_TRUE(reqs[k].status.ok()) << reqs[k].status.ToString();
  EXPECT_FALSE(reqs.back().status.ok());
  EXPECT_EQ((*f)->Size(), kBlocks * kLen);
  ASSERT_TRUE((*f)->Close().ok());
  std::string back;
  ASSERT_TRUE(env->ReadFileToString(JoinPath(root.path(), "w"), &back).ok());
  ASSERT_EQ(back.size(), kBlocks * kLen);
  EXPECT_EQ(std::memcmp(back.data(), buf, back.size()), 0);
  std::free(mem);
}

// Eight threads putting at once (their copies into the chunks overlap, the
// writer takes several chunks at a time) while another entry object reads
// what is indexed: every record is intact, then and after reopening.
TEST(CacheDirectWrite, ConcurrentPutsFromManyThreads) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  constexpr uint64_t kMany = 400;
  CacheOptions o = Opts(root.path());
  o.segment_bytes = 16 << 20;  // a few roll-overs too
  {
    auto e = CacheEntry::Open(o, FakeKey(kMany));
    auto r = CacheEntry::Open(Opts(root.path(), FillWrite::kBuffered), FakeKey(kMany));
    ASSERT_TRUE(e.ok() && r.ok());
    std::atomic<uint64_t> next{0};
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
      ts.emplace_back([&] {
        for (uint64_t id; (id = next++) < kMany;)
          if (!Put(e->get(), id).ok()) bad++;
      });
    std::atomic<bool> done{false};
    std::thread reader([&] {
      while (!done) {
        if (!(*r)->Refresh().ok()) bad++;
        for (uint64_t id = 0; id < kMany; id += 13)
          if ((*r)->Contains(id) && !ReadsBack(r->get(), id)) bad++;
      }
    });
    for (auto& t : ts) t.join();
    done = true;
    reader.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ((*e)->samples_present(), kMany);
    for (uint64_t id = 0; id < kMany; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
  }
  auto e = CacheEntry::Open(o, FakeKey(kMany));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), kMany);
  for (uint64_t id = 0; id < kMany; ++id) ASSERT_TRUE(ReadsBack(e->get(), id)) << id;
}

}  // namespace
}  // namespace ssdfeed
