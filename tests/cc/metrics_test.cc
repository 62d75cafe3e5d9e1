// Stats files and the exporter: processes publish, the exporter sums; an
// ended (even killed) process's totals survive folding, exactly once; bad
// files are skipped with a warning; the HTTP endpoint and port conflicts.
#include "ssdfeed/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "metrics/stats_file.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

namespace fs = std::filesystem;

const std::string kEntry = "0123456789abcdef0123";  // a fingerprint; label 0123456789ab

CacheOptions Root(const test::TempDir& d) {
  CacheOptions c;
  c.root = d.Sub("root");
  fs::create_directories(c.root);
  return c;
}

// A child that publishes `hits` and then waits for the parent to close
// `go` (or to kill it). Returns its pid once its counters are in place.
pid_t SpawnPublisher(const CacheOptions& c, uint64_t hits, int* go_write) {
  int ready[2], go[2];
  EXPECT_EQ(::pipe(ready), 0);
  EXPECT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    ::close(go[1]);
    std::string warning;
    auto p = StatsPublisher::Create(Env::Default(), c, kEntry, &warning);
    p->Add(Ctr::kCacheHits, hits);
    p->Observe(Hist::kBatchWait, 0.003);
    char b = p->path().empty() ? 'm' : 'f';
    (void)!::write(ready[1], &b, 1);
    (void)!::read(go[0], &b, 1);
    ::_exit(0);  // no destructor: the file is left as a crash would leave it
  }
  ::close(ready[1]);
  ::close(go[0]);
  char b = 0;
  EXPECT_EQ(::read(ready[0], &b, 1), 1);
  EXPECT_EQ(b, 'f') << "the child fell back to in-memory stats";
  ::close(ready[0]);
  *go_write = go[1];
  return pid;
}

const RootStats::PerEntry* Find(const RootStats& s, const std::string& entry) {
  for (const auto& [e, v] : s.entries)
    if (e == entry) return &v;
  return nullptr;
}

int CountFiles(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

TEST(Metrics, TwoProcessesSumAndAKilledOnesTotalsSurviveFolding) {
  test::TempDir d;
  CacheOptions c = Root(d);
  int go1, go2;
  pid_t a = SpawnPublisher(c, 100, &go1);
  pid_t b = SpawnPublisher(c, 50, &go2);

  auto s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto* e = Find(*s, "0123456789ab");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->stats[Ctr::kCacheHits], 150u);
  EXPECT_EQ(e->stats.hist(Hist::kBatchWait).count, 2u);
  EXPECT_EQ(e->live_processes, 2);

  ASSERT_EQ(::kill(b, SIGKILL), 0);
  ASSERT_EQ(::waitpid(b, nullptr, 0), b);
  for (int round = 0; round < 2; ++round) {  // folding twice must not count twice
    s = CollectRootStats(nullptr, c);
    ASSERT_TRUE(s.ok());
    e = Find(*s, "0123456789ab");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->stats[Ctr::kCacheHits], 150u);
    EXPECT_EQ(e->live_processes, 1);
    EXPECT_EQ(CountFiles(c.root + "/stats", "p-"), 1);
    EXPECT_EQ(CountFiles(c.root + "/stats", "ended-"), 1);
  }

  ::close(go1);
  ASSERT_EQ(::waitpid(a, nullptr, 0), a);
  s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok());
  e = Find(*s, "0123456789ab");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->stats[Ctr::kCacheHits], 150u);
  EXPECT_EQ(e->stats.hist(Hist::kBatchWait).count, 2u);
  EXPECT_EQ(e->live_processes, 0);
  EXPECT_EQ(CountFiles(c.root + "/stats", "p-"), 0) << "ended files are folded away";
  ::close(go2);
}

TEST(Metrics, AFoldInterruptedBeforeDeletingCountsOnce) {
  test::TempDir d;
  CacheOptions c = Root(d);
  int go;
  pid_t a = SpawnPublisher(c, 7, &go);
  ::close(go);
  ASSERT_EQ(::waitpid(a, nullptr, 0), a);
  std::string file;
  for (const auto& f : fs::directory_iterator(c.root + "/stats"))
    if (f.path().filename().string().rfind("p-", 0) == 0) file = f.path();
  ASSERT_FALSE(file.empty());
  fs::copy_file(file, d.Sub("saved"));
  ASSERT_TRUE(CollectRootStats(nullptr, c).ok());  // folds and deletes
  ASSERT_FALSE(fs::exists(file));
  fs::copy_file(d.Sub("saved"), file);  // as if the fold crashed before the unlink
  auto s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Find(*s, "0123456789ab")->stats[Ctr::kCacheHits], 7u);
  EXPECT_FALSE(fs::exists(file));
}

