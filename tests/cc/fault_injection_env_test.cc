#include "util/fault_injection_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "test_util.h"
#include "util/string_file.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;

TEST(FaultInjectionEnv, FailsChosenWrite) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  env.FailAfter(Op::kWrite, 2, 1, Status::NoSpace("disk full"));
  auto w = env.NewWritableFile(dir.Sub("f"));
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->Append("a", 1).ok());
  EXPECT_TRUE((*w)->Append("b", 1).ok());
  Status s = (*w)->Append("c", 1);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("f")), std::string::npos);
  EXPECT_TRUE((*w)->Append("d", 1).ok());  // count was 1
  EXPECT_EQ((*w)->Size(), 3u);
}

TEST(FaultInjectionEnv, FailsChosenReadOnlyOnMatchingPath) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  ASSERT_TRUE(env.WriteFileAtomic(dir.Sub("good"), "xyz").ok());
  ASSERT_TRUE(env.WriteFileAtomic(dir.Sub("bad"), "xyz").ok());
  env.FailAfter(Op::kRead, 0, -1, Status::IOError("EIO"), "bad");
  std::string s;
  EXPECT_TRUE(env.ReadFileToString(dir.Sub("good"), &s).ok());
  EXPECT_EQ(s, "xyz");
  Status st = env.ReadFileToString(dir.Sub("bad"), &s);
  EXPECT_TRUE(st.IsIOError());
  st = env.ReadFileToString(dir.Sub("bad"), &s);
  EXPECT_TRUE(st.IsIOError()) << "count -1 fails every later read";
}

TEST(FaultInjectionEnv, FailsChosenSync) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  env.FailAfter(Op::kSync, 0, 1, Status::IOError("EIO on fsync"));
  auto w = env.NewWritableFile(dir.Sub("f"));
  ASSERT_TRUE((*w)->Append("abc", 3).ok());
  EXPECT_FALSE((*w)->Sync().ok());
  EXPECT_TRUE((*w)->Sync().ok());
  EXPECT_EQ(env.Count(Op::kSync), 1);
}

TEST(FaultInjectionEnv, DropUnsyncedDataKeepsOnlySyncedPrefix) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  auto w = env.NewWritableFile(dir.Sub("log"));
  ASSERT_TRUE((*w)->Append("synced|", 7).ok());
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*w)->Append("lost", 4).ok());
  auto w2 = env.NewWritableFile(dir.Sub("never-synced"));
  ASSERT_TRUE((*w2)->Append("gone", 4).ok());
  ASSERT_TRUE(env.SyncDir(dir.path()).ok());  // both names are durable, not their data
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  std::string s;
  ASSERT_TRUE(Env::Default()->ReadFileToString(dir.Sub("log"), &s).ok());
  EXPECT_EQ(s, "synced|");
  ASSERT_TRUE(Env::Default()->ReadFileToString(dir.Sub("never-synced"), &s).ok());
  EXPECT_EQ(s, "");
}

TEST(FaultInjectionEnv, DropUnsyncedDataLosesNamesNotMadeDurable) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  ASSERT_TRUE(env.CreateDir(dir.Sub("sub"), 0700).ok());
  auto w = env.NewWritableFile(dir.Sub("sub/f"));
  ASSERT_TRUE((*w)->Append("x", 1).ok());
  ASSERT_TRUE((*w)->Sync().ok());  // data synced, but no directory sync anywhere
  auto k = env.NewWritableFile(dir.Sub("kept"));
  ASSERT_TRUE(env.SyncDir(dir.path()).ok());  // "kept" (and "sub") become durable names
  auto late = env.NewWritableFile(dir.Sub("late"));
  ASSERT_TRUE(env.RenameFile(dir.Sub("kept"), dir.Sub("renamed")).ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_TRUE(Env::Default()->FileExists(dir.Sub("sub")));
  EXPECT_FALSE(Env::Default()->FileExists(dir.Sub("sub/f"))) << "sub/ was never synced";
  EXPECT_FALSE(Env::Default()->FileExists(dir.Sub("late")));
  EXPECT_FALSE(Env::Default()->FileExists(dir.Sub("renamed"))) << "rename not made durable";
}

