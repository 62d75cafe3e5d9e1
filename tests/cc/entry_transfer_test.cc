// Portable entries: export / import of one entry as a tar stream, through
// the C++ API (fake samples) and the CLI (a real dataset, pipes, two uids).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/capacity.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

constexpr uint64_t kSamples = 60;

CacheOptions Root(const std::string& dir) {
  CacheOptions o;
  o.root = dir;
  o.capacity_bytes = 64ull << 20;
  o.reserve_chunk = 1 << 20;
  return o;
}

void Fill(const CacheOptions& o, const EntryKey& key, uint64_t from, uint64_t to,
          uint64_t step = 1) {
  auto e = CacheEntry::Open(o, key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = from; id < to; id += step) ASSERT_TRUE(test::PutFake(e->get(), id).ok());
}

Status ExportToFile(const CacheOptions& o, const EntryKey& key, const std::string& path,
                    const ExportOptions& eo = {}, TransferReport* r = nullptr) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  TransferReport local;
  Status s = ExportEntry(o, key.fingerprint(), fd, eo, r ? r : &local);
  ::close(fd);
  return s;
}

Status ImportFile(const CacheOptions& o, const std::string& path, TransferReport* r = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY);
  TransferReport local;
  Status s = ImportEntry(o, fd, {}, r ? r : &local);
  ::close(fd);
  return s;
}

size_t Children(const std::string& dir) {
  std::vector<std::string> names;
  (void)Env::Default()->GetChildren(dir, &names);
  return names.size();
}

// Ids of the entry under o that read back intact and equal to FakePixels;
// -1 if one reads back different.
int64_t IntactFakes(const CacheOptions& o, const EntryKey& key) {
  auto e = CacheEntry::Open(o, key);
  if (!e.ok()) return -1;
  int64_t n = 0;
  for (uint64_t id = 0; id < key.samples_total; ++id) {
    if (!(*e)->Contains(id)) continue;
    if (!test::ReadsBackFake(e->get(), id)) return -1;
    ++n;
  }
  return n;
}

std::string ReadAll(const std::string& path) {
  std::string s;
  EXPECT_TRUE(Env::Default()->ReadFileToString(path, &s).ok());
  return s;
}

void WriteAll(const std::string& path, const std::string& data) {
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, data, 0600).ok());
}

TEST(EntryTransfer, RoundTripIntoAnEmptyRootPlainAndZstd) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  for (bool zstd : {false, true}) {
    ExportOptions eo;
    eo.zstd = zstd;
    std::string stream = d.Sub(zstd ? "s.tar.zst" : "s.tar");
    TransferReport ex;
    ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, stream, eo, &ex).ok());
    EXPECT_EQ(ex.records, kSamples);
    std::string b = d.Sub(zstd ? "bz" : "b");
    TransferReport im;
    Status s = ImportFile(Root(b), stream, &im);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(im.entry, key.fingerprint());
    EXPECT_EQ(im.added, kSamples);
    EXPECT_FALSE(im.merged);
    EXPECT_EQ(IntactFakes(Root(b), key), int64_t(kSamples));
    EXPECT_EQ(Children(b + "/trash"), 0u);
    // The imported entry is an ordinary one: it takes more records.
    auto e = CacheEntry::Open(Root(b), key);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE((*e)->Put(0, 1, reinterpret_cast<const uint8_t*>("abc"), 1, 1, 3).ok());
  }
}

TEST(EntryTransfer, PartialEntryNeedsPartial) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples / 2);
  Status s = ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("partial (30 of 60"), std::string::npos) << s.message();
  ExportOptions eo;
  eo.partial = true;
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"), eo).ok());
  ASSERT_TRUE(ImportFile(Root(d.Sub("b")), d.Sub("s.tar")).ok());
  EXPECT_EQ(IntactFakes(Root(d.Sub("b")), key), int64_t(kSamples / 2));
}

