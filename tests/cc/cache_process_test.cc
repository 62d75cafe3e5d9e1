// Real processes on one cache: `ssdfeed warm` killed with SIGKILL at random
// moments, and four warmers on one entry at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "pipeline/entry_key.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
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
    MakeDatasetOptions o;
    o.dir = dir.Sub("data");
    o.format = "tfrecord";
    o.count = 240;
    o.shard_size = 60;
    o.min_side = 64;
    o.max_side = 120;
    MakeDatasetReport r;
    EXPECT_TRUE(MakeDataset(o, &r).ok());
    uri = r.uri;
    spec.resize_short = 48;
  }
  std::vector<std::string> WarmArgs(const std::string& cache) const {
    return {test::CliPath(),  "warm", "--source", uri,       "--cache",   cache,
            "--resize-short", "48",   "--json",   "--quiet", "--workers", "2"};
  }
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

TEST(CacheProcess, WarmKilledAtRandomMomentsThenCompletedEqualsCleanFill) {
  Fixture f;
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

}  // namespace
}  // namespace ssdfeed
