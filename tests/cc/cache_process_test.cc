// Real processes on one cache: `ssdfeed warm` killed with SIGKILL at random
// moments, and four warmers on one entry at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "cache/capacity.h"
#include "cache_test_util.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "test_util.h"

extern char** environ;

namespace ssdfeed {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& out_file) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Fixture {
  test::TempDir dir;
  std::string uri;
  PrepareSpec spec;
  Fixture() {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .format = "tfrecord",
                                 .count = 240,
                                 .shard_size = 60,
                                 .min_side = 64,
                                 .max_side = 120});
    spec.resize_short = 48;
  }
  std::vector<std::string> WarmArgs(const std::string& cache) const {
    std::vector<std::string> a = {test::CliPath(), "warm",    "--source",       uri,
                                  "--cache",       cache,     "--resize-short", "48",
                                  "--json",        "--quiet", "--workers",      "2"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::vector<std::string> extra;  // more warm flags
  // Every sample of the entry under cache, as served.
  std::vector<std::string> Served(const std::string& cache, uint64_t* present) const {
    auto src = OpenSource(uri);
    CacheOptions co;
    co.root = cache;
    auto e = CacheEntry::Open(co, MakeEntryKey(**src, {}, spec));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    std::vector<std::string> out((*src)->size());
    std::string buf;
    *present = 0;
    for (uint64_t id = 0; id < out.size(); ++id) {
      CachedSample s;
      if (!(*e)->Get(id, &buf, &s).ok()) continue;
      ++*present;
      out[id] = std::to_string(s.height) + "x" + std::to_string(s.width) + ":" +
                std::to_string(s.label) + ":" +
                std::string(reinterpret_cast<const char*>(s.pixels), s.bytes());
    }
    return out;
  }
};

int Rounds() {
  const char* r = std::getenv("SSDFEED_KILL_ROUNDS");
  return r ? std::atoi(r) : 12;
}

void KilledAtRandomMomentsThenCompletedEqualsCleanFill(const std::vector<std::string>& extra) {
  Fixture f;
  f.extra = extra;
  ASSERT_EQ(Wait(Spawn(f.WarmArgs(f.dir.Sub("clean")), f.dir.Sub("clean.json"))), 0);
  uint64_t clean_present = 0;
  auto clean = f.Served(f.dir.Sub("clean"), &clean_present);
  ASSERT_EQ(clean_present, 240u);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Wait(Spawn(f.WarmArgs(f.dir.Sub("timing")), f.dir.Sub("t.json"))), 0);
  double full_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::mt19937 rng(7);
  std::string cache = f.dir.Sub("killed");
  uint64_t last_present = 0;
  for (int round = 0; round < Rounds(); ++round) {
    pid_t pid = Spawn(f.WarmArgs(cache), f.dir.Sub("k.json"));
    int delay_ms = static_cast<int>(rng() % static_cast<unsigned>(std::max(2.0, full_ms / 3)));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    Wait(pid);
    // After every kill: opens, serves only intact samples, never loses progress.
    uint64_t present = 0;
    auto served = f.Served(cache, &present);
    for (uint64_t id = 0; id < served.size(); ++id)
      if (!served[id].empty()) {
        ASSERT_TRUE(served[id] == clean[id]) << "round " << round << " id " << id;
      }
    EXPECT_GE(present, last_present) << "round " << round;
    last_present = present;
  }
  ASSERT_EQ(Wait(Spawn(f.WarmArgs(cache), f.dir.Sub("final.json"))), 0);
  uint64_t present = 0;
  auto final_samples = f.Served(cache, &present);
  EXPECT_EQ(present, 240u);
  for (uint64_t id = 0; id < 240; ++id) ASSERT_TRUE(final_samples[id] == clean[id]) << id;
  std::string out;
  ASSERT_EQ(test::RunCommand(test::CliPath() + " cache verify --cache " + cache, &out), 0) << out;
}

