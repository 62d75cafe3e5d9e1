#include "ssdfeed/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

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

// A shared mapped file (claims, the ledger) appears under its name with
// its mode already set, whatever the umask: another user opening it at that
// moment must not find the umask's 0640. Openers racing to create it all map
// the same file, and no temporary is left behind.
TEST(PosixEnv, SharedMappedFileAppearsWithItsModeAndOneInode) {
  test::TempDir dir;
  Env* env = Env::Default();
  std::string path = dir.Sub("claims");
  mode_t old = ::umask(077);
  {
    // A watcher stats the name as fast as it can while it is made and
    // removed 300 times: it must never see the file with other bits.
    std::atomic<bool> done{false};
    std::atomic<int> narrow{0};
    std::thread watcher([&] {
      struct stat w;
      while (!done)
        if (::stat(path.c_str(), &w) == 0 && (w.st_mode & 07777) != 0660) narrow++;
    });
    MappedFileOptions o;
    o.mode = 0660;
    for (int i = 0; i < 300; ++i) {
      ASSERT_TRUE(env->NewMappedFile(path, 4096, o).ok());
      ::unlink(path.c_str());
    }
    done = true;
    watcher.join();
    EXPECT_EQ(narrow.load(), 0) << "seen with the umask's bits";
  }
  constexpr int kOpeners = 8;
  std::vector<std::future<Result<std::unique_ptr<MappedFile>>>> opens;
  for (int i = 0; i < kOpeners; ++i)
    opens.push_back(std::async(std::launch::async, [&] {
      MappedFileOptions o;
      o.mode = 0660;
      return env->NewMappedFile(path, 4096, o);
    }));
  std::vector<std::unique_ptr<MappedFile>> maps;
  for (auto& f : opens) {
    auto m = f.get();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    maps.push_back(std::move(*m));
  }
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  maps[0]->data()[100] = 42;  // one file: every mapping sees the write
  for (const auto& m : maps) EXPECT_EQ(m->data()[100], 42);
  std::vector<std::string> names;
  ASSERT_TRUE(env->GetChildren(dir.path(), &names).ok());
  EXPECT_EQ(names, std::vector<std::string>{"claims"});
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

TEST(PosixEnv, FollowsSymlinkOnlyWhenAsked) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("target"), "data").ok());
  ASSERT_EQ(::symlink(dir.Sub("target").c_str(), dir.Sub("link").c_str()), 0);
  RandomAccessFileOptions follow;
  follow.no_follow = false;
  std::string s;
  Status st = env->ReadFileToString(dir.Sub("link"), &s, follow);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(s, "data");
  EXPECT_FALSE(env->ReadFileToString(dir.Sub("link"), &s).ok());  // the default refuses it
}

// Runs open in a thread: on a blocking open the test fails (and unblocks it
// by opening the FIFO's other end) instead of hanging the suite.
template <typename Open>
Status OpenWithoutBlocking(const std::string& fifo, int other_end_flags, Open open) {
  auto f = std::async(std::launch::async, open);
  if (f.wait_for(std::chrono::seconds(20)) == std::future_status::ready) return f.get();
  int fd = ::open(fifo.c_str(), other_end_flags | O_NONBLOCK);
  f.wait();
  if (fd >= 0) ::close(fd);
  return Status::Aborted("open of a FIFO blocked");
}

TEST(PosixEnv, FifoIsRefusedAtOnceNamingThePath) {
  test::TempDir dir;
  Env* env = Env::Default();
  std::string fifo = dir.Sub("seg-1-0.dat");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Status r =
      OpenWithoutBlocking(fifo, O_WRONLY, [&] { return env->NewRandomAccessFile(fifo).status(); });
  EXPECT_EQ(r.ToString().rfind("InvalidArgument", 0), 0u) << r.ToString();
  EXPECT_NE(r.message().find(fifo + ": not a regular file"), std::string::npos) << r.ToString();
  RandomAccessFileOptions follow;
  follow.no_follow = false;
  r = OpenWithoutBlocking(fifo, O_WRONLY,
                          [&] { return env->NewRandomAccessFile(fifo, follow).status(); });
  EXPECT_EQ(r.ToString().rfind("InvalidArgument", 0), 0u) << r.ToString();
  Status w =
      OpenWithoutBlocking(fifo, O_RDONLY, [&] { return env->NewWritableFile(fifo).status(); });
  EXPECT_EQ(w.ToString().rfind("InvalidArgument", 0), 0u) << w.ToString();
  EXPECT_NE(w.message().find(fifo + ": not a regular file"), std::string::npos) << w.ToString();
}

TEST(PosixEnv, DirectoryIsNotARegularFile) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDir(dir.Sub("d")).ok());
  auto r = env->NewRandomAccessFile(dir.Sub("d"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos)
      << r.status().ToString();
}

TEST(PosixEnv, TruncatingOpenEmptiesTheFile) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("f"), "old contents").ok());
  WritableFileOptions o;
  o.truncate = true;
  auto w = env->NewWritableFile(dir.Sub("f"), o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->Size(), 0u);
  ASSERT_TRUE((*w)->Append("new", 3).ok());
  ASSERT_TRUE((*w)->Close().ok());
  std::string s;
  ASSERT_TRUE(env->ReadFileToString(dir.Sub("f"), &s).ok());
  EXPECT_EQ(s, "new");
}

TEST(PosixEnv, StatGivesInodeAndCtime) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("f"), "x").ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.Sub("f").c_str(), &st), 0);
  auto fi = env->Stat(dir.Sub("f"));
  ASSERT_TRUE(fi.ok());
  EXPECT_EQ(fi->inode, static_cast<uint64_t>(st.st_ino));
  EXPECT_EQ(fi->ctime_ns, st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
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

TEST(PosixEnv, TruncateNeverFollowsALink) {
  test::TempDir dir;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(dir.Sub("outside"), "precious").ok());
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), dir.Sub("link").c_str()), 0);
  EXPECT_FALSE(env->TruncateFile(dir.Sub("link"), 0).ok());
  std::string s;
  ASSERT_TRUE(env->ReadFileToString(dir.Sub("outside"), &s).ok());
  EXPECT_EQ(s, "precious");
}

}  // namespace ssdfeed