TEST(EntryTransfer, ExportWhileALoaderFillsTheEntry) {
  test::TempDir d;
  const uint64_t n = 400;
  auto key = test::FakeKey(n);
  Fill(Root(d.Sub("a")), key, 0, n / 4);
  std::atomic<bool> done{false};
  std::thread filler([&] {
    auto e = CacheEntry::Open(Root(d.Sub("a")), key);
    ASSERT_TRUE(e.ok());
    for (uint64_t id = n / 4; id < n; ++id) {
      ASSERT_TRUE(test::PutFake(e->get(), id).ok());
      std::string buf;
      CachedSample s;
      ASSERT_TRUE((*e)->Get(id / 2, &buf, &s).ok());  // and reads on
    }
    done = true;
  });
  ExportOptions eo;
  eo.partial = true;
  int exports = 0;
  do {  // at least one export overlaps the filling
    TransferReport ex;
    Status s = ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"), eo, &ex);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_GE(ex.records, n / 4);
    ++exports;
  } while (!done && exports < 1000);
  filler.join();
  std::string b = d.Sub("b");
  TransferReport im;
  ASSERT_TRUE(ImportFile(Root(b), d.Sub("s.tar"), &im).ok());
  EXPECT_EQ(IntactFakes(Root(b), key), int64_t(im.records));
  EXPECT_GE(im.records, n / 4);
}

TEST(EntryTransfer, IntoAFullRootIsRefusedAndLeavesNothing) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  CacheOptions small = Root(d.Sub("b"));
  small.capacity_bytes = 20000;  // less than the entry's records
  Status s = ImportFile(small, d.Sub("s.tar"));
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.message();
  EXPECT_EQ(Children(d.Sub("b/entries")), 0u);
  EXPECT_EQ(Children(d.Sub("b/trash")), 0u);
}

TEST(EntryTransfer, IntoAnExistingEntryMerges) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  Fill(Root(d.Sub("b")), key, 0, kSamples, 2);          // the even ids
  auto user = CacheEntry::Open(Root(d.Sub("b")), key);  // in use meanwhile
  ASSERT_TRUE(user.ok());
  TransferReport im;
  Status s = ImportFile(Root(d.Sub("b")), d.Sub("s.tar"), &im);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(im.merged);
  EXPECT_EQ(im.already_present, kSamples / 2);
  EXPECT_EQ(im.added, kSamples / 2);
  ASSERT_TRUE((*user)->Refresh().ok());
  EXPECT_EQ((*user)->samples_present(), kSamples);
  EXPECT_EQ(IntactFakes(Root(d.Sub("b")), key), int64_t(kSamples));
  EXPECT_EQ(Children(d.Sub("b/trash")), 0u);
}

// A damaged stream is refused and leaves nothing; a change the stream does
// not depend on (tar padding) may be accepted, but then imports every record
// intact.
class DamagedStream : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = test::FakeKey(kSamples);
    Fill(Root(d_.Sub("a")), key_, 0, kSamples);
    ASSERT_TRUE(ExportToFile(Root(d_.Sub("a")), key_, d_.Sub("s.tar")).ok());
    stream_ = ReadAll(d_.Sub("s.tar"));
  }
  // True when refused; fails the test if it left anything or imported wrong data.
  bool Refused(const std::string& damaged, const std::string& what) {
    std::string root = d_.Sub("t" + std::to_string(n_++));
    WriteAll(d_.Sub("damaged.tar"), damaged);
    TransferReport im;
    Status s = ImportFile(Root(root), d_.Sub("damaged.tar"), &im);
    if (s.ok()) {
      EXPECT_EQ(IntactFakes(Root(root), key_), int64_t(kSamples)) << what;
    } else {
      EXPECT_EQ(Children(root + "/entries"), 0u) << what;
      EXPECT_EQ(Children(root + "/trash"), 0u) << what;
      EXPECT_NE(s.message().find("export stream"), std::string::npos) << s.message();
    }
    std::filesystem::remove_all(root);
    return !s.ok();
  }
  test::TempDir d_;
  EntryKey key_;
  std::string stream_;
  int n_ = 0;
};

TEST_F(DamagedStream, ByteFlipsAreRefused) {
  size_t first_record = stream_.find("SDFR");
  size_t table = stream_.find("checksums.json");
  ASSERT_NE(first_record, std::string::npos);
  int refused = 0, tried = 0;
  for (size_t pos = 0; pos < stream_.size(); pos += 151) {
    std::string bad = stream_;
    bad[pos] ^= 0x10;
    bool r = Refused(bad, "flip at " + std::to_string(pos));
    ++tried;
    refused += r;
    // Inside the records (pixels and headers): always refused.
    if (pos >= first_record && pos < table - 512) {
      EXPECT_TRUE(r) << "flip at " << pos;
    }
  }
  EXPECT_GT(refused, tried / 4);
}

