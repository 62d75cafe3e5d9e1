#include "ssdfeed/env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

namespace ssdfeed {
namespace {

TEST(PosixEnv, WriteReadRoundTrip) {
  test::TempDir dir;
  Env* env = Env::Default();
  std::string path = dir.Sub("a.bin");
  auto w = env->NewWritableFile(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Append("hello ", 6).ok());
  ASSERT_TRUE((*w)->Append("world", 5).ok());
  ASSERT_TRUE((*w)->Sync().ok());
  EXPECT_EQ((*w)->Size(), 11u);
  ASSERT_TRUE((*w)->Close().ok());

  auto r = env->NewRandomAccessFile(path);
  ASSERT_TRUE(r.ok());
  char buf[16];
  size_t got = 0;
  ASSERT_TRUE((*r)->Read(6, 16, buf, &got).ok());
  EXPECT_EQ(std::string(buf, got), "world");
  EXPECT_EQ(*(*r)->Size(), 11u);
}

TEST(PosixEnv, NewFilesHaveNoWorldAccess) {
  test::TempDir dir;
  Env* env = Env::Default();
  std::string path = dir.Sub("secret");
  ASSERT_TRUE(env->WriteFileAtomic(path, "x").ok());
  auto info = env->Stat(path);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->mode & 0007u, 0u);
  EXPECT_EQ(info->size, 1u);
}

TEST(PosixEnv, DoesNotFollowSymlinkOnOpen) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("target"), "data").ok());
  ASSERT_EQ(::symlink(dir.Sub("target").c_str(), dir.Sub("link").c_str()), 0);
  auto r = env->NewRandomAccessFile(dir.Sub("link"));
  EXPECT_FALSE(r.ok());
  auto w = env->NewWritableFile(dir.Sub("link"));
  EXPECT_FALSE(w.ok());
  std::string s;
  ASSERT_TRUE(env->ReadFileToString(dir.Sub("target"), &s).ok());
  EXPECT_EQ(s, "data");  // untouched
}

TEST(PosixEnv, MissingFileIsNotFoundAndNamesThePath) {
  Env* env = Env::Default();
  auto r = env->NewRandomAccessFile("/nonexistent/ssdfeed/x");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_NE(r.status().message().find("/nonexistent/ssdfeed/x"), std::string::npos);
}

TEST(PosixEnv, ExclusiveLockExcludes) {
  test::TempDir dir;
  Env* env = Env::Default();
  auto a = env->LockFile(dir.Sub("lock"), true, false);
  ASSERT_TRUE(a.ok());
  auto b = env->LockFile(dir.Sub("lock"), true, false);
  EXPECT_FALSE(b.ok());
  auto c = env->LockFile(dir.Sub("lock"), false, false);
  EXPECT_FALSE(c.ok());
  a->reset();
  auto d = env->LockFile(dir.Sub("lock"), true, false);
  EXPECT_TRUE(d.ok());
}

TEST(PosixEnv, CreateDirsAndChildren) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(CreateDirs(env, dir.Sub("a/b/c")).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("a/b/c/f"), "1").ok());
  std::vector<std::string> names;
  ASSERT_TRUE(env->GetChildren(dir.Sub("a/b/c"), &names).ok());
  ASSERT_EQ(names.size(), 1u);  // no temp file left behind
  EXPECT_EQ(names[0], "f");
}

}  // namespace
}  // namespace ssdfeed
