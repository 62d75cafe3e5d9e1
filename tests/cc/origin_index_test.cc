// The origin index stored with a cache entry (src/pipeline/origin_index.h):
// a local tfrecord:, tar: or folder: origin, its reads counted by an Env
// wrapper, is read about once by a warm-up, not at all by a job over the
// complete entry, only for the missing samples of a partial one; a changed
// shard or a damaged index file makes the index be built from the origin
// again.
#include "pipeline/origin_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/warm.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// Counts the bytes read from files under a folder (the origin).
class CountingEnv final : public EnvWrapper {
 public:
  CountingEnv(std::string under) : EnvWrapper(Env::Default()), under_(std::move(under)) {}
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& opts = {}) override {
    SSDFEED_ASSIGN_OR_RETURN(auto f, EnvWrapper::NewRandomAccessFile(path, opts));
    if (path.rfind(under_, 0) != 0) return f;
    return std::unique_ptr<RandomAccessFile>(new Counted(std::move(f), &bytes_));
  }
  uint64_t Take() { return bytes_.exchange(0); }

 private:
  class Counted final : public RandomAccessFile {
   public:
    Counted(std::unique_ptr<RandomAccessFile> f, std::atomic<uint64_t>* bytes)
        : f_(std::move(f)), bytes_(bytes) {}
    Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
      Status s = f_->Read(offset, n, scratch, got);
      *bytes_ += *got;
      return s;
    }
    Result<uint64_t> Size() const override { return f_->Size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    std::unique_ptr<RandomAccessFile> f_;
    std::atomic<uint64_t>* bytes_;
  };
  std::string under_;
  std::atomic<uint64_t> bytes_{0};
};

struct Origin {
  test::TempDir dir;
  std::string uri;
  uint64_t bytes = 0;  // the dataset's
  CountingEnv env{dir.Sub("data")};

  explicit Origin(const std::string& format) {
    MakeDatasetOptions o{.dir = dir.Sub("data"),
                         .format = format,
                         .count = 60,
                         .classes = 3,
                         .shard_size = 20,
                         .min_side = 64,
                         .max_side = 96,
                         .threads = 1};
    uri = test::MakeTestDataset(o);
    bytes = FileBytes(dir.Sub("data"));
  }
  // The bytes of the regular files under path (class folders included).
  static uint64_t FileBytes(const std::string& path) {
    auto fi = Env::Default()->Stat(path);
    if (!fi.ok() || !fi->is_dir) return fi.ok() ? fi->size : 0;
    std::vector<std::string> names;
    EXPECT_TRUE(Env::Default()->GetChildren(path, &names).ok());
    uint64_t total = 0;
    for (const auto& n : names) total += FileBytes(JoinPath(path, n));
    return total;
  }
  // One shape for every sample, so they batch; the same entry as the warm-ups.
  static PrepareSpec Prep() {
    PrepareSpec p;
    p.resize_short = 0;
    p.resize_h = p.resize_w = 16;
    return p;
  }
  WarmOptions Warming() {
    WarmOptions w;
    w.cache.root = dir.Sub("cache");
    w.source.env = &env;
    w.workers = 2;
    w.prepare = Prep();
    return w;
  }
  // One epoch of a Loader over ids [0, end) (0: all); the samples served.
  size_t Epoch(uint64_t end = 0) {
    LoaderOptions o;
    o.source = uri;
    o.source_options.env = &env;
    o.cache.root = dir.Sub("cache");
    o.batch_size = 10;
    o.workers = 2;
    o.id_end = end;
    o.prepare = Prep();
    auto loader = Loader::Open(o);
    EXPECT_TRUE(loader.ok()) << loader.status().message();
    if (!loader.ok()) return 0;
    Batch b;
    size_t served = 0;
    while (true) {
      auto more = (*loader)->Next(&b);
      EXPECT_TRUE(more.ok()) << more.status().message();
      if (!more.ok() || !*more) break;
      served += b.size;
    }
    return served;
  }
};