TEST(CacheProcess, WarmKilledAtRandomMomentsThenCompletedEqualsCleanFill) {
  KilledAtRandomMomentsThenCompletedEqualsCleanFill({"--fill-write", "buffered"});
}

// The same with records staged for the O_DIRECT writer thread when killed.
TEST(CacheProcess, DirectWarmKilledAtRandomMomentsThenCompletedEqualsCleanFill) {
  KilledAtRandomMomentsThenCompletedEqualsCleanFill({"--fill-write", "direct"});
}

TEST(CacheProcess, FourWarmersOnOneEntryPrepareEachSampleAboutOnce) {
  Fixture f;
  std::string cache = f.dir.Sub("shared");
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i)
    pids.push_back(Spawn(f.WarmArgs(cache), f.dir.Sub("w" + std::to_string(i) + ".json")));
  uint64_t prepared = 0;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(Wait(pids[i]), 0);
    std::string text;
    ASSERT_TRUE(
        Env::Default()->ReadFileToString(f.dir.Sub("w" + std::to_string(i) + ".json"), &text).ok());
    auto j = nlohmann::json::parse(text);
    prepared += j["prepared"].get<uint64_t>();
  }
  uint64_t present = 0;
  auto served = f.Served(cache, &present);
  EXPECT_EQ(present, 240u);
  // Against the origin, prepared here independently.
  auto src = OpenSource(f.uri);
  Decoder dec;
  for (uint64_t id = 0; id < 240; ++id) {
    EncodedSample e;
    ASSERT_TRUE((*src)->Read(id, &e).ok());
    Image img;
    ASSERT_TRUE(dec.DecodeAndPrepare(e.bytes, f.spec, &img).ok());
    std::string want = std::to_string(img.height) + "x" + std::to_string(img.width) + ":" +
                       std::to_string(e.label) + ":" +
                       std::string(reinterpret_cast<const char*>(img.pixels.data()), img.bytes());
    ASSERT_TRUE(served[id] == want) << id;
  }
  std::printf("four warmers prepared %llu samples for 240 (%.2fx)\n",
              static_cast<unsigned long long>(prepared), prepared / 240.0);
  EXPECT_GE(prepared, 240u);
  EXPECT_LE(prepared, 240u * 13 / 10) << "duplicated preparation is not bounded";
}

// Bytes of every regular file under dir (what is really on disk). A file is
// counted once by inode: an entry renamed into trash/ while we walk would
// otherwise be seen twice.
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::set<ino_t> seen;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (seen.insert(st.st_ino).second) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