TEST(FaultInjectionEnv, FailsChosenNamespaceCalls) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  for (auto op : {Op::kLock, Op::kMkdir, Op::kRename, Op::kSyncDir, Op::kList, Op::kFsSpace}) {
    env.ClearFaults();
    env.FailAfter(op, 0, 1, Status::IOError("EIO"));
    Status s;
    uint64_t f, t;
    std::vector<std::string> names;
    switch (op) {
      case Op::kLock:
        s = env.LockFile(dir.Sub("l"), true, false).status();
        break;
      case Op::kMkdir:
        s = env.CreateDir(dir.Sub("d"), 0700);
        break;
      case Op::kRename:
        s = env.RenameFile(dir.Sub("a"), dir.Sub("b"));
        break;
      case Op::kSyncDir:
        s = env.SyncDir(dir.path());
        break;
      case Op::kList:
        s = env.GetChildren(dir.path(), &names);
        break;
      default:
        s = env.FsSpace(dir.path(), &f, &t);
        break;
    }
    EXPECT_TRUE(s.IsIOError()) << static_cast<int>(op) << ": " << s.ToString();
  }
}

TEST(FaultInjectionEnv, AtomicWriteSurvivesDrop) {
  test::TempDir dir;
  FaultInjectionEnv env(Env::Default());
  ASSERT_TRUE(env.WriteFileAtomic(dir.Sub("m"), "manifest").ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  std::string s;
  ASSERT_TRUE(env.ReadFileToString(dir.Sub("m"), &s).ok());
  EXPECT_EQ(s, "manifest");
}

// A batch of writes: the chosen one fails alone with the injected error,
// and the others reach the base Env as one batch of its own files (the
// POSIX Env's io_uring path for direct files), landing where they belong.
TEST(FaultInjectionEnv, WriteManyFailsTheChosenWriteAndHandsTheRestDownAsOneBatch) {
  test::TempDir dir;
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  WritableFileOptions o;
  o.direct = true;
  o.truncate = true;
  auto f = env.NewWritableFile(dir.Sub("w"), o);
  if (f.status().IsNotSupported()) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr size_t kBlocks = 4, kLen = 4096;
  void* mem = nullptr;
  ASSERT_EQ(::posix_memalign(&mem, kLen, kBlocks * kLen), 0);
  char* buf = static_cast<char*>(mem);
  for (size_t i = 0; i < kBlocks * kLen; ++i) buf[i] = static_cast<char>('a' + i / kLen);
  std::vector<WriteRequest> reqs;
  for (size_t k = 0; k < kBlocks; ++k)
    reqs.push_back({f->get(), k * kLen, buf + k * kLen, kLen, {}});
  env.FailAfter(Op::kWrite, 1, 1, Status::IOError("EIO"));
  env.WriteMany(reqs.data(), reqs.size());
  EXPECT_TRUE(reqs[1].status.IsIOError()) << reqs[1].status.ToString();
  EXPECT_NE(reqs[1].status.message().find(dir.Sub("w")), std::string::npos);
  for (size_t k : {0, 2, 3}) EXPECT_TRUE(reqs[k].status.ok()) << k << reqs[k].status.ToString();
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].write);
  EXPECT_EQ(batches[0].n, 3u);
  ASSERT_TRUE((*f)->Close().ok());
  std::string back;
  ASSERT_TRUE(Env::Default()->ReadFileToString(dir.Sub("w"), &back).ok());
  ASSERT_EQ(back.size(), kBlocks * kLen);
  for (size_t k = 0; k < kBlocks; ++k)  // the failed block was never written: a hole
    EXPECT_EQ(back[k * kLen], k == 1 ? '\0' : static_cast<char>('a' + k)) << k;
  std::free(mem);
}

