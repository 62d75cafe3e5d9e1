// Counts this thread's operator new calls (a binary of its own: the
// replacement applies to everything linked in) to check that serving
// records of every codec allocates nothing per sample once warm.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "cache_test_util.h"
#include "image/pixel_codec.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "test_util.h"

// GCC 12 at -O2 (the TSan build) inlines std::allocator's free into this
// file's operator delete and warns that std::free releases memory from
// operator new: the replacements below pair malloc with free, which the
// warning cannot see.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
thread_local size_t g_news = 0;
thread_local size_t g_largest = 0;  // the largest single operator new of this thread
}  // namespace

void* operator new(std::size_t n) {
  ++g_news;
  if (n > g_largest) g_largest = n;
  if (void* p = std::malloc(n > 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ssdfeed {
namespace {

constexpr uint64_t kN = 8;

// Get allocates nothing once warm; GetMany allocates its batch's few
// objects per call (not per sample), as many for every codec.
TEST(Alloc, WarmCodecReadsAllocateNothingPerSample) {
  size_t raw_many = 0;
  for (RecordCodec codec :
       {RecordCodec::kRaw, RecordCodec::kZstd, RecordCodec::kJpeg, RecordCodec::kYuv420}) {
    test::TempDir root;
    CacheOptions o;
    o.root = root.path();
    o.capacity_bytes = 1ull << 30;
    o.warm_read = WarmRead::kBuffered;
    o.fill_write = FillWrite::kBuffered;
    o.record_use = false;
    auto e = CacheEntry::Open(o, test::CodecKey(kN, codec));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(test::PutFakeCoded(e->get(), id, codec).ok());
    std::string buf;
    ReadBuffers bufs;
    std::vector<CacheRead> reads(kN);
    size_t gets = 0, many = 0;
    for (int round = 0; round < 4; ++round) {  // round 0 warms: buffers grown, decoders made
      size_t before = g_news;
      for (uint64_t id = 0; id < kN; ++id) {
        CachedSample s;
        ASSERT_TRUE((*e)->Get(id, &buf, &s).ok());
        reads[id] = CacheRead{id, {}, Status::OK()};
      }
      size_t mid = g_news;
      (*e)->GetMany(reads.data(), kN, &bufs);
      for (const CacheRead& r : reads) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      if (round > 0) gets += mid - before, many += g_news - mid;
    }
    EXPECT_EQ(gets, 0u) << EnumName(codec);
    if (codec == RecordCodec::kRaw) raw_many = many;
    EXPECT_EQ(many, raw_many) << EnumName(codec);
    EXPECT_LE(many, 3 * 8u) << "per call, not per sample";
  }
}

TEST(Alloc, WarmEncodeAndDecodeAllocateNothing) {
  int h, w;
  auto p = test::FakePixels(3, &h, &w);
  for (RecordCodec codec : {RecordCodec::kZstd, RecordCodec::kJpeg, RecordCodec::kYuv420}) {
    PixelCodecScratch s;
    std::string stored;
    std::vector<uint8_t> out(p.size());
    auto once = [&] {
      stored.clear();
      ASSERT_TRUE(EncodePixels(codec, 90, p.data(), h, w, 3, &stored, &s).ok());
      ASSERT_TRUE(DecodePixels(codec, stored, h, w, 3, out.data(), &s).ok());
    };
    once();
    size_t before = g_news;
    for (int i = 0; i < 5; ++i) once();
    EXPECT_EQ(g_news - before, 0u) << EnumName(codec);
  }
}

// Crafted records (test::CraftedRecord) in an entry: a zstd one in a raw
// entry and a 4096 x 4096 one in a zstd entry of images at most 12 x 12,
// each a 1.6 KiB frame of 48 MiB. Refused by Get and by verify on their
// headers: no allocation near what the headers claim (the reviewer saw
// 1 GiB of RSS per read from such records).
TEST(Alloc, CraftedRecordsAreRefusedWithoutSizingFromTheirHeaders) {
  PrepareSpec small;
  small.resize_short = 12;
  small.max_long = 12;
  small.codec = RecordCodec::kZstd;
  const std::string frame = test::ZeroFrame(uint64_t{4096} * 4096 * 3);
  for (const EntryKey& key : {test::FakeKey(kN), test::SpecKey(kN, small)}) {
    test::TempDir root;
    CacheOptions o;
    o.root = root.path();
    o.capacity_bytes = 1ull << 30;
    o.warm_read = WarmRead::kBuffered;
    auto e = CacheEntry::Open(o, key);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    test::PlantRecords((*e)->dir(), {test::CraftedRecord(1, 1, 4096, 4096, 3, frame),
                                     test::CraftedRecord(2, 1, 4096, 4096, 3, frame)});
    g_largest = 0;
    ASSERT_TRUE((*e)->Refresh().ok());
    std::string buf;
    CachedSample s;
    Status st = (*e)->Get(1, &buf, &s);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    VerifyReport r;
    ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
    EXPECT_EQ(r.corrupt_ids, std::vector<uint64_t>{2});
    EXPECT_EQ(r.good, 0u);
    EXPECT_LT(g_largest, size_t{1} << 20) << key.spec;
  }
}

}  // namespace
}  // namespace ssdfeed
