#include "cache/field_section.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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