// The same for a batch of reads: the chosen read fails alone, the rest are
// read by the base Env as one batch, and Wait copies their results back.
TEST(FaultInjectionEnv, StartReadsFailsTheChosenReadAndHandsTheRestDownAsOneBatch) {
  test::TempDir dir;
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  std::string data;
  for (int k = 0; k < 4; ++k) data += std::string(1000, static_cast<char>('a' + k));
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir.Sub("r"), data).ok());
  auto f = env.NewRandomAccessFile(dir.Sub("r"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::string> out(4, std::string(1000, '?'));
  std::vector<ReadRequest> reqs;
  for (size_t k = 0; k < 4; ++k) reqs.push_back({f->get(), k * 1000, 1000, out[k].data(), 0, {}});
  env.FailAfter(Op::kRead, 2, 1, Status::IOError("EIO"));
  env.StartReads(reqs.data(), reqs.size())->Wait();
  EXPECT_TRUE(reqs[2].status.IsIOError()) << reqs[2].status.ToString();
  EXPECT_EQ(reqs[2].got, 0u);
  EXPECT_EQ(out[2], std::string(1000, '?'));
  for (size_t k : {0, 1, 3}) {
    EXPECT_TRUE(reqs[k].status.ok()) << k << reqs[k].status.ToString();
    EXPECT_EQ(reqs[k].got, 1000u);
    EXPECT_EQ(out[k], std::string(1000, static_cast<char>('a' + k)));
  }
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_FALSE(batches[0].write);
  EXPECT_EQ(batches[0].n, 3u);
}

// The file's own MultiRead, called on a wrapped file: the wrapper fails the
// chosen read alone and hands the rest to the file it wraps as one batch
// (no Env in between; the requests need not name their file).
TEST(FaultInjectionEnv, MultiReadOnAWrappedFileHandsTheRestToItsBaseFile) {
  test::TempDir dir;
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  std::string data;
  for (int k = 0; k < 4; ++k) data += std::string(100, static_cast<char>('a' + k));
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir.Sub("r"), data).ok());
  auto f = env.NewRandomAccessFile(dir.Sub("r"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::string> out(4, std::string(100, '?'));
  std::vector<ReadRequest> reqs;
  for (size_t k = 0; k < 4; ++k) reqs.push_back({nullptr, k * 100, 100, out[k].data(), 0, {}});
  env.FailAfter(Op::kRead, 0, 1, Status::IOError("EIO"));
  (*f)->MultiRead(reqs.data(), reqs.size());
  EXPECT_TRUE(reqs[0].status.IsIOError()) << reqs[0].status.ToString();
  EXPECT_EQ(out[0], std::string(100, '?'));
  for (size_t k : {1, 2, 3}) {
    EXPECT_TRUE(reqs[k].status.ok()) << k << reqs[k].status.ToString();
    EXPECT_EQ(reqs[k].got, 100u);
    EXPECT_EQ(out[k], std::string(100, static_cast<char>('a' + k)));
  }
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].n, 3u);
}

// A file that implements only Read (as a user's file may) gets MultiRead
// from the base class: each request read in turn, short at the end.
TEST(FaultInjectionEnv, MultiReadDefaultsToReadingEachRequest) {
  auto f = NewStringFile("0123456789", "mem");
  std::string a(4, '?'), b(4, '?');
  ReadRequest reqs[2] = {{nullptr, 2, 4, a.data(), 0, {}}, {nullptr, 8, 4, b.data(), 0, {}}};
  f->MultiRead(reqs, 2);
  EXPECT_TRUE(reqs[0].status.ok());
  EXPECT_EQ(a, "2345");
  EXPECT_EQ(reqs[1].got, 2u);
  EXPECT_EQ(b.substr(0, 2), "89");
}

