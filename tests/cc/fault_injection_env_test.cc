#include "util/fault_injection_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "test_util.h"

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
  EXPECT_FALSE(batches[0].wrapped_files);
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
  EXPECT_FALSE(batches[0].wrapped_files);
}

}  // namespace
}  // namespace ssdfeed
