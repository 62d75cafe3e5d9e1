#include "util/fault_injection_env.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ssdfeed