// Env::StartReads over two files interleaved: each file gets its own
// requests in one StartMultiRead, and every result goes back to the
// request it belongs to.
TEST(FaultInjectionEnv, StartReadsGivesEachFileItsOwnRequestsAsOneBatch) {
  test::TempDir dir;
  BatchRecordingEnv rec(Env::Default());
  ASSERT_TRUE(rec.WriteFileAtomic(dir.Sub("a"), std::string(300, 'a')).ok());
  ASSERT_TRUE(rec.WriteFileAtomic(dir.Sub("b"), std::string(200, 'b')).ok());
  auto fa = rec.NewRandomAccessFile(dir.Sub("a"));
  auto fb = rec.NewRandomAccessFile(dir.Sub("b"));
  ASSERT_TRUE(fa.ok() && fb.ok());
  std::vector<std::string> out(5, std::string(150, '?'));
  const RandomAccessFile* files[5] = {fa->get(), fb->get(), fa->get(), fb->get(), fa->get()};
  const uint64_t offsets[5] = {0, 0, 150, 150, 290};
  std::vector<ReadRequest> reqs;
  for (size_t k = 0; k < 5; ++k) reqs.push_back({files[k], offsets[k], 150, out[k].data(), 0, {}});
  rec.StartReads(reqs.data(), reqs.size())->Wait();
  const size_t want[5] = {150, 150, 150, 50, 10};
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_TRUE(reqs[k].status.ok()) << k << reqs[k].status.ToString();
    EXPECT_EQ(reqs[k].got, want[k]) << k;
    EXPECT_EQ(out[k].substr(0, want[k]), std::string(want[k], k % 2 ? 'b' : 'a')) << k;
  }
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].n, 3u);
  EXPECT_EQ(batches[1].n, 2u);
}

// Env::WriteMany over two wrapped files: each file's MultiWrite gets its
// own writes, and a fault on one file's write fails that request alone.
TEST(FaultInjectionEnv, WriteManyGivesEachFileItsOwnWrites) {
  test::TempDir dir;
  BatchRecordingEnv rec(Env::Default());
  FaultInjectionEnv env(&rec);
  WritableFileOptions o;
  o.direct = true;
  o.truncate = true;
  auto fa = env.NewWritableFile(dir.Sub("a"), o);
  if (fa.status().IsNotSupported()) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  auto fb = env.NewWritableFile(dir.Sub("b"), o);
  ASSERT_TRUE(fa.ok() && fb.ok());
  constexpr size_t kLen = 4096;
  void* mem = nullptr;
  ASSERT_EQ(::posix_memalign(&mem, kLen, 4 * kLen), 0);
  char* buf = static_cast<char*>(mem);
  for (size_t i = 0; i < 4 * kLen; ++i) buf[i] = static_cast<char>('a' + i / kLen);
  std::vector<WriteRequest> reqs;
  for (size_t k = 0; k < 4; ++k)
    reqs.push_back({k % 2 ? fb->get() : fa->get(), k / 2 * kLen, buf + k * kLen, kLen, {}});
  env.FailAfter(Op::kWrite, 0, 1, Status::IOError("EIO"), dir.Sub("b"));
  env.WriteMany(reqs.data(), reqs.size());
  EXPECT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_TRUE(reqs[1].status.IsIOError()) << reqs[1].status.ToString();
  EXPECT_TRUE(reqs[2].status.ok()) << reqs[2].status.ToString();
  EXPECT_TRUE(reqs[3].status.ok()) << reqs[3].status.ToString();
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(batches[0].write && batches[1].write);
  EXPECT_EQ(batches[0].n, 2u);
  EXPECT_EQ(batches[1].n, 1u);
  ASSERT_TRUE((*fa)->Close().ok());
  ASSERT_TRUE((*fb)->Close().ok());
  std::string a, b;
  ASSERT_TRUE(Env::Default()->ReadFileToString(dir.Sub("a"), &a).ok());
  ASSERT_TRUE(Env::Default()->ReadFileToString(dir.Sub("b"), &b).ok());
  EXPECT_EQ(a, std::string(kLen, 'a') + std::string(kLen, 'c'));
  EXPECT_EQ(b, std::string(kLen, '\0') + std::string(kLen, 'd'));
  std::free(mem);
}

}  // namespace
}  // namespace ssdfeed
