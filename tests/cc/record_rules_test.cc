// What an entry's records may be (cache_format::RecordRules, RulesOf its
// key): crafted records (another codec than the entry's, a shape its
// prepare spec never makes) are refused by every reader before anything is
// sized from their headers, naming the entry and the record; a writer
// refuses to store them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/items.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

namespace cf = cache_format;
using test::CraftedRecord;
using test::PlantRecords;
using test::ZeroFrame;

constexpr uint64_t kN = 6;
// 4096 x 4096 x 3: 48 MiB of pixels in a 1.6 KiB zstd frame.
constexpr int kBig = 4096;

CacheOptions Opts(const std::string& root) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  return o;
}

cf::RecordHeader Header(int h, int w, int c, RecordCodec codec = RecordCodec::kRaw) {
  cf::RecordHeader r;
  r.height = static_cast<uint16_t>(h);
  r.width = static_cast<uint16_t>(w);
  r.channels = static_cast<uint8_t>(c);
  r.codec = static_cast<uint8_t>(codec);
  return r;
}

TEST(RecordRules, FollowTheRecordedPrepareSpec) {
  PrepareSpec crop;
  crop.resize_short = 256;
  crop.crop_h = crop.crop_w = 224;
  crop.codec = RecordCodec::kZstd;
  cf::RecordRules r = RulesOf(test::SpecKey(4, crop));
  EXPECT_EQ(cf::CheckRules(Header(224, 224, 3, RecordCodec::kZstd), r), "");
  EXPECT_EQ(cf::CheckRules(Header(0, 0, 0, RecordCodec::kZstd), r), "") << "image-less";
  EXPECT_EQ(cf::CheckRules(Header(224, 224, 3), r), "codec raw, not the entry's zstd");
  EXPECT_EQ(cf::CheckRules(Header(224, 225, 3, RecordCodec::kZstd), r),
            "shape 224x225x3: the entry's images are 224x224");
  EXPECT_EQ(cf::CheckRules(Header(224, 224, 1, RecordCodec::kZstd), r),
            "shape 224x224x1: the entry's images have 3 channels");

  PrepareSpec shorter;
  shorter.resize_short = 64;
  shorter.max_long = 100;
  shorter.gray = true;
  r = RulesOf(test::SpecKey(4, shorter));
  EXPECT_EQ(cf::CheckRules(Header(64, 100, 1), r), "");
  EXPECT_EQ(cf::CheckRules(Header(50, 100, 1), r), "") << "max_long shrinks the shorter side";
  EXPECT_EQ(cf::CheckRules(Header(65, 90, 1), r),
            "shape 65x90x1: the entry's images have sides of at most 64 (shorter) and 100 "
            "(longer)");
  EXPECT_NE(cf::CheckRules(Header(64, 101, 1), r), "");

  r = RulesOf(test::SpecKey(4, PrepareSpec{}));  // origin sizes: the decoders' limit
  EXPECT_EQ(cf::CheckRules(Header(10000, 10000, 3), r), "");
  EXPECT_EQ(cf::CheckRules(Header(10000, 10001, 3), r),
            "shape 10000x10001x3: the entry's images hold at most 100000000 pixels");

  // No recorded spec (a C++ key of its own, an items entry), or one the
  // fingerprinted spec text does not match: raw records of any shape.
  for (EntryKey k : {test::FakeKey(4), test::SpecKey(4, crop)}) {
    if (k.spec != "spec") k.spec = kItemsRecordSpec;
    r = RulesOf(k);
    EXPECT_EQ(cf::CheckRules(Header(65535, 65535, 255), r), "");
    EXPECT_EQ(cf::CheckRules(Header(224, 224, 3, RecordCodec::kZstd), r),
              "codec zstd, not the entry's raw");
  }
}

// Reads of sample id: Corruption naming the entry's segment and the sample.
void ExpectRefused(CacheEntry* e, uint64_t id, const std::string& why) {
  std::string buf;
  CachedSample s;
  Status st = e->Get(id, &buf, &s);
  ASSERT_TRUE(st.IsCorruption()) << id << ": " << st.ToString();
  EXPECT_NE(st.message().find(e->dir() + "/seg-200-0000.dat offset "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("sample " + std::to_string(id) + ": " + why), std::string::npos)
      << st.message();
  EXPECT_LT(buf.size(), size_t{1} << 20) << "sized from the crafted header";
}

// The reviewer's case: a raw entry, and zstd records that decode to 48 MiB
// each from 1.6 KiB. The entry's codec is raw: they are damage, and nothing
// is decoded.
TEST(CraftedRecords, ACodecOtherThanTheEntrysIsRefusedByGetAndVerify) {
  test::TempDir root;
  EntryKey key = test::FakeKey(kN);
  auto e = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < kN; ++id) ASSERT_TRUE(test::PutFake(e->get(), id).ok());
  std::string frame = ZeroFrame(uint64_t{kBig} * kBig * 3);
  PlantRecords((*e)->dir(), {CraftedRecord(1, 1, kBig, kBig, 3, frame),
                             CraftedRecord(4, 1, kBig, kBig, 3, frame)});
  // `ssdfeed cache verify` (it counted such records good): exit 1, both
  // counted corrupt.
  std::string out;
  int rc =
      test::RunCommand(test::CliPath() + " cache verify --cache " + root.path() + " 2>&1", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(": 4 good, 2 corrupt, 0 missing"), std::string::npos) << out;
  ASSERT_TRUE((*e)->Refresh().ok());
  ExpectRefused(e->get(), 1, "codec zstd, not the entry's raw");
  ExpectRefused(e->get(), 4, "codec zstd, not the entry's raw");
  // Verify (`cache verify`) through another handle, whose index has not
  // dropped them: it counts them corrupt, not good.
  auto v = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(v->get(), &r).ok());
  EXPECT_EQ(r.good, kN - 2);
  EXPECT_EQ(r.corrupt_ids, (std::vector<uint64_t>{1, 4}));
  // The writer refuses what a read would refuse.
  Status put = test::PutFakeCoded(e->get(), 2, RecordCodec::kZstd);
  EXPECT_TRUE(put.IsInvalidArgument()) << put.ToString();
  EXPECT_NE(put.message().find("sample 2: codec zstd, not the entry's raw"), std::string::npos)
      << put.message();
}