TEST(Metrics, TruncatedAndForeignFilesAreSkippedWithAWarning) {
  test::TempDir d;
  CacheOptions c = Root(d);
  std::string warning;
  auto live = StatsPublisher::Create(Env::Default(), c, kEntry, &warning);
  ASSERT_TRUE(warning.empty()) << warning;
  live->Add(Ctr::kCacheMisses, 3);
  std::string dir = c.root + "/stats";
  {
    std::ofstream t(dir + "/p-truncated.stats", std::ios::binary);
    t.write("SSDFSTAT", 8);
  }
  {
    std::string block(4096, '\0');
    std::memcpy(block.data(), "SSDFSTAT", 8);
    uint32_t version = 99, size = 4096;
    std::memcpy(block.data() + 8, &version, 4);
    std::memcpy(block.data() + 12, &size, 4);
    std::ofstream f(dir + "/p-future.stats", std::ios::binary);
    f.write(block.data(), block.size());
  }
  {
    std::ofstream f(dir + "/p-garbage.stats", std::ios::binary);
    f << std::string(5000, 'x');
  }
  auto s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Find(*s, "0123456789ab")->stats[Ctr::kCacheMisses], 3u);
  std::string all;
  for (const auto& w : s->warnings) all += w + "\n";
  EXPECT_NE(all.find("p-truncated.stats: truncated"), std::string::npos) << all;
  EXPECT_NE(all.find("p-future.stats: stats file version 99"), std::string::npos) << all;
  EXPECT_NE(all.find("p-garbage.stats: not a stats file"), std::string::npos) << all;
  auto text = RenderRootMetrics(c);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("ssdfeed_stats_files_skipped"), std::string::npos);
}

std::string HttpGet(int port, const std::string& path);

