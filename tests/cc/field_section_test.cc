#include "cache/field_section.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "image/mask_rle.h"

namespace ssdfeed::cache_format {
namespace {

Field MakeField(std::string name, FieldKind kind, std::string dtype, std::vector<uint64_t> shape,
                std::string data) {
  return Field{std::move(name), kind, std::move(dtype), std::move(shape), std::move(data)};
}

std::vector<Field> Sample() {
  std::string boxes(2 * 4 * 4, '\0');
  float b[8] = {1, 2, 30, 40, 5.5f, 6, 7, 8};
  std::memcpy(boxes.data(), b, sizeof b);
  return {MakeField("mask", FieldKind::kMask, "|u1", {2, 3}, "abcdef"),
          MakeField("boxes", FieldKind::kBoxes, "<f4", {2, 4}, boxes),
          MakeField("meta", FieldKind::kBytes, "|u1", {5}, "{\"a\"}"),
          MakeField("scalar", FieldKind::kLabel, "<i8", {}, std::string(8, '\x07'))};
}

TEST(FieldSection, RoundTripsEveryField) {
  std::string sec;
  ASSERT_TRUE(EncodeFields(Sample(), &sec).ok());
  EXPECT_EQ(sec.size() % 8, 0u);
  std::vector<FieldView> views;
  ASSERT_EQ(ParseFields(sec, &views), "");
  std::vector<Field> want = Sample();
  ASSERT_EQ(views.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    Field got = ToField(views[i]);
    EXPECT_EQ(got.name, want[i].name);
    EXPECT_EQ(got.kind, want[i].kind);
    EXPECT_EQ(got.dtype, want[i].dtype);
    EXPECT_EQ(got.shape, want[i].shape);
    EXPECT_EQ(got.data, want[i].data);
  }
}

// Instance masks are kind byte 8 (docs/cache-format.md); a kind after the
// last one this reader knows is a bad header, as older readers see 8.
TEST(FieldSection, InstanceMasksAreKind8AndLaterKindsAreRefused) {
  std::string sec;
  ASSERT_TRUE(EncodeFields({MakeField("masks", FieldKind::kInstanceMasks, "|u1", {2, 1, 3},
                                      std::string("\x01\x00\x01\x00\x01\x01", 6))},
                           &sec)
                  .ok());
  ASSERT_EQ(static_cast<uint8_t>(sec[8]), 8u);  // after the u32 count and u32 zero
  std::vector<FieldView> views;
  ASSERT_EQ(ParseFields(sec, &views), "");
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].kind, FieldKind::kInstanceMasks);
  EXPECT_EQ(views[0].shape, (std::vector<uint64_t>{2, 1, 3}));
  sec[8] = 9;
  EXPECT_NE(ParseFields(sec, &views).find("bad header"), std::string::npos);
}

TEST(FieldSection, EmptySectionHasNoFields) {
  std::vector<FieldView> views(1);
  EXPECT_EQ(ParseFields("", &views), "");
  EXPECT_TRUE(views.empty());
}

TEST(FieldSection, RefusesDataThatDisagreesWithShape) {
  std::string sec;
  Status st = EncodeFields({MakeField("m", FieldKind::kMask, "<u2", {2, 2}, "abc")}, &sec);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  st = EncodeFields({MakeField("m", FieldKind::kArray, "|O8", {1}, "12345678")}, &sec);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
}

// Every truncation and every single-byte change of a section either parses
// to views inside it or is refused: never a read past its end (ASan checks).
TEST(FieldSection, DamagedSectionsStayInBounds) {
  std::string sec;
  ASSERT_TRUE(EncodeFields(Sample(), &sec).ok());
  std::vector<FieldView> views;
  for (size_t n = 1; n < sec.size(); ++n) {  // 0 bytes: a record without fields
    std::string cut = sec.substr(0, n);
    EXPECT_NE(ParseFields(cut, &views), "") << "cut to " << n;
  }
  for (size_t i = 0; i < sec.size(); ++i) {
    for (int bit : {0, 7}) {
      std::string bad = sec;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      if (ParseFields(bad, &views).empty()) {
        for (const FieldView& v : views) {
          const char* p = reinterpret_cast<const char*>(v.data);
          EXPECT_GE(p, bad.data());
          EXPECT_LE(p + v.size, bad.data() + bad.size());
        }
      }
    }
  }
}