// A zstd entry whose images are at most 12 x 12: a record of another shape
// (one the frame really holds) is refused before its pixels are decoded.
TEST(CraftedRecords, AShapeThePrepareSpecNeverMakesIsRefusedByGetAndVerify) {
  test::TempDir root;
  PrepareSpec spec;
  spec.resize_short = 12;
  spec.max_long = 12;
  spec.codec = RecordCodec::kZstd;
  EntryKey key = test::SpecKey(kN, spec);
  auto e = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < kN; ++id)
    ASSERT_TRUE(test::PutFakeCoded(e->get(), id, RecordCodec::kZstd).ok()) << id;
  PlantRecords((*e)->dir(),
               {CraftedRecord(2, 1, kBig, kBig, 3, ZeroFrame(uint64_t{kBig} * kBig * 3)),
                CraftedRecord(3, 1, 10, 10, 1, ZeroFrame(100)),
                // The largest header: about 1 TB claimed, never allocated.
                CraftedRecord(4, 1, 65535, 65535, 255, ZeroFrame(100)),
                CraftedRecord(5, 0, 10, 10, 3, std::string(300, '\0'))});
  ASSERT_TRUE((*e)->Refresh().ok());
  ExpectRefused(e->get(), 2,
                "shape 4096x4096x3: the entry's images have sides of at most 12 (shorter)");
  ExpectRefused(e->get(), 3, "shape 10x10x1: the entry's images have 3 channels");
  ExpectRefused(e->get(), 4, "shape 65535x65535x255: the entry's images have 3 channels");
  ExpectRefused(e->get(), 5, "codec raw, not the entry's zstd");
  auto v = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(v->get(), &r).ok());
  EXPECT_EQ(r.good, kN - 4);
  EXPECT_EQ(r.corrupt_ids, (std::vector<uint64_t>{2, 3, 4, 5}));
  // The writer refuses such a sample too.
  std::vector<uint8_t> big(size_t{20} * 20 * 3, 1);
  CachedSample s;
  s.pixels = big.data();
  s.height = s.width = 20;
  s.channels = 3;
  s.codec = RecordCodec::kZstd;
  s.stored = "x";
  Status put = (*e)->Put(0, s);
  EXPECT_TRUE(put.IsInvalidArgument()) << put.ToString();
  EXPECT_NE(put.message().find("shape 20x20x3"), std::string::npos) << put.message();
}

// A yuv420 entry: its stored bytes are exactly the planes of the record's
// shape, so a record whose stored length is another is refused from its
// header and length alone, before anything is decoded; the writer refuses
// such a sample too.
TEST(CraftedRecords, Yuv420StoredBytesOtherThanThePlanesAreRefused) {
  test::TempDir root;
  PrepareSpec spec;
  spec.codec = RecordCodec::kYuv420;
  EntryKey key = test::SpecKey(kN, spec);
  auto e = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < kN; ++id)
    ASSERT_TRUE(test::PutFakeCoded(e->get(), id, RecordCodec::kYuv420).ok()) << id;
  const uint8_t yuv = static_cast<uint8_t>(RecordCodec::kYuv420);
  // 9 x 11: a 99-byte Y plane and two 5 x 6 chroma planes, 159 bytes.
  PlantRecords((*e)->dir(), {CraftedRecord(1, yuv, 9, 11, 3, std::string(158, '\x80')),
                             CraftedRecord(2, yuv, 9, 11, 3, std::string(99 * 3, '\x80')),
                             CraftedRecord(3, yuv, 9, 11, 3, std::string(159, '\x80'))});
  ASSERT_TRUE((*e)->Refresh().ok());
  ExpectRefused(e->get(), 1, "yuv420 9x11x3: 158 stored bytes, the planes are 159");
  ExpectRefused(e->get(), 2, "yuv420 9x11x3: 297 stored bytes, the planes are 159");
  std::string buf;
  CachedSample good;
  ASSERT_TRUE((*e)->Get(3, &buf, &good).ok());
  EXPECT_EQ(good.pixels[0], 128);
  std::vector<uint8_t> px(size_t{9} * 11 * 3, 7);
  CachedSample s;
  s.pixels = px.data();
  s.height = 9;
  s.width = 11;
  s.channels = 3;
  s.codec = RecordCodec::kYuv420;
  s.stored = "xyz";
  Status put = (*e)->Put(0, s);
  EXPECT_TRUE(put.IsInvalidArgument()) << put.ToString();
  EXPECT_NE(put.message().find("yuv420 9x11x3: 3 stored bytes, the planes are 159"),
            std::string::npos)
      << put.message();
}

}  // namespace
}  // namespace ssdfeed