// Samples a root's bytes on disk every millisecond until stopped.
class DiskSampler {
 public:
  explicit DiskSampler(std::string root) : root_(std::move(root)) {
    t_ = std::thread([this] {
      while (!stop_) {
        max_ = std::max(max_.load(), DiskBytes(root_));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  uint64_t Stop() {
    stop_ = true;
    t_.join();
    return max_;
  }

 private:
  std::string root_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_{0};
  std::thread t_;
};

// Two containers on one node: one writer in its own PID namespace, one on
// the host, one capacity. Liveness by pid would drop the other's reservation.
TEST(CacheNode, WritersInTwoPidNamespacesStayUnderOneCapacity) {
  if (auto why = test::CannotUnsharePid(); !why.empty()) GTEST_SKIP() << why;
  Fixture f;
  std::string cache = f.dir.Sub("node");
  const uint64_t capacity = 3u << 19;  // less than either entry needs: they compete
  auto args = [&](const char* resize) {
    auto a = f.WarmArgs(cache);
    a[7] = resize;  // --resize-short value: two specs, two entries
    a.push_back("--capacity");
    a.push_back(std::to_string(capacity));
    return a;
  };
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  for (int round = 0; round < 3; ++round) {
    std::string out;
    test::RunCommand(test::CliPath() + " cache gc --max-bytes 1 --cache " + cache, &out);
    DiskSampler sampler(cache);
    auto in_ns = args("48");
    in_ns.insert(in_ns.begin(), {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"});
    pid_t a = Spawn(in_ns, f.dir.Sub("a.json"));
    pid_t b = Spawn(args("40"), f.dir.Sub("b.json"));
    Wait(a);
    Wait(b);
    uint64_t peak = sampler.Stop();
    std::printf("round %d: peak %llu bytes on disk, capacity %llu\n", round,
                static_cast<unsigned long long>(peak), static_cast<unsigned long long>(capacity));
    EXPECT_LE(peak, capacity) << "round " << round;
    EXPECT_GT(peak, capacity / 2) << "the capacity was barely used";
  }
}

// A stopped process is alive: its claims hold, and the others wait only a
// bounded time before preparing those samples themselves.
TEST(CacheNode, StoppedClaimantDelaysOthersOnlyBoundedly) {
  Fixture f;
  std::string cache = f.dir.Sub("c");
  auto src = OpenSource(f.uri);
  EntryKey key = MakeEntryKey(**src, {}, f.spec);
  CacheOptions co;
  co.root = cache;
  co.claim_wait_seconds = 0.3;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto e = CacheEntry::Open(co, key);
    for (uint64_t id = 0; id < 240; ++id) (*e)->TryClaim(id);
    (void)!::write(ready[1], "r", 1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  char c;
  ssize_t got = ::read(ready[0], &c, 1);
  ::close(ready[0]);  // or every later child inherits them: after ~23
  ::close(ready[1]);  // --gtest_repeat runs the ulimit -n 64 tests failed
  ASSERT_EQ(got, 1);
  auto e = CacheEntry::Open(co, key);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE((*e)->TryClaim(5)) << "a stopped process's claim was taken over";
  SampleFetcher fetcher(src->get(), f.spec, e->get(), co.claim_wait_seconds);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = 0; id < 4; ++id) {
    FetchScratch s;
    CachedSample out;
    ASSERT_TRUE(fetcher.Fetch(id, &s, &out).ok());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 4 * 0.3 + 3.0) << "waited on a stopped claimant without bound";
  ::kill(child, SIGKILL);
  Wait(child);
  EXPECT_TRUE((*e)->TryClaim(5)) << "a dead claimant still blocks";
}

// A process stopped while it holds capacity.lock (SIGSTOP, docker pause, a
// frozen cgroup) costs another job's fill one bounded wait, not a hang: the
// put is refused and counted, the sample comes from the origin, and for a
// while no put waits again. Closing the entry, `cache rm` and the used-bytes
// sample do not hang either.
TEST(CacheNode, StoppedCapacityLockHolderCostsOthersABoundedWait) {
  Fixture f;
  auto src = OpenSource(f.uri);
  EntryKey key = MakeEntryKey(**src, {}, f.spec);
  CacheOptions co;
  co.root = f.dir.Sub("c");
  auto e = CacheEntry::Open(co, key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto other = CacheEntry::Open(co, test::FakeKey(10, "other"));
  ASSERT_TRUE(other.ok());
  std::string other_name = Basename((*other)->dir());
  other->reset();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::open(JoinPath(co.root, "capacity.lock").c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    (void)!::write(ready[1], "r", 1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  char c;
  ssize_t got = ::read(ready[0], &c, 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(got, 1);
  SampleFetcher fetcher(src->get(), f.spec, e->get(), co.claim_wait_seconds);
  uint64_t timeouts_before = CapacityLockTimeouts();
  for (uint64_t id = 0; id < 3; ++id) {
    FetchScratch s;
    CachedSample out;
    ASSERT_TRUE(fetcher.Fetch(id, &s, &out).ok()) << id;  // from the origin
    EXPECT_FALSE((*e)->Contains(id)) << id;
  }
  // The first put waited and gave up; the next ones did not try.
  EXPECT_EQ(CapacityLockTimeouts() - timeouts_before, 1u);
  EXPECT_EQ((*e)->counters().puts.load(), 0u);
  EXPECT_TRUE((*e)->admitting()) << "a stopped lock holder is not a full cache for good";
  EXPECT_TRUE(RootBytes(co).status().IsBusy()) << "sampled without the lock";
  EXPECT_TRUE(RemoveEntry(co, other_name).ok());
  e->reset();  // its exit does not wait for the lock either
  ::kill(child, SIGKILL);
  Wait(child);
  // With the holder gone, a fill stores again.
  auto again = CacheEntry::Open(co, key);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  SampleFetcher refill(src->get(), f.spec, again->get(), co.claim_wait_seconds);
  FetchScratch s;
  CachedSample out;
  ASSERT_TRUE(refill.Fetch(0, &s, &out).ok());
  EXPECT_TRUE((*again)->Contains(0));
}

// Fills fake entries of about `bytes` each until the root holds n of them.
void FillFakeEntries(const std::string& cache, int n, int samples) {
  CacheOptions o;
  o.root = cache;
  for (int i = 0; i < n; ++i) {
    auto e = CacheEntry::Open(o, test::FakeKey(samples, "fake" + std::to_string(i)));
    for (int id = 0; id < samples; ++id)
      if (!(*e)->Contains(id)) {
        ASSERT_TRUE(test::PutFake(e->get(), id).ok());
      }
  }
}

// After any kill: every entry still visible opens and verifies clean, every
// byte on disk is charged (entries + trash), and an open empties the trash.
void ExpectConsistentAfterKill(const std::string& cache, int round) {
  CacheOptions o;
  o.root = cache;
  uint64_t on_disk = DiskBytes(JoinPath(cache, "entries")) + DiskBytes(JoinPath(cache, "trash"));
  EXPECT_GE(*RootBytes(o), on_disk) << "round " << round << ": bytes nobody counts";
  auto list = ListEntries(o);
  ASSERT_TRUE(list.ok());
  for (const auto& info : *list) {
    EXPECT_EQ(info.state.rfind("broken", 0), std::string::npos) << info.name << " " << info.state;
  }
  std::string out;
  EXPECT_EQ(test::RunCommand(test::CliPath() + " cache verify --cache " + cache, &out), 0) << out;
  auto e = CacheEntry::Open(o, test::FakeKey(5, "probe"));
  ASSERT_TRUE(e.ok());
  std::vector<std::string> trash;
  (void)Env::Default()->GetChildren(JoinPath(cache, "trash"), &trash);
  EXPECT_TRUE(trash.empty()) << "round " << round;
}

TEST(CacheNode, KillDuringGcLeavesEverythingCountedAndConsistent) {
  Fixture f;
  std::string cache = f.dir.Sub("c");
  std::mt19937 rng(11);
  for (int round = 0; round < 6; ++round) {
    FillFakeEntries(cache, 4, 400);
    pid_t gc = Spawn({test::CliPath(), "cache", "gc", "--max-bytes", "1", "--cache", cache},
                     f.dir.Sub("gc.out"));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ::kill(gc, SIGKILL);
    Wait(gc);
    ExpectConsistentAfterKill(cache, round);
  }
}

TEST(CacheNode, KillDuringEvictionNeverExceedsCapacity) {
  Fixture f;
  std::mt19937 rng(5);
  const uint64_t capacity = 3u << 20;
  int evicted = 0;
  for (int round = 0; round < 6; ++round) {
    std::string cache = f.dir.Sub("c") + std::to_string(round);
    FillFakeEntries(cache, 2, 3000);  // about 1.3 MB each: the warm must evict one
    DiskSampler sampler(cache);
    auto a = f.WarmArgs(cache);
    a.push_back("--capacity");
    a.push_back(std::to_string(capacity));
    pid_t w = Spawn(a, f.dir.Sub("w.json"));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
    ::kill(w, SIGKILL);
    Wait(w);
    EXPECT_LE(sampler.Stop(), capacity) << "round " << round;
    std::vector<std::string> left;
    (void)Env::Default()->GetChildren(JoinPath(cache, "entries"), &left);
    evicted += left.size() < 3;
    ExpectConsistentAfterKill(cache, round);
  }
  EXPECT_GT(evicted, 0) << "no round was killed during an eviction";
}

// A thousand short jobs on one real entry, then a full epoch with 64 file
// descriptors: files per entry stay bounded, so descriptors do too.
TEST(CacheNode, FullEpochWith64DescriptorsAfterAThousandShortJobs) {
  Fixture f;
  test::TempDir fast(test::FastTmp());
  std::string cache = fast.Sub("c");
  auto src = OpenSource(f.uri);
  EntryKey key = MakeEntryKey(**src, {}, f.spec);
  std::vector<Image> prepared(240);
  std::vector<int64_t> labels(240);
  Decoder dec;
  for (uint64_t id = 0; id < 240; ++id) {
    EncodedSample e;
    ASSERT_TRUE((*src)->Read(id, &e).ok());
    ASSERT_TRUE(dec.DecodeAndPrepare(e.bytes, f.spec, &prepared[id]).ok());
    labels[id] = e.label;
  }
  CacheOptions co;
  co.root = cache;
  std::string dir;
  for (int job = 0; job < 1000; ++job) {
    auto e = CacheEntry::Open(co, key);
    ASSERT_TRUE(e.ok()) << job << ": " << e.status().ToString();
    const Image& img = prepared[job % 240];
    if (!(*e)->Contains(job % 240)) {
      ASSERT_TRUE((*e)->Put(job % 240, labels[job % 240], img.pixels.data(), img.height, img.width,
                            img.channels)
                      .ok());
    }
    dir = (*e)->dir();
  }
  std::vector<std::string> names;
  ASSERT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  std::printf("after 1000 jobs: %zu files in the entry\n", names.size());
  EXPECT_LE(names.size(), 24u);
  std::string out;
  int rc = test::RunCommand(
      "ulimit -n 64 && " + test::CliPath() + " bench loader --source '" + f.uri + "' --cache " +
          cache + " --resize-short 48 --crop 0 --batch 1 --epochs 1 --workers 2 --json",
      &out);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["epochs"][0]["hit_rate"].get<double>(), 1.0) << out;
}

// Two users of one group fill and read one root, nothing world-accessible,
// whatever their umask.
TEST(CacheNode, TwoUsersOfOneGroupShareARoot) {
  for (int uid : {4201, 4202})
    if (auto why = test::CannotActAs(uid, 4243); !why.empty()) GTEST_SKIP() << why;
  Fixture f;
  ASSERT_EQ(::chmod(f.dir.path().c_str(), 0711), 0);
  ASSERT_EQ(test::RunCommand("chmod -R a+rX " + f.dir.Sub("data")), 0);
  std::string cache = f.dir.Sub("shared");
  const gid_t group = 4243;
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  ASSERT_EQ(::chown(cache.c_str(), 0, group), 0);
  ASSERT_EQ(::chmod(cache.c_str(), 02770), 0);
  auto as_user = [&](int uid, const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"/usr/bin/setpriv",
                                  "--reuid=" + std::to_string(uid),
                                  "--regid=" + std::to_string(uid),
                                  "--groups=" + std::to_string(group),
                                  "/bin/sh",
                                  "-c",
                                  "umask 022; exec \"$@\"",
                                  "sh"};
    a.insert(a.end(), cmd.begin(), cmd.end());
    return a;
  };
  auto warm = f.WarmArgs(cache);
  warm.push_back("--group-shared");
  pid_t a = Spawn(as_user(4201, warm), f.dir.Sub("a.json"));
  pid_t b = Spawn(as_user(4202, warm), f.dir.Sub("b.json"));
  ASSERT_EQ(Wait(a), 0);
  ASSERT_EQ(Wait(b), 0);
  uint64_t prepared = 0;
  for (const char* n : {"a.json", "b.json"}) {
    std::string text;
    ASSERT_TRUE(Env::Default()->ReadFileToString(f.dir.Sub(n), &text).ok());
    prepared += nlohmann::json::parse(text)["prepared"].get<uint64_t>();
  }
  EXPECT_LE(prepared, 240u * 13 / 10) << "the second user could not fill the first's entry";
  pid_t v =
      Spawn(as_user(4202, {test::CliPath(), "cache", "verify", "--group-shared", "--cache", cache}),
            f.dir.Sub("v.out"));
  EXPECT_EQ(Wait(v), 0);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(cache, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    ASSERT_EQ(::lstat(it->path().c_str(), &st), 0);
    std::string p = it->path().string();
    EXPECT_EQ(st.st_mode & 07, 0u) << p << " is world-accessible";
    EXPECT_EQ(st.st_gid, group) << p;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 02070, 02070u) << p;
    } else if (p.find("/stats/p-") != std::string::npos) {
      // A job's own stats file, mapped shared: the group reads, only its
      // owner writes (nobody else can cut it under the mapping).
      EXPECT_EQ(st.st_mode & 07777, 0640u) << p;
    } else {
      EXPECT_EQ(st.st_mode & 060, 060u) << p;
    }
  }
}

// A child that locks `path` exclusively and stops itself (SIGSTOP): a
// Ctrl-Z'd `cache compact` or evictor. Returns once the child is stopped
// (waitpid WUNTRACED), so nothing below runs before the lock is held; -1
// if it could not lock.
pid_t StoppedLockHolder(const std::string& path) {
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int st = 0;
  if (::waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)) return -1;
  return child;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What one epoch of a cached loader over the fixture's dataset served.
struct EpochRun {
  size_t samples = 0;
  LoaderStats stats;
};
EpochRun RunEpoch(const Fixture& f, const CacheOptions& co) {
  LoaderOptions o;
  o.source = f.uri;
  o.prepare = f.spec;
  o.cache = co;
  o.augment.enabled = true;  // one batch shape out of the dataset's many
  o.augment.height = o.augment.width = 32;
  o.batch_size = 16;
  o.workers = 2;
  EpochRun run;
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return run;
  Batch b;
  while (true) {
    auto r = (*l)->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    run.samples += b.size;
  }
  run.stats = (*l)->stats();
  return run;
}

// A process stopped while it holds an entry's use.lock exclusively (a
// compaction's swap, an evictor, an in-use probe, Ctrl-Z'd) blocked every
// open of that entry for good: a blocking flock. Now an open and an export
// wait at most kUseLockWaitSeconds and say Busy, the loader trains from the
// origin, and ls, rm, gc and compact answer at once; once the holder goes
// on, everything proceeds.
TEST(CacheNode, StoppedExclusiveUseLockHolderCostsOthersABoundedWait) {
  Fixture f;
  auto src = OpenSource(f.uri);
  EntryKey key = MakeEntryKey(**src, {}, f.spec);
  CacheOptions co;
  co.root = f.dir.Sub("c");
  std::string dir;
  {
    auto e = CacheEntry::Open(co, key);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    SampleFetcher fetcher(src->get(), f.spec, e->get(), co.claim_wait_seconds);
    for (uint64_t id = 0; id < 240; ++id) {
      FetchScratch s;
      CachedSample out;
      ASSERT_TRUE(fetcher.Fetch(id, &s, &out).ok()) << id;
    }
    ASSERT_TRUE((*e)->Sync().ok());
    dir = (*e)->dir();
  }
  std::string name = Basename(dir);
  pid_t holder = StoppedLockHolder(JoinPath(dir, "use.lock"));
  ASSERT_GT(holder, 0);
  const double bound = kUseLockWaitSeconds + 3.0;  // the wait, and a loaded machine's slack

  auto t0 = std::chrono::steady_clock::now();
  auto opened = CacheEntry::Open(co, key);
  EXPECT_TRUE(opened.status().IsBusy()) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("use.lock"), std::string::npos);
  EXPECT_LT(SecondsSince(t0), bound) << "open";

  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  TransferReport tr;
  t0 = std::chrono::steady_clock::now();
  Status exported = ExportEntry(co, name, devnull, ExportOptions(), &tr);
  EXPECT_TRUE(exported.IsBusy()) << exported.ToString();
  EXPECT_LT(SecondsSince(t0), bound) << "export";

  t0 = std::chrono::steady_clock::now();
  auto list = ListEntries(co);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_TRUE((*list)[0].in_use);
  EXPECT_TRUE(RemoveEntry(co, name).IsBusy());
  auto gc = CollectGarbage(co, 1, 0);
  ASSERT_TRUE(gc.ok());
  EXPECT_TRUE(gc->empty());
  CompactReport cr;
  EXPECT_TRUE(CompactEntry(co, name, &cr).IsBusy());
  // Each would take the whole bound if it waited (a loaded CI machine may be slow, never 2 s).
  EXPECT_LT(SecondsSince(t0), kUseLockWaitSeconds) << "the probes waited";

  t0 = std::chrono::steady_clock::now();
  EpochRun origin = RunEpoch(f, co);
  EXPECT_EQ(origin.samples, 240u);
  EXPECT_EQ(origin.stats.cache_open_errors, 1u);
  EXPECT_EQ(origin.stats.cache_hits, 0u);
  EXPECT_LT(SecondsSince(t0), bound + 30.0) << "the loader's epoch";

  ::kill(holder, SIGCONT);
  EXPECT_EQ(Wait(holder), 0);
  auto again = CacheEntry::Open(co, key);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->samples_present(), 240u);
  again->reset();
  EXPECT_TRUE(ExportEntry(co, name, devnull, ExportOptions(), &tr).ok());
  ::close(devnull);
  EpochRun cached = RunEpoch(f, co);
  EXPECT_EQ(cached.samples, 240u);
  EXPECT_EQ(cached.stats.cache_open_errors, 0u);
  EXPECT_EQ(cached.stats.cache_hits, 240u);
}

// An Env that stops its process (SIGSTOP) when it is about to create its
// `nth` file (counting from 1) whose name starts with one of `prefixes`:
// a compaction frozen halfway through its copy.
class StopAtNthCreateEnv : public EnvWrapper {
 public:
  StopAtNthCreateEnv(Env* target, int nth) : EnvWrapper(target), left_(nth) {}
  Result<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& o = {}) override {
    std::string base = Basename(path);
    if ((base.rfind("seg-", 0) == 0 || base.rfind("compact-", 0) == 0) && --left_ == 0)
      ::raise(SIGSTOP);
    return EnvWrapper::NewWritableFile(path, o);
  }

 private:
  int left_;
};

// A compaction of FakeKey(40)'s entry under `co`, in a child that stops
// itself partway through its copy (the second copy segment: every record
// is a segment of its own). Returns the stopped child; it exits 0 if the
// compaction succeeded, 2 if it was Busy, 1 otherwise.
pid_t StoppedCompaction(const CacheOptions& co, const std::string& name) {
  pid_t child = ::fork();
  if (child == 0) {
    StopAtNthCreateEnv env(Env::Default(), 3);
    CacheOptions o = co;
    o.env = &env;
    o.segment_bytes = 1;
    CompactReport r;
    Status s = CompactEntry(o, name, &r);
    ::_exit(s.ok() ? (r.records == 30 ? 0 : 3) : s.IsBusy() ? 2 : 1);
  }
  int st = 0;
  if (::waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)) return -1;
  return child;
}

// 30 of FakeKey(40)'s samples, written by three writers at once (three
// segments). Returns the entry's directory.
std::string ThreeWritersEntry(const CacheOptions& co) {
  std::vector<std::unique_ptr<CacheEntry>> writers;
  for (uint64_t w = 0; w < 3; ++w) {
    auto e = CacheEntry::Open(co, test::FakeKey(40));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return "";
    for (uint64_t id = w * 10; id < w * 10 + 10; ++id)
      EXPECT_TRUE(test::PutFake(e->get(), id).ok());
    writers.push_back(std::move(*e));
  }
  return writers[0]->dir();
}

bool NoCopyLeft(const std::string& dir) {
  std::vector<std::string> names;
  (void)Env::Default()->GetChildren(dir, &names);
  return std::none_of(names.begin(), names.end(),
                      [](const std::string& n) { return n.rfind("compact-", 0) == 0; });
}

// `cache compact` held the entry exclusively for its whole copy, so a
// Ctrl-Z'd compaction hung every job of the dataset. It now copies under
// the shared lock (a job opens and reads the entry meanwhile, seeing only
// the old segments) and takes the lock exclusively only to swap.
TEST(CacheNode, StoppedCompactionLetsJobsOpenAndRead) {
  test::TempDir root;
  CacheOptions co;
  co.root = root.Sub("c");
  std::string dir = ThreeWritersEntry(co);
  ASSERT_FALSE(dir.empty());
  pid_t compactor = StoppedCompaction(co, Basename(dir));
  ASSERT_GT(compactor, 0);
  {
    auto t0 = std::chrono::steady_clock::now();
    auto e = CacheEntry::Open(co, test::FakeKey(40));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_LT(SecondsSince(t0), kUseLockWaitSeconds) << "waited for the compaction";
    EXPECT_EQ((*e)->samples_present(), 30u);
    for (uint64_t id = 0; id < 30; ++id) EXPECT_TRUE(test::ReadsBackFake(e->get(), id)) << id;
  }
  ::kill(compactor, SIGCONT);
  EXPECT_EQ(Wait(compactor), 0) << "the compaction did not complete";
  EXPECT_TRUE(NoCopyLeft(dir));
  auto e = CacheEntry::Open(co, test::FakeKey(40));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->samples_present(), 30u);
  for (uint64_t id = 0; id < 30; ++id) EXPECT_TRUE(test::ReadsBackFake(e->get(), id)) << id;
}

// A job that writes to the entry while the copy is made, or still has it
// open at the swap: the compaction gives up (Busy), removes its copy, and
// nothing the job wrote or reads is lost.
TEST(CacheNode, CompactionGivesUpWhenTheEntryChangesOrStaysInUse) {
  test::TempDir root;
  CacheOptions co;
  co.root = root.Sub("c");
  std::string dir = ThreeWritersEntry(co);
  ASSERT_FALSE(dir.empty());
  pid_t compactor = StoppedCompaction(co, Basename(dir));
  ASSERT_GT(compactor, 0);
  {
    auto e = CacheEntry::Open(co, test::FakeKey(40));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(test::PutFake(e->get(), 35).ok());
  }
  ::kill(compactor, SIGCONT);
  EXPECT_EQ(Wait(compactor), 2) << "a compaction dropped a record written meanwhile";
  EXPECT_TRUE(NoCopyLeft(dir));
  {
    auto e = CacheEntry::Open(co, test::FakeKey(40));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->samples_present(), 31u);
    EXPECT_TRUE(test::ReadsBackFake(e->get(), 35));
  }

  compactor = StoppedCompaction(co, Basename(dir));
  ASSERT_GT(compactor, 0);
  auto reader = CacheEntry::Open(co, test::FakeKey(40));
  ASSERT_TRUE(reader.ok());
  ::kill(compactor, SIGCONT);
  EXPECT_EQ(Wait(compactor), 2) << "swapped under a reader";
  EXPECT_TRUE(NoCopyLeft(dir));
  for (uint64_t id = 0; id < 30; ++id) EXPECT_TRUE(test::ReadsBackFake(reader->get(), id)) << id;
  EXPECT_TRUE(test::ReadsBackFake(reader->get(), 35));
}

}  // namespace
}  // namespace ssdfeed