// One set of fields has one encoding: a non-zero padding or reserved byte
// is refused (the checksum would not tell two encodings apart).
TEST(FieldSection, PaddingMustBeZero) {
  std::string sec;
  ASSERT_TRUE(EncodeFields({MakeField("mask", FieldKind::kMask, "|u1", {1, 2}, "ab")}, &sec).ok());
  ASSERT_EQ(sec.size(), 8u + 16 + 16 + 8 + 8);
  std::vector<FieldView> views;
  uint32_t count = 0;
  ASSERT_EQ(ParseFields(sec, &views), "");
  ASSERT_EQ(CheckFields(sec, &count), "");
  EXPECT_EQ(count, 1u);
  for (size_t at : {size_t{8 + 16 + 16 + 7}, sec.size() - 1}) {  // after "mask|u1", after "ab"
    std::string bad = sec;
    bad[at] = 'x';
    EXPECT_EQ(ParseFields(bad, &views), "field mask: padding is not zero") << at;
    EXPECT_TRUE(views.empty());
    EXPECT_EQ(CheckFields(bad, &count), "field mask: padding is not zero") << at;
  }
}

// Dims whose product wraps 64 (or 128) bits must not pass for a small field.
TEST(FieldSection, AShapeWhoseSizeOverflowsIsRefused) {
  std::string sec;
  ASSERT_TRUE(
      EncodeFields({MakeField("a", FieldKind::kArray, "|u1", {0, 0, 0, 0}, "")}, &sec).ok());
  std::vector<FieldView> views;
  ASSERT_EQ(ParseFields(sec, &views), "");  // a 0-sized shape is fine
  for (int d = 0; d < 4; ++d) {             // each dim 2^32: 2^128 elements
    uint64_t big = 1ull << 32;
    std::memcpy(sec.data() + 8 + 16 + 8 * d, &big, 8);
  }
  EXPECT_EQ(ParseFields(sec, &views), "field a: shape, dtype and length disagree");
  Status st = EncodeFields({MakeField("a", FieldKind::kArray, "|u1",
                                      {1ull << 32, 1ull << 32, 1ull << 32, 1ull << 32}, "")},
                           &sec);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
}

TEST(FieldSection, CheckFieldsAgreesWithParseFields) {
  std::string sec;
  ASSERT_TRUE(EncodeFields(Sample(), &sec).ok());
  uint32_t count = 0;
  EXPECT_EQ(CheckFields(sec, &count), "");
  EXPECT_EQ(count, Sample().size());
  EXPECT_EQ(CheckFields("", &count), "");
  EXPECT_EQ(count, 0u);
  std::vector<FieldView> views;
  for (size_t n = 1; n < sec.size(); ++n)
    EXPECT_EQ(CheckFields(sec.substr(0, n), &count), ParseFields(sec.substr(0, n), &views)) << n;
}

TEST(FieldSection, ItemSizeFollowsNumpy) {
  EXPECT_EQ(DTypeItemSize("|u1"), 1u);
  EXPECT_EQ(DTypeItemSize("<f4"), 4u);
  EXPECT_EQ(DTypeItemSize(">i8"), 8u);
  EXPECT_EQ(DTypeItemSize("<U5"), 20u);
  EXPECT_EQ(DTypeItemSize("|S3"), 3u);
  EXPECT_EQ(DTypeItemSize("<M8[ns]"), 8u);
  EXPECT_EQ(DTypeItemSize("|O"), 0u);
  EXPECT_EQ(DTypeItemSize("<f"), 0u);
  EXPECT_EQ(DTypeItemSize("f4"), 0u);
}

}  // namespace
}  // namespace ssdfeed::cache_format