// Every layout: what a job reads of a local origin.
class OriginReadsTest : public ::testing::TestWithParam<std::string> {};
// The sharded layouts, which store an index.
class OriginIndexTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OriginReadsTest, WarmReadsOnceAndACompleteEntryReadsNothing) {
  Origin o(GetParam());
  WarmResult r;
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &r).ok());
  ASSERT_EQ(r.samples_present, 60u);
  uint64_t warm = o.env.Take();
  EXPECT_LE(warm, o.bytes * 105 / 100) << "warm-up read " << warm << " of " << o.bytes;

  EXPECT_EQ(o.Epoch(), 60u);
  EXPECT_EQ(o.env.Take(), 0u) << "a job over the complete entry read the origin";
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &r).ok());
  EXPECT_EQ(o.env.Take(), 0u) << "a second warm-up read the origin";
}

TEST_P(OriginReadsTest, PartialEntryReadsOnlyWhatItMisses) {
  Origin o(GetParam());
  o.Epoch(54);  // 90% of the samples
  o.env.Take();
  EXPECT_EQ(o.Epoch(), 60u);
  uint64_t got = o.env.Take();
  EXPECT_LE(got, o.bytes * 15 / 100) << "read " << got << " of " << o.bytes;
}

// The index file of the (one) entry in the root.
std::string IndexFileOf(const std::string& root) {
  std::vector<std::string> entries, names;
  EXPECT_TRUE(Env::Default()->GetChildren(JoinPath(root, "entries"), &entries).ok());
  EXPECT_EQ(entries.size(), 1u);
  std::string dir = JoinPath(JoinPath(root, "entries"), entries.at(0));
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  for (const auto& n : names)
    if (n.rfind("origin-", 0) == 0) return JoinPath(dir, n);
  ADD_FAILURE() << "no origin index in " << dir;
  return "";
}

TEST_P(OriginIndexTest, DamagedIndexIsNotUsedAndTheOriginIsIndexedAgain) {
  Origin o(GetParam());
  WarmResult r;
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &r).ok());
  std::string path = IndexFileOf(o.dir.Sub("cache")), bytes;
  ASSERT_TRUE(Env::Default()->ReadFileToString(path, &bytes).ok());
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, bytes).ok());
  o.env.Take();
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &r).ok());
  EXPECT_EQ(r.samples_present, 60u);
  EXPECT_GT(o.env.Take(), 0u);  // the headers, read again
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find(path), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("checksum"), std::string::npos) << r.warnings[0];
  // The damaged file was replaced by a good one: the next job reads nothing.
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &r).ok());
  EXPECT_EQ(o.env.Take(), 0u) << "the damaged index was not replaced";
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

TEST_P(OriginIndexTest, ChangedShardIsANewIndexAndANewEntry) {
  Origin o(GetParam());
  WarmResult first, second;
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &first).ok());
  std::vector<std::string> names;
  ASSERT_TRUE(Env::Default()->GetChildren(o.dir.Sub("data"), &names).ok());
  std::sort(names.begin(), names.end());
  // Rewritten in place with the same bytes: a new ctime, so a new identity.
  std::string shard = JoinPath(o.dir.Sub("data"), names[0]), bytes;
  ASSERT_TRUE(Env::Default()->ReadFileToString(shard, &bytes).ok());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(shard, bytes, 0644).ok());
  o.env.Take();
  ASSERT_TRUE(Warm(o.uri, o.Warming(), &second).ok());
  EXPECT_NE(second.dir, first.dir);
  EXPECT_EQ(second.prepared, 60u);
  EXPECT_GT(o.env.Take(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, OriginReadsTest, ::testing::Values("tar", "tfrecord", "folder"));
INSTANTIATE_TEST_SUITE_P(Layouts, OriginIndexTest, ::testing::Values("tar", "tfrecord"));

}  // namespace
}  // namespace ssdfeed