// A dead process's stats file (nobody holds its lock) with `hits` cache hits.
void WriteDeadFile(const CacheOptions& c, const std::string& name, uint64_t hits) {
  std::vector<uint64_t> block(metrics::kBlockBytes / 8, 0);
  auto* b = reinterpret_cast<uint8_t*>(block.data());
  metrics::InitBlock(b, std::string(16, '\x11'), "0123456789ab", 0);
  StatsSnapshot s;
  s.counters[static_cast<size_t>(Ctr::kCacheHits)] = hits;
  metrics::WriteBlock(s, b);
  fs::create_directories(c.root + "/stats");
  std::ofstream(c.root + "/stats/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b), metrics::kBlockBytes);
}

std::string AllWarnings(const RootStats& s) {
  std::string all;
  for (const auto& w : s.warnings) all += w + "\n";
  return all;
}

// Any user of a group-shared root can write its stats directory: a sparse
// 1 TiB ended file costs the exporter one block's read and a warning.
TEST(Metrics, ASparseHugeEndedFileIsSkippedNotRead) {
  test::TempDir d;
  CacheOptions c = Root(d);
  WriteDeadFile(c, "p-dead.stats", 5);
  std::string huge = c.root + "/stats/ended-0123456789ab.stats";
  std::ofstream(huge).close();
  ASSERT_EQ(::truncate(huge.c_str(), off_t{1} << 40), 0) << std::strerror(errno);
  auto s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE(AllWarnings(*s).find("ended-0123456789ab.stats: not a stats file"), std::string::npos)
      << AllWarnings(*s);
  // The dead file could not be folded into the bad totals: still counted as it is.
  ASSERT_NE(Find(*s, "0123456789ab"), nullptr);
  EXPECT_EQ(Find(*s, "0123456789ab")->stats[Ctr::kCacheHits], 5u);
  // What serve-metrics answers a scrape with.
  auto server = MetricsServer::ServeRoot(c, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string body = HttpGet((*server)->port(), "/metrics");
  EXPECT_NE(body.find("ssdfeed_cache_hits_total{entry=\"0123456789ab\"} 5"), std::string::npos)
      << body;
  EXPECT_NE(body.find("ssdfeed_stats_files_skipped"), std::string::npos) << body;
}

// An ended file whose count of folded ids promises more than the file
// holds, or more than a fold ever writes, is refused before any allocation.
TEST(Metrics, AnEndedFileWithAHugeIdCountIsSkipped) {
  test::TempDir d;
  CacheOptions c = Root(d);
  std::vector<uint64_t> block(metrics::kBlockBytes / 8, 0);
  auto* b = reinterpret_cast<uint8_t*>(block.data());
  metrics::InitBlock(b, std::string(16, '\0'), "0123456789ab", 0);
  std::string data(reinterpret_cast<const char*>(b), metrics::kBlockBytes);
  uint32_t n = 0xffffffffu;
  data.append(reinterpret_cast<const char*>(&n), 4);
  fs::create_directories(c.root + "/stats");
  std::ofstream(c.root + "/stats/ended-0123456789ab.stats", std::ios::binary) << data;
  auto s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE(AllWarnings(*s).find("4294967295 folded ids (at most 65536)"), std::string::npos)
      << AllWarnings(*s);
}

// The entry label comes from ended-<entry>.stats: a name that is not the 12
// hex digits of an entry id never becomes a label value.
TEST(Metrics, AnEndedFileNameThatIsNotAnEntryIdNeverBecomesALabel) {
  test::TempDir d;
  CacheOptions c = Root(d);
  WriteDeadFile(c, "p-dead.stats", 9);
  auto s = CollectRootStats(nullptr, c);  // folds it into ended-0123456789ab.stats
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::string dir = c.root + "/stats/";
  for (std::string bad : {"x\"} 1\nevil{a=\"", "0123456789abcdef", "0123456789AB", ""})
    fs::copy_file(dir + "ended-0123456789ab.stats", dir + "ended-" + bad + ".stats");
  s = CollectRootStats(nullptr, c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->entries.size(), 1u);
  EXPECT_EQ(s->entries[0].first, "0123456789ab");
  EXPECT_EQ(s->entries[0].second.stats[Ctr::kCacheHits], 9u);
  EXPECT_NE(AllWarnings(*s).find("ended-0123456789abcdef.stats: not ended-<12 hex digits>.stats"),
            std::string::npos)
      << AllWarnings(*s);
  auto text = RenderRootMetrics(c);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->find("evil"), std::string::npos) << *text;
  EXPECT_EQ(text->find("0123456789abcdef"), std::string::npos) << *text;
}

// Another user truncates their stats file right after the exporter opened
// it: reading it must give a warning, never SIGBUS (as reading a mapping of
// it would).
class TruncateAfterOpenEnv final : public EnvWrapper {
 public:
  TruncateAfterOpenEnv() : EnvWrapper(Env::Default()) {}
  Result<std::unique_ptr<MappedFile>> NewMappedFile(const std::string& path, uint64_t size,
                                                    const MappedFileOptions& o) override {
    auto f = target()->NewMappedFile(path, size, o);
    if (!o.writable && path.find("/p-") != std::string::npos) {
      EXPECT_TRUE(target()->TruncateFile(path, 0).ok());
    }
    return f;
  }
};

TEST(Metrics, AStatsFileTruncatedWhileReadIsSkippedWithoutSigbus) {
  test::TempDir d;
  CacheOptions c = Root(d);
  WriteDeadFile(c, "p-dead.stats", 3);
  EXPECT_EXIT(
      {
        TruncateAfterOpenEnv env;
        auto s = CollectRootStats(&env, c);
        bool warned =
            s.ok() && AllWarnings(*s).find("p-dead.stats: not a stats file") != std::string::npos;
        std::exit(warned ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A member of a group-shared root could cut another member's stats file
// (it was 0660) while that job had it mapped: the job's next counter update
// died of SIGBUS. Another process truncates the file between two updates;
// the writer goes on counting (into the zeros the guard maps in), and the
// file is its owner's alone to write (0640).
TEST(Metrics, AStatsFileCutWhileMappedDoesNotKillItsWriter) {
  test::TempDir d;
  CacheOptions c = Root(d);
  c.group_shared = true;
  EXPECT_EXIT(
      {
        std::string warning;
        auto p = StatsPublisher::Create(Env::Default(), c, kEntry, &warning);
        if (p->path().empty()) std::exit(2);
        p->Add(Ctr::kCacheHits, 5);
        pid_t pid = ::fork();
        if (pid == 0) ::_exit(::truncate(p->path().c_str(), 0) == 0 ? 0 : 1);
        int ws = 0;
        if (::waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) std::exit(3);
        p->Add(Ctr::kCacheHits, 2);  // SIGBUS here, unguarded
        p->Observe(Hist::kBatchWait, 0.003);
        if (p->Snapshot()[Ctr::kCacheHits] != 2) std::exit(4);  // counting on, from zeros
        struct stat st;
        if (::stat(p->path().c_str(), &st) != 0 || (st.st_mode & 07777) != 0640) std::exit(5);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fd);
  return out;
}

TEST(Metrics, ServesTheRootOverHttpAndAPortInUseIsAnError) {
  test::TempDir d;
  CacheOptions c = Root(d);
  std::string warning;
  auto p = StatsPublisher::Create(Env::Default(), c, kEntry, &warning);
  p->Add(Ctr::kCacheHits, 42);
  auto server = MetricsServer::ServeRoot(c, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  std::string body = HttpGet(port, "/metrics");
  EXPECT_NE(body.find("ssdfeed_cache_hits_total{entry=\"0123456789ab\"} 42"), std::string::npos)
      << body;
  EXPECT_NE(body.find("ssdfeed_filesystem_free_bytes"), std::string::npos);
  EXPECT_NE(body.find("ssdfeed_batch_wait_seconds_bucket"), std::string::npos);
  auto again = MetricsServer::ServeRoot(c, "127.0.0.1:" + std::to_string(port));
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << again.status().message();
}

TEST(Metrics, LoaderStatsAndTheStatsFileAgree) {
  test::TempDir d;
  const std::string data_uri = test::MakeTestDataset(
      {.dir = d.Sub("data"), .format = "tfrecord", .count = 30, .min_side = 40, .max_side = 60});
  ASSERT_FALSE(data_uri.empty());
  LoaderOptions o;
  o.source = data_uri;
  o.prepare.resize_short = 32;
  o.augment.enabled = true;
  o.augment.height = o.augment.width = 24;
  o.batch_size = 7;
  o.workers = 2;
  o.cache.root = d.Sub("root");
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (int epoch = 0; epoch < 2; ++epoch) {
    (*l)->SetEpoch(epoch);
    Batch b;
    while (true) {
      auto more = (*l)->Next(&b);
      ASSERT_TRUE(more.ok());
      if (!*more) break;
    }
  }
  LoaderStats s = (*l)->stats();
  EXPECT_EQ(s.cache_hits, 30u);
  EXPECT_EQ(s.cache_misses, 30u);
  EXPECT_EQ(s.samples, 60u);
  EXPECT_EQ(s.cache_hits + s.cache_misses, s.samples) << "each sample counts once";
  EXPECT_FALSE(s.stats_file.empty());
  auto root = CollectRootStats(nullptr, o.cache);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->entries.size(), 1u);
  const StatsSnapshot& f = root->entries[0].second.stats;
  EXPECT_EQ(f[Ctr::kCacheHits], s.cache_hits);
  EXPECT_EQ(f[Ctr::kSamplesServed], s.samples);
  EXPECT_EQ(f[Ctr::kOriginBytes], s.origin_bytes);
  EXPECT_EQ(f[Ctr::kCachePuts], 30u);
  EXPECT_GE(f.hist(Hist::kReadCache).count, 60u);  // every sample looked up at least once
  EXPECT_EQ(f.hist(Hist::kBatchWait).count, s.batches);
}

}  // namespace
}  // namespace ssdfeed

namespace ssdfeed {
namespace {

TEST(Metrics, AdmissionStoppedByCapacityIsExportedWithItsReason) {
  test::TempDir d;
  const std::string data_uri = test::MakeTestDataset(
      {.dir = d.Sub("data"), .format = "tfrecord", .count = 40, .min_side = 40, .max_side = 60});
  ASSERT_FALSE(data_uri.empty());
  LoaderOptions o;
  o.source = data_uri;
  o.prepare.resize_h = o.prepare.resize_w = 32;
  o.batch_size = 8;
  o.workers = 1;
  o.cache.root = d.Sub("root");
  o.cache.capacity_bytes = 64 << 10;  // room for the entry and a few samples
  o.cache.reserve_chunk = 4096;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Batch b;
  while (true) {
    auto more = (*l)->Next(&b);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
  }
  LoaderStats s = (*l)->stats();
  ASSERT_FALSE(s.cache_admitting);
  EXPECT_GT(s.cache_capacity_denied, 0u);
  auto text = RenderRootMetrics(o.cache);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("ssdfeed_admission_stopped{entry=\"" + EntryShortId(Basename(s.cache_dir)) +
                       "\",reason=\"capacity\"} 1"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace ssdfeed
