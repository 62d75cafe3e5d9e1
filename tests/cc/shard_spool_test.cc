// ShardSpools (src/source/shard_spool.h) over an origin that counts its
// requests: a scan streams a shard in a few large reads and the samples are
// then read from the spool; a planned run is one request for all of its
// samples; nothing is kept without a spool directory, and a released shard
// goes back to the origin.
#include "source/shard_spool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "test_util.h"

namespace ssdfeed {
namespace {

// An object of `size` bytes (byte i is i % 251) that counts reads and bytes.
class CountedOrigin final : public RandomAccessFile {
 public:
  CountedOrigin(uint64_t size, std::atomic<uint64_t>* requests, std::atomic<uint64_t>* bytes)
      : size_(size), requests_(requests), bytes_(bytes) {}
  Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
    ++*requests_;
    *got = offset >= size_ ? 0 : static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    for (size_t i = 0; i < *got; ++i) scratch[i] = static_cast<char>((offset + i) % 251);
    *bytes_ += *got;
    return Status::OK();
  }
  Result<uint64_t> Size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  uint64_t size_;
  std::atomic<uint64_t>* requests_;
  std::atomic<uint64_t>* bytes_;
  std::string path_ = "s3://bucket/shard-0.tar";
};

struct Fixture {
  test::TempDir dir;
  std::atomic<uint64_t> requests{0}, bytes{0};
  static constexpr uint64_t kSize = kSpoolChunkBytes * 2 + 12345;  // three ranges
  std::unique_ptr<RandomAccessFile> Origin() {
    return std::make_unique<CountedOrigin>(kSize, &requests, &bytes);
  }
  // Reads [offset, offset + n) through f and checks the bytes.
  static void ExpectRead(const RandomAccessFile& f, uint64_t offset, size_t n) {
    std::string buf(n, '\0');
    size_t got = 0;
    ASSERT_TRUE(f.Read(offset, n, buf.data(), &got).ok());
    ASSERT_EQ(got, n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<uint8_t>(buf[i]), (offset + i) % 251) << "byte " << offset + i;
  }
  // What a tar scan does: a header, then skip the member's data.
  void Scan(const RandomAccessFile& f) {
    for (uint64_t pos = 0; pos + 512 <= kSize; pos += 512 + 100000) ExpectRead(f, pos, 512);
  }
};

TEST(ShardSpool, AScanStreamsTheShardOnceAndTheSamplesReadTheSpool) {
  Fixture t;
  ShardSpools spools(1);
  spools.Configure(Env::Default(), t.dir.path());
  t.Scan(*spools.Streaming(0, t.Origin()));
  EXPECT_EQ(t.requests.load(), 3u);  // three 8 MiB ranges, not one request per header
  EXPECT_LE(t.bytes.load(), Fixture::kSize);
  auto reading = spools.Reading(0, t.Origin());
  Fixture::ExpectRead(*reading, 0, 4096);
  Fixture::ExpectRead(*reading, kSpoolChunkBytes - 100, 300);  // across two ranges
  EXPECT_EQ(t.requests.load(), 3u) << "a sample was fetched again";
  // The spool leaves no file behind: unlinked as soon as it was opened.
  std::vector<std::string> names;
  ASSERT_TRUE(Env::Default()->GetChildren(t.dir.path(), &names).ok());
  EXPECT_TRUE(names.empty()) << names[0];

  spools.Release(0);  // every sample of the shard was read
  Fixture::ExpectRead(*reading, 0, 4096);
  EXPECT_EQ(t.requests.load(), 4u);
}

TEST(ShardSpool, WithoutASpoolDirectoryTheSamplesAreFetchedAgain) {
  Fixture t;
  ShardSpools spools(1);
  t.Scan(*spools.Streaming(0, t.Origin()));
  EXPECT_EQ(t.requests.load(), 3u);
  Fixture::ExpectRead(*spools.Reading(0, t.Origin()), 1000, 10);
  EXPECT_EQ(t.requests.load(), 4u);
}

TEST(ShardSpool, APlannedRunIsOneRequestForAllItsSamples) {
  Fixture t;
  ShardSpools spools(1);
  spools.Configure(Env::Default(), t.dir.path());
  spools.Plan(0, {{1000, 61000}, {200000, 200500}});
  auto reading = spools.Reading(0, t.Origin());
  for (uint64_t off = 1000; off < 61000; off += 6000) Fixture::ExpectRead(*reading, off, 6000);
  EXPECT_EQ(t.requests.load(), 1u);
  EXPECT_EQ(t.bytes.load(), 60000u);
  Fixture::ExpectRead(*reading, 200100, 100);  // inside the second run: fetched whole
  Fixture::ExpectRead(*reading, 200000, 100);
  EXPECT_EQ(t.requests.load(), 2u);
  EXPECT_EQ(t.bytes.load(), 60500u);
  Fixture::ExpectRead(*reading, 500000, 100);  // planned by nobody: read alone
  EXPECT_EQ(t.requests.load(), 3u);
  EXPECT_EQ(t.bytes.load(), 60600u);
}

TEST(ShardSpool, APlannedRunIsNotFetchedWholeWhereItCannotBeKept) {
  Fixture t;
  ShardSpools spools(1);  // no spool directory
  spools.Plan(0, {{1000, 61000}});
  auto reading = spools.Reading(0, t.Origin());
  Fixture::ExpectRead(*reading, 1000, 6000);
  EXPECT_EQ(t.bytes.load(), 6000u);  // the sample only, not the run it could not keep
}

}  // namespace
}  // namespace ssdfeed