TEST_F(DamagedStream, TruncationIsRefused) {
  size_t table = stream_.find("checksums.json");
  for (size_t len = 0; len < stream_.size(); len += 211) {
    bool r = Refused(stream_.substr(0, len), "cut at " + std::to_string(len));
    if (len < table + 512) {
      EXPECT_TRUE(r) << "cut at " << len;
    }
  }
}

TEST_F(DamagedStream, NotAnExportIsRefused) {
  EXPECT_TRUE(Refused("hello", "text"));
  EXPECT_TRUE(Refused(std::string(10240, '\0'), "zeros"));
  // A manifest of another entry: the records would be served under a wrong key.
  std::string bad = stream_;
  size_t at = bad.find("\"samples_total\": 60");
  ASSERT_NE(at, std::string::npos);
  bad[at + 17] = '7';
  EXPECT_TRUE(Refused(bad, "manifest samples_total"));
}

// ---- the CLI, with a real dataset

struct CliFixture {
  test::TempDir dir;
  std::string uri;
  CliFixture() {
    MakeDatasetOptions o;
    o.dir = dir.Sub("data");
    o.format = "folder";
    o.count = 40;
    o.min_side = 40;
    o.max_side = 80;
    MakeDatasetReport r;
    EXPECT_TRUE(MakeDataset(o, &r).ok());
    uri = r.uri;
  }
  std::string Cli() const { return test::CliPath(); }
  std::string Warm(const std::string& cache, const std::string& source,
                   const std::string& extra = "") const {
    return Cli() + " warm --source " + source + " --cache " + cache +
           " --resize-short 32 --json --quiet --workers 2 " + extra;
  }
  static uint64_t Prepared(const std::string& json) {
    auto j = nlohmann::json::parse(json, nullptr, false);
    return j.is_object() && j.contains("prepared") ? j["prepared"].get<uint64_t>() : 999999;
  }
};

TEST(EntryTransferCli, PipeExportIntoImportThenAllHits) {
  CliFixture f;
  std::string a = f.dir.Sub("a"), b = f.dir.Sub("b"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry.substr(0, 12) + " --zstd --cache " + a +
                           " 2>/dev/null | " + f.Cli() + " cache import - --json --cache " + b,
                       &out),
      0)
      << out;
  EXPECT_EQ(nlohmann::json::parse(out)["entry"], entry);
  ASSERT_EQ(test::RunCommand(f.Warm(b, f.uri), &out), 0);
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
  // A file that is not an export: exit 1, naming the file.
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + f.dir.Sub("a/entries/" + entry) +
                                 "/manifest.json --cache " + b + " 2>&1",
                             &out),
            1);
  EXPECT_NE(out.find("manifest.json: export stream"), std::string::npos) << out;
}

TEST(EntryTransferCli, SourceRootRebindsToTheNodesCopy) {
  CliFixture f;
  std::string a = f.dir.Sub("a"), b = f.dir.Sub("b"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  std::string stream = f.dir.Sub("e.tar");
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry + " --to " + stream + " --cache " + a),
      0);
  // The node's copy: another path, other inodes and ctimes.
  ASSERT_EQ(test::RunCommand("cp -a " + f.dir.Sub("data") + " " + f.dir.Sub("node-data")), 0);
  std::string node_uri = f.uri;
  node_uri.replace(node_uri.find(f.dir.Sub("data")), f.dir.Sub("data").size(),
                   f.dir.Sub("node-data"));
  ASSERT_EQ(test::RunCommand("mv " + f.dir.Sub("data") + " " + f.dir.Sub("gone")), 0);
  // Without --source-root the source is not found here: refused, named.
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --cache " + b + " 2>&1", &out),
            1);
  EXPECT_NE(out.find("--source-root"), std::string::npos) << out;
  EXPECT_EQ(Children(b + "/entries"), 0u);
  // Another dataset of as many samples at that path: refused, named.
  MakeDatasetOptions other;
  other.dir = f.dir.Sub("other");
  other.count = 40;
  other.min_side = 40;
  other.max_side = 80;
  other.seed = 7;
  MakeDatasetReport rep;
  ASSERT_TRUE(MakeDataset(other, &rep).ok());
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --source-root " +
                                 f.dir.Sub("data") + "=" + f.dir.Sub("other") + " --cache " + b,
                             &out),
            1);
  EXPECT_NE(out.find("not the same dataset"), std::string::npos) << out;
  EXPECT_EQ(Children(b + "/entries"), 0u);
  EXPECT_EQ(Children(b + "/trash"), 0u);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --json --source-root " +
                                 f.dir.Sub("data") + "=" + f.dir.Sub("node-data") + " --cache " + b,
                             &out),
            0)
      << out;
  EXPECT_NE(nlohmann::json::parse(out)["entry"], entry);  // the node's identity
  ASSERT_EQ(test::RunCommand(f.Warm(b, node_uri), &out), 0);
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
}