namespace ssdfeed::cache_format {
namespace {

// ---- Run-length masks (field codec 1) ----

namespace rle {

// A mask of flat regions (a segmentation's classes): rows of a few runs.
std::string FlatMask(int h, int w) {
  std::string m(static_cast<size_t>(h) * w, '\0');
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m[static_cast<size_t>(y) * w + x] = static_cast<char>(x < w / 3 ? 0 : y < h / 2 ? 7 : 255);
  return m;
}

std::string Noise(size_t n, uint32_t seed) {
  std::string m(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    m[i] = static_cast<char>(seed >> 24);
  }
  return m;
}

}  // namespace rle

TEST(MaskRle, RoundTripsAnyMask) {
  struct Case {
    uint64_t rows, width;
    std::string data;
  };
  std::vector<Case> cases = {{30, 40, rle::FlatMask(30, 40)},
                             {7, 300, rle::Noise(7 * 300, 1)},
                             {1, 1, "x"},
                             {3, 200, std::string(600, '\x01')},  // runs past 127: 2-byte lengths
                             {0, 5, ""},
                             {4, 0, ""}};
  for (const Case& c : cases) {
    std::string runs;
    EncodeMaskRle(reinterpret_cast<const uint8_t*>(c.data.data()), c.rows, c.width, &runs);
    ASSERT_EQ(CheckMaskRle(runs, c.rows, c.width), "") << c.rows << "x" << c.width;
    std::string back(c.data.size(), '?');
    DecodeMaskRle(runs, c.rows, c.width, reinterpret_cast<uint8_t*>(back.data()));
    EXPECT_EQ(back, c.data) << c.rows << "x" << c.width;
    // Another shape of the same bytes is refused.
    if (c.rows > 0 && c.width > 1) {
      EXPECT_NE(CheckMaskRle(runs, c.rows + 1, c.width), "");
    }
  }
  std::string flat = rle::FlatMask(300, 400), runs;
  EncodeMaskRle(reinterpret_cast<const uint8_t*>(flat.data()), 300, 400, &runs);
  EXPECT_LT(runs.size() * 50, flat.size()) << "a flat mask shrinks many times";
}

// One mask has one encoding: two runs of one value side by side, a zero
// run, an overlong length or a run past its row are all refused.
TEST(MaskRle, OnlyTheOneEncodingIsAccepted) {
  EXPECT_EQ(CheckMaskRle(std::string("\x05\x04", 2), 1, 4), "");
  EXPECT_NE(CheckMaskRle(std::string("\x05\x02\x05\x02", 4), 1, 4), "");      // same value twice
  EXPECT_NE(CheckMaskRle(std::string("\x05\x00\x06\x04", 4), 1, 4), "");      // a zero run
  EXPECT_NE(CheckMaskRle(std::string("\x05\x84\x00", 3), 1, 4), "");          // 4, overlong
  EXPECT_NE(CheckMaskRle(std::string("\x05\x05", 2), 1, 4), "");              // past the row
  EXPECT_NE(CheckMaskRle(std::string("\x05\x02\x06\x02\x07", 5), 1, 4), "");  // bytes after
  EXPECT_NE(CheckMaskRle(std::string("\x05\x02\x06\x01", 4), 1, 4), "");      // row cut short
  EXPECT_NE(CheckMaskRle(std::string("\x05\xff\xff\xff\xff\x7f", 6), 1, 4), "");
}

TEST(FieldSection, PreparedMasksAreStoredAsRunsAndReadBackRaw) {
  std::vector<Field> fields = {
      MakeField("mask", FieldKind::kMask, "|u1", {60, 80}, rle::FlatMask(60, 80)),
      MakeField("noisy", FieldKind::kMask, "|u1", {4, 4}, rle::Noise(16, 3)),
      MakeField("masks", FieldKind::kInstanceMasks, "|u1", {2, 60, 80},
                rle::FlatMask(60, 80) + std::string(60 * 80, '\0')),
      MakeField("wide", FieldKind::kMask, "<u2", {2, 2}, std::string(8, '\0')),
      MakeField("meta", FieldKind::kBytes, "|u1", {5}, "{\"a\"}")};
  std::vector<FieldCodec> codecs = PreparedCodecs(fields);
  EXPECT_EQ(codecs, (std::vector<FieldCodec>{FieldCodec::kRle, FieldCodec::kRaw, FieldCodec::kRle,
                                             FieldCodec::kRaw, FieldCodec::kRaw}));
  std::string raw, sec;
  ASSERT_TRUE(EncodeFields(fields, &raw).ok());
  ASSERT_TRUE(EncodeFields(fields, &sec, &codecs).ok());
  EXPECT_LT(sec.size() * 10, raw.size());
  std::vector<FieldView> views;
  ASSERT_EQ(ParseFields(sec, &views), "");
  ASSERT_EQ(views.size(), fields.size());
  std::vector<Field> back;
  std::vector<FieldCodec> seen;
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(views[i].codec, codecs[i]) << i;
    EXPECT_EQ(views[i].shape, fields[i].shape) << i;
    back.push_back(ToField(views[i]));
    seen.push_back(views[i].codec);
    EXPECT_EQ(back[i].data, fields[i].data) << fields[i].name;
    std::string scratch;
    EXPECT_EQ(RawData(views[i], &scratch), fields[i].data) << fields[i].name;
  }
  std::string again;  // one encoding: parse, then encode with the codecs read
  ASSERT_TRUE(EncodeFields(back, &again, &seen).ok());
  EXPECT_EQ(again, sec);
  uint32_t count = 0;
  EXPECT_EQ(CheckFields(sec, &count), "");
  EXPECT_EQ(count, fields.size());
  // Runs only for a |u1 mask.
  std::vector<FieldCodec> bad = {FieldCodec::kRle};
  EXPECT_TRUE(EncodeFields({fields[3]}, &again, &bad).IsInvalidArgument());
  EXPECT_TRUE(EncodeFields({fields[4]}, &again, &bad).IsInvalidArgument());
}

// A run-length field's header, for sections the encoder would never make.
std::string RleSection(uint64_t h, uint64_t w, const std::string& runs) {
  Field f = MakeField("m", FieldKind::kMask, "|u1", {1, 1}, "x");
  std::vector<FieldCodec> codecs = {FieldCodec::kRle};
  std::string sec;
  EXPECT_TRUE(EncodeFields({f}, &sec, &codecs).ok());
  sec.resize(8 + 16);  // count, then the field's head: dims, text and data follow
  uint64_t n = runs.size();
  std::memcpy(sec.data() + 8 + 8, &n, 8);
  sec.append(reinterpret_cast<const char*>(&h), 8).append(reinterpret_cast<const char*>(&w), 8);
  sec.append("m|u1", 4).append(4, '\0');
  sec.append(runs).append((8 - runs.size() % 8) % 8, '\0');
  return sec;
}

// A stream that claims more than a record may hold is refused by its shape
// before anything is decoded or allocated; one that claims less than its
// shape, by its runs.
TEST(FieldSection, RunLengthBoundsAreCheckedBeforeDecoding) {
  std::vector<FieldView> views;
  std::string ok = RleSection(2, 3, std::string("\x01\x03\x02\x03", 4));
  ASSERT_EQ(ParseFields(ok, &views), "");
  EXPECT_EQ(ToField(views[0]).data, "\x01\x01\x01\x02\x02\x02");
  // 2^20 x 2^20 is 1 TiB decoded: refused however well its runs read.
  std::string runs;
  for (int r = 0; r < 4; ++r) runs.append("\x00\x80\x80\x40", 4);  // a row of 2^20
  std::string huge = RleSection(uint64_t{1} << 20, uint64_t{1} << 20, runs);
  std::string bad = ParseFields(huge, &views);
  EXPECT_NE(bad.find("over the record limit"), std::string::npos) << bad;
  // Within the limit but 4 rows of runs for 1024: refused as cut short.
  bad = ParseFields(RleSection(1024, uint64_t{1} << 20, runs), &views);
  EXPECT_NE(bad.find("cut short"), std::string::npos) << bad;
  // A reserved byte after the codec, or a codec past the last, is a bad header.
  std::string r = ok;
  r[8 + 5] = 1;
  EXPECT_NE(ParseFields(r, &views), "");
  r = ok;
  r[8 + 4] = 2;
  EXPECT_NE(ParseFields(r, &views), "");
}

// Any flipped bit or cut of a section with runs is refused or parses to
// views inside it whose runs decode within their shape (ToField would trap
// otherwise under ASan).
TEST(FieldSection, DamagedRunLengthSectionsStayInBounds) {
  std::vector<Field> fields = {
      MakeField("mask", FieldKind::kMask, "|u1", {12, 20}, rle::FlatMask(12, 20))};
  std::vector<FieldCodec> codecs = PreparedCodecs(fields);
  ASSERT_EQ(codecs[0], FieldCodec::kRle);
  std::string sec;
  ASSERT_TRUE(EncodeFields(fields, &sec, &codecs).ok());
  std::vector<FieldView> views;
  for (size_t n = 1; n < sec.size(); ++n) EXPECT_NE(ParseFields(sec.substr(0, n), &views), "");
  for (size_t i = 0; i < sec.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = sec;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      if (!ParseFields(bad, &views).empty()) continue;
      for (const FieldView& v : views) {
        const char* p = reinterpret_cast<const char*>(v.data);
        EXPECT_GE(p, bad.data());
        EXPECT_LE(p + v.size, bad.data() + bad.size());
        Field f = ToField(v);
        uint64_t want = 1;
        for (uint64_t d : v.shape) want *= d;
        EXPECT_EQ(f.data.size(), want);
      }
    }
  }
}

}  // namespace
}  // namespace ssdfeed::cache_format