TEST(EntryTransferCli, ImportAsASecondUserOfAGroupSharedRoot) {
  for (int uid : {4201, 4202})
    if (auto why = test::CannotActAs(uid, 4243); !why.empty()) GTEST_SKIP() << why;
  CliFixture f;
  ASSERT_EQ(::chmod(f.dir.path().c_str(), 0711), 0);
  ASSERT_EQ(test::RunCommand("chmod -R a+rX " + f.dir.Sub("data")), 0);
  std::string a = f.dir.Sub("a"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  std::string stream = f.dir.Sub("e.tar");
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry + " --to " + stream + " --cache " + a),
      0);
  ASSERT_EQ(::chmod(stream.c_str(), 0644), 0);
  std::string cache = f.dir.Sub("shared");
  const gid_t group = 4243;
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  ASSERT_EQ(::chown(cache.c_str(), 0, group), 0);
  ASSERT_EQ(::chmod(cache.c_str(), 02770), 0);
  auto as_user = [&](int uid, const std::string& cmd) {
    return "/usr/bin/setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(uid) +
           " --groups=" + std::to_string(group) + " /bin/sh -c 'umask 022; " + cmd + "'";
  };
  ASSERT_EQ(test::RunCommand(as_user(4201, f.Cli() + " cache import " + stream +
                                               " --group-shared --cache " + cache),
                             &out),
            0)
      << out;
  // The other user of the group uses (and fills) it: every sample a hit.
  ASSERT_EQ(test::RunCommand(as_user(4202, f.Warm(cache, f.uri, "--group-shared")), &out), 0)
      << out;
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(cache, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    ASSERT_EQ(::lstat(it->path().c_str(), &st), 0);
    std::string p = it->path().string();
    EXPECT_EQ(st.st_mode & 07, 0u) << p << " is world-accessible";
    EXPECT_EQ(st.st_gid, group) << p;
    EXPECT_EQ(st.st_mode & (S_ISDIR(st.st_mode) ? 02070u : 060u),
              S_ISDIR(st.st_mode) ? 02070u : 060u)
        << p;
  }
}

// Another process empties the trash (as every open and reservation does)
// the instant each staging directory is made: the directory is its
// maker's already, so neither a new entry nor an import loses it.
class CleanupAtBirthEnv : public EnvWrapper {
 public:
  CleanupAtBirthEnv(Env* base, const std::string& root) : EnvWrapper(base), paths_(root) {}
  Status CreateDir(const std::string& path, uint32_t mode) override {
    Status s = EnvWrapper::CreateDir(path, mode);
    if (s.ok() && Dirname(path) == paths_.trash && Basename(path).rfind(kStagingPrefix, 0) == 0) {
      EmptyTrash(target(), paths_);
      ++cleanups;
    }
    return s;
  }
  std::atomic<int> cleanups{0};

 private:
  RootPaths paths_;
};

TEST(EntryTransfer, StagingDirSurvivesAnotherProcessEmptyingTheTrashAtItsBirth) {
  test::TempDir a, b;
  EntryKey key = test::FakeKey(kSamples);
  Fill(Root(a.path()), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(a.path()), key, a.Sub("x.tar")).ok());
  CleanupAtBirthEnv env(Env::Default(), b.path());
  CacheOptions o = Root(b.path());
  o.env = &env;
  TransferReport r;
  Status s = ImportFile(o, a.Sub("x.tar"), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(env.cleanups.load(), 1);
  EXPECT_EQ(IntactFakes(Root(b.path()), key), static_cast<int64_t>(kSamples));
  // A new entry's staging directory, likewise.
  auto e = CacheEntry::Open(o, test::FakeKey(kSamples, "new"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(env.cleanups.load(), 2);
  EXPECT_TRUE(test::PutFake(e->get(), 3).ok());
  e->reset();
  // Nothing is left in the trash: neither directories nor maker locks.
  EXPECT_EQ(Children(JoinPath(b.path(), "trash")), 0u);
}

}  // namespace
}  // namespace ssdfeed
