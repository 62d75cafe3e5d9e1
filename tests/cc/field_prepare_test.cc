// Preparation of masks, boxes, arrays and pass-through fields: the image's
// resize and centre crop applied to each (image/field_prepare.h).
#include "image/field_prepare.h"

#include <gtest/gtest.h>
#include <spng.h>

#include <cstring>
#include <opencv2/imgproc.hpp>
#include <random>
#include <set>

#include "cache/field_section.h"
#include "cache_test_util.h"
#include "image/field_geometry.h"
#include "pipeline/fetcher.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// A PNG written by libspng's encoder: grey or palette, any bit depth, from
// rows as the PNG stores them (packed; 16-bit samples big endian).
std::string SpngPng(int w, int h, uint8_t color_type, uint8_t depth,
                    const std::vector<uint8_t>& rows) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{static_cast<uint32_t>(w), static_cast<uint32_t>(h), depth, color_type, 0, 0, 0};
  spng_set_ihdr(ctx, &ihdr);
  if (color_type == SPNG_COLOR_TYPE_INDEXED) {
    spng_plte plte{};
    plte.n_entries = 1u << depth;
    for (uint32_t i = 0; i < plte.n_entries; ++i)  // colours unlike the indices
      plte.entries[i] = {static_cast<uint8_t>(255 - i), static_cast<uint8_t>(i * 7), 3, 255};
    spng_set_plte(ctx, &plte);
  }
  int e = spng_encode_image(ctx, rows.data(), rows.size(), SPNG_FMT_RAW, SPNG_ENCODE_FINALIZE);
  EXPECT_EQ(e, 0) << spng_strerror(e);
  size_t len = 0;
  void* buf = spng_get_png_buffer(ctx, &len, &e);
  std::string out(static_cast<char*>(buf), len);
  free(buf);
  spng_ctx_free(ctx);
  return out;
}

cv::Mat RandomMask(int h, int w, int type, int classes, uint32_t seed) {
  cv::Mat m(h, w, type);
  std::mt19937 rng(seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int v = static_cast<int>(rng() % classes) * (type == CV_16UC1 ? 1000 : 1);
      if (type == CV_16UC1) {
        m.at<uint16_t>(y, x) = static_cast<uint16_t>(v);
      } else {
        m.at<uint8_t>(y, x) = static_cast<uint8_t>(v);
      }
    }
  return m;
}

// A grey PNG of an 8- or 16-bit one-channel Mat, or an RGB one of a 3-channel.
std::string Png(const cv::Mat& m) {
  int elem = static_cast<int>(m.elemSize1()), cn = m.channels();
  std::vector<uint8_t> rows;
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols * cn; ++x) {
      if (elem == 2) {
        uint16_t v = m.ptr<uint16_t>(y)[x];
        rows.push_back(static_cast<uint8_t>(v >> 8));
        rows.push_back(static_cast<uint8_t>(v & 0xff));
      } else {
        rows.push_back(m.ptr<uint8_t>(y)[x]);
      }
    }
  uint8_t type = cn == 3 ? SPNG_COLOR_TYPE_TRUECOLOR : SPNG_COLOR_TYPE_GRAYSCALE;
  return SpngPng(m.cols, m.rows, type, static_cast<uint8_t>(8 * elem), rows);
}

EncodedField MaskField(std::string png, std::string origin = "/d/masks/a.png") {
  return {"mask", FieldKind::kMask, std::move(png), false, std::move(origin)};
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
std::string Int64s(std::vector<int64_t> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8);
}
template <typename T>
std::vector<T> As(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

// The reference: cv::resize INTER_NEAREST to the resized size, then the crop.
cv::Mat Reference(const cv::Mat& src, const PrepareGeometry& g) {
  cv::Mat r;
  cv::resize(src, r, cv::Size(g.resized_w, g.resized_h), 0, 0, cv::INTER_NEAREST);
  return r(cv::Rect(g.crop_left, g.crop_top, g.out_w, g.out_h)).clone();
}

TEST(FieldGeometry, NearestIndexIsOpenCvInterNearest) {
  // Every pair of sizes up to 64 (shrinks, enlargements, integer ratios
  // where i * scale lands on an integer), as one row through cv::resize.
  std::vector<int> idx;
  for (int sn = 1; sn <= 64; ++sn) {
    cv::Mat row(1, sn, CV_16UC1);
    for (int i = 0; i < sn; ++i) row.at<uint16_t>(0, i) = static_cast<uint16_t>(i);
    for (int dn = 1; dn <= 64; ++dn) {
      cv::Mat out;
      cv::resize(row, out, cv::Size(dn, 1), 0, 0, cv::INTER_NEAREST);
      NearestIndex(sn, dn, 0, dn, false, &idx);
      for (int i = 0; i < dn; ++i)
        ASSERT_EQ(idx[i], out.at<uint16_t>(0, i)) << sn << " -> " << dn << " at " << i;
      NearestIndex(sn, dn, 0, dn, true, &idx);
      for (int i = 0; i < dn; ++i) ASSERT_EQ(idx[dn - 1 - i], out.at<uint16_t>(0, i));
    }
  }
}

TEST(FieldPrepare, MaskResizeAndCropEqualOpenCvNearest) {
  struct Case {
    int h, w;
    PrepareSpec spec;
  };
  std::vector<Case> cases = {{375, 500, {}}, {375, 500, {}}, {333, 500, {}}, {97, 61, {}}};
  cases[0].spec.resize_short = 256;
  cases[1].spec.resize_short = 160, cases[1].spec.crop_h = 128, cases[1].spec.crop_w = 144;
  cases[2].spec.resize_h = 700, cases[2].spec.resize_w = 901;  // enlarged
  cases[3].spec.resize_short = 50, cases[3].spec.max_long = 60, cases[3].spec.crop_h = 33,
  cases[3].spec.crop_w = 29;
  for (int type : {CV_8UC1, CV_16UC1})
    for (const Case& c : cases) {
      cv::Mat src = RandomMask(c.h, c.w, type, 21, static_cast<uint32_t>(c.h + type));
      PrepareGeometry g = PlanPrepare(c.spec, c.h, c.w);
      std::vector<Field> out;
      ASSERT_TRUE(PrepareFields({MaskField(Png(src))}, g, {}, &out).ok());
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].dtype, type == CV_8UC1 ? "|u1" : "<u2");
      ASSERT_EQ(out[0].shape, (std::vector<uint64_t>{uint64_t(g.out_h), uint64_t(g.out_w)}));
      cv::Mat ref = Reference(src, g);
      ASSERT_EQ(out[0].data.size(), ref.total() * ref.elemSize());
      EXPECT_EQ(std::memcmp(out[0].data.data(), ref.data, out[0].data.size()), 0)
          << c.h << "x" << c.w << " " << c.spec.Canonical();
    }
}

TEST(FieldPrepare, MaskNeverHoldsAValueNotInTheSource) {
  cv::Mat src = RandomMask(211, 307, CV_8UC1, 5, 7);
  src.setTo(200, src == 3);  // a sparse set of values: 0,1,2,4,200
  std::set<uint8_t> values(src.begin<uint8_t>(), src.end<uint8_t>());
  PrepareSpec spec;
  spec.resize_short = 97;  // a fractional shrink: a linear filter would blend
  std::vector<Field> out;
  ASSERT_TRUE(PrepareFields({MaskField(Png(src))}, PlanPrepare(spec, 211, 307), {}, &out).ok());
  for (char c : out[0].data) EXPECT_TRUE(values.count(static_cast<uint8_t>(c))) << int(uint8_t(c));
}

TEST(FieldPrepare, PaletteMaskGivesIndicesNotColours) {
  // 4-bit palette indices, packed two to a byte, and 8-bit ones.
  for (uint8_t depth : {uint8_t{4}, uint8_t{8}}) {
    int w = 7, h = 3;
    std::vector<uint8_t> ids(w * h), rows;
    for (int i = 0; i < w * h; ++i) ids[i] = static_cast<uint8_t>(i % 13);
    size_t row = (w * depth + 7) / 8;
    rows.assign(row * h, 0);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        if (depth == 8) {
          rows[y * row + x] = ids[y * w + x];
        } else {
          rows[y * row + x / 2] |= static_cast<uint8_t>(ids[y * w + x] << (x % 2 ? 0 : 4));
        }
      }
    std::string png = SpngPng(w, h, SPNG_COLOR_TYPE_INDEXED, depth, rows);
    MaskPixels m;
    ASSERT_TRUE(DecodeMaskPng(png, {}, &m).ok());
    EXPECT_EQ(m.elem, 1);
    EXPECT_EQ(m.data, ids) << "depth " << int(depth);
  }
}

TEST(FieldPrepare, SixteenBitGreyMaskKeepsItsValues) {
  cv::Mat src = RandomMask(9, 11, CV_16UC1, 60, 3);  // values up to 59000
  MaskPixels m;
  ASSERT_TRUE(DecodeMaskPng(Png(src), {}, &m).ok());
  ASSERT_EQ(m.elem, 2);
  EXPECT_EQ(std::memcmp(m.data.data(), src.data, m.data.size()), 0);
}

TEST(FieldPrepare, RgbMaskIsRefusedSayingWhy) {
  cv::Mat rgb(4, 4, CV_8UC3, cv::Scalar(1, 2, 3));
  std::vector<Field> out;
  Status s = PrepareFields({MaskField(Png(rgb))}, PlanPrepare({}, 4, 4), {}, &out);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("/d/masks/a.png"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("grey or palette"), std::string::npos) << s.ToString();
}

TEST(FieldPrepare, MaskOfAnotherSizeIsAnErrorNamingTheMaskAndBothSizes) {
  cv::Mat src = RandomMask(30, 40, CV_8UC1, 3, 1);
  std::vector<Field> out;
  Status s = PrepareFields({MaskField(Png(src), "/voc/SegmentationClass/x.png")},
                           PlanPrepare({}, 31, 40), {}, &out);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("/voc/SegmentationClass/x.png"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("40x30"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("40x31"), std::string::npos) << s.message();
}

TEST(FieldPrepare, BoxesAreScaledCroppedClippedAndDroppedWithTheirClasses) {
  // 200x100 (WxH) -> resize_short 50 -> 100x50 -> centre crop 40x40 at
  // left 30, top 5: x' = x / 2 - 30, y' = y / 2 - 5.
  PrepareSpec spec;
  spec.resize_short = 50;
  spec.crop_h = spec.crop_w = 40;
  PrepareGeometry g = PlanPrepare(spec, 100, 200);
  ASSERT_EQ(g.crop_left, 30);
  ASSERT_EQ(g.crop_top, 5);
  std::vector<EncodedField> in = {
      {"classes", FieldKind::kClasses, Int64s({7, 8, 9, 10}), false, ""},
      {"area", FieldKind::kBoxFloats, Floats({0.5f, 1.5f, 2.5f, 3.5f}), false, ""},
      {"boxes", FieldKind::kBoxes,
       Floats({80, 20, 120, 60,       // inside: (10,5)-(30,25)
               50, 20, 70, 40,        // x 25..35 -> 0..5 of 10 wide: half seen, kept clipped
               40, 20, 64, 40,        // x 20..32 -> 0..2 of 12: 1/6 seen, dropped
               100, 200, 120, 220}),  // below the crop: dropped
       false, "/d/a.json"}};
  std::vector<Field> out;
  ASSERT_TRUE(PrepareFields(in, g, {}, &out).ok());
  ASSERT_EQ(out[2].shape, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(As<float>(out[2].data), (std::vector<float>{10, 5, 30, 25, 0, 5, 5, 15}));
  EXPECT_EQ(out[1].dtype, "<f4");
  EXPECT_EQ(As<float>(out[1].data), (std::vector<float>{0.5f, 1.5f}));  // with their boxes
  EXPECT_EQ(out[0].name, "classes");
  EXPECT_EQ(out[0].shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(As<int64_t>(out[0].data), (std::vector<int64_t>{7, 8}));
}

TEST(FieldPrepare, InstanceMasksAreResizedCroppedAndDroppedWithTheirBoxes) {
  // The geometry above: 200x100 (WxH) -> 100x50 -> centre crop 40x40 at
  // left 30, top 5. Each plane goes as a mask would (OpenCV's nearest
  // resize, then the crop); the planes of dropped boxes go with them.
  PrepareSpec spec;
  spec.resize_short = 50;
  spec.crop_h = spec.crop_w = 40;
  PrepareGeometry g = PlanPrepare(spec, 100, 200);
  std::vector<cv::Mat> planes;
  const uint32_t dims[2] = {100, 200};  // H, W
  std::string bytes(reinterpret_cast<const char*>(dims), sizeof dims);
  for (uint32_t k = 0; k < 3; ++k) {
    planes.push_back(RandomMask(100, 200, CV_8UC1, 2, 10 + k));
    bytes.append(reinterpret_cast<const char*>(planes.back().data), planes.back().total());
  }
  std::vector<EncodedField> in = {
      {"masks", FieldKind::kInstanceMasks, bytes, false, "/d/a.json image id 1"},
      {"boxes", FieldKind::kBoxes,
       Floats({80, 20, 120, 60,   // kept
               40, 20, 64, 40,    // dropped
               50, 20, 70, 40}),  // kept
       false, ""}};
  std::vector<Field> out;
  ASSERT_TRUE(PrepareFields(in, g, {}, &out).ok());
  ASSERT_EQ(out[0].dtype, "|u1");
  ASSERT_EQ(out[0].shape, (std::vector<uint64_t>{2, 40, 40}));
  int from[2] = {0, 2};
  for (int k = 0; k < 2; ++k) {
    cv::Mat resized;
    cv::resize(planes[from[k]], resized, cv::Size(100, 50), 0, 0, cv::INTER_NEAREST);
    cv::Mat ref = resized(cv::Rect(30, 5, 40, 40)).clone();
    EXPECT_EQ(std::memcmp(out[0].data.data() + k * 1600, ref.data, 1600), 0) << k;
  }
  // Planes that are not one per box, or not of the image's size (even of
  // as many pixels), are errors naming the field and where it came from.
  in[0].bytes.resize(8 + 2 * 100 * 200);
  Status s = PrepareFields(in, g, {}, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("2 masks for 3 boxes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/d/a.json image id 1"), std::string::npos) << s.message();
  in[0].bytes.resize(8 + 3 * 100 * 200 + 7);
  s = PrepareFields(in, g, {}, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("200x100"), std::string::npos) << s.message();
  const uint32_t turned[2] = {200, 100};
  in[0].bytes.resize(8 + 3 * 100 * 200);
  std::memcpy(in[0].bytes.data(), turned, sizeof turned);
  s = PrepareFields(in, g, {}, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("masks are 100x200 (WxH) but its image is 200x100"), std::string::npos)
      << s.message();
}

TEST(FieldPrepare, NormalizedBoxesAreFractionsOfTheOrigin) {
  PrepareSpec spec;
  spec.resize_h = 50;
  spec.resize_w = 80;
  std::vector<Field> out;
  EncodedField b{"boxes", FieldKind::kBoxes, Floats({0.25f, 0.5f, 0.75f, 1.0f}), true, ""};
  ASSERT_TRUE(PrepareFields({b}, PlanPrepare(spec, 300, 400), {}, &out).ok());
  EXPECT_EQ(As<float>(out[0].data), (std::vector<float>{20, 25, 60, 50}));
}

TEST(FieldPrepare, ClassesNotMatchingTheBoxesAreAnError) {
  std::vector<Field> out;
  Status s = PrepareFields({{"boxes", FieldKind::kBoxes, Floats({0, 0, 1, 1}), false, ""},
                            {"classes", FieldKind::kClasses, Int64s({1, 2}), false, "/d/c"}},
                           PlanPrepare({}, 10, 10), {}, &out);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("2 classes for 1 boxes"), std::string::npos) << s.message();
}

TEST(FieldPrepare, GeometryOutsideTheImageIsRefused) {
  PrepareSpec spec;
  spec.crop_h = 20;
  spec.crop_w = 50;  // wider than the image: the image's own prepare refuses it too
  std::vector<Field> out;
  Status s = PrepareFields({MaskField(Png(RandomMask(30, 40, CV_8UC1, 3, 1)))},
                           PlanPrepare(spec, 30, 40), {}, &out);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(FieldPrepare, LabelAndBytesPassThrough) {
  std::vector<Field> out;
  ASSERT_TRUE(PrepareFields({{"label", FieldKind::kLabel, Int64s({42}), false, ""},
                             {"meta", FieldKind::kBytes, "{\"a\": 1}", false, ""}},
                            PlanPrepare({}, 10, 10), {}, &out)
                  .ok());
  EXPECT_EQ(out[0].dtype, "<i8");
  EXPECT_TRUE(out[0].shape.empty());
  EXPECT_EQ(As<int64_t>(out[0].data), (std::vector<int64_t>{42}));
  EXPECT_EQ(out[1].dtype, "|u1");
  EXPECT_EQ(out[1].shape, (std::vector<uint64_t>{8}));
  EXPECT_EQ(out[1].data, "{\"a\": 1}");
}

// A .npy as numpy.lib.format writes it (header padded to 64 bytes).
std::string Npy(int major, const std::string& dict, const std::string& data) {
  std::string h = dict;
  size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < pre - 8; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

TEST(Npy, VersionsDtypesAndShapesRoundTrip) {
  std::string f32 = Floats({1.5f, -2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    Field f;
    ASSERT_TRUE(
        ParseNpy(Npy(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32), &f)
            .ok());
    EXPECT_EQ(f.dtype, "<f4");
    EXPECT_EQ(f.shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(f.data, f32);
  }
  Field f;
  ASSERT_TRUE(
      ParseNpy(Npy(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }", "abcdef"), &f)
          .ok());
  EXPECT_EQ(f.dtype, ">i2");
  EXPECT_EQ(f.data, "abcdef");
  ASSERT_TRUE(
      ParseNpy(Npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", "12345678"), &f)
          .ok());
  EXPECT_TRUE(f.shape.empty());
  ASSERT_TRUE(
      ParseNpy(Npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 5), }", ""), &f).ok());
  EXPECT_EQ(f.shape, (std::vector<uint64_t>{0, 5}));
  ASSERT_TRUE(
      ParseNpy(Npy(1, "{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", "aaaabbbb"), &f)
          .ok());
  EXPECT_EQ(f.dtype, "<U2");
}

TEST(Npy, FortranOrderBecomesCOrder) {
  // A (2,3,2) array stored first index fastest: element (i,j,k) at
  // i + 2j + 6k holds 100i + 10j + k.
  std::vector<uint8_t> fortran(12), c(12);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) {
        fortran[i + 2 * j + 6 * k] = static_cast<uint8_t>(100 * i + 10 * j + k);
        c[(i * 3 + j) * 2 + k] = static_cast<uint8_t>(100 * i + 10 * j + k);
      }
  Field f;
  ASSERT_TRUE(ParseNpy(Npy(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 2), }",
                           std::string(fortran.begin(), fortran.end())),
                       &f)
                  .ok());
  EXPECT_EQ(f.data, std::string(c.begin(), c.end()));
}

TEST(Npy, BadFilesAreClearErrors) {
  struct Bad {
    std::string bytes, says;
  };
  std::vector<Bad> bad = {
      {"not numpy", "magic"},
      {Npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "12345678"), "object"},
      {Npy(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", "1234"),
       "structured"},
      {Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "1234"),
       "header says 8"},
      {Npy(1, "{'descr': '<f4', 'fortran_order': False}", ""), "lacks"},
      {Npy(1, "{'descr': '<q9', 'fortran_order': False, 'shape': (1,), }", "1"), "dtype"},
      {Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
       "too large"},
      {Npy(4, "{}", ""), "version 4"},
      {std::string("\x93NUMPY\x01\x00\xff\x00", 10), "cut short"},
  };
  for (const Bad& b : bad) {
    Field f;
    Status s = ParseNpy(b.bytes, &f);
    EXPECT_TRUE(s.IsInvalidArgument()) << b.says;
    EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
  }
  // Through PrepareFields the file is named.
  std::vector<Field> out;
  Status s = PrepareFields({{"depth", FieldKind::kArray, bad[1].bytes, false, "/d/x.npy"}},
                           PlanPrepare({}, 4, 4), {}, &out);
  EXPECT_NE(s.message().find("/d/x.npy"), std::string::npos) << s.message();
}

// A shape whose product overflows 128 bits to a few bytes: 4 * 5 * 13 *
// ... = 2^128 + 4 (4 * the factors of 2^126 + 1). With 4 data bytes the
// size check used to wrap to a match, and Fortran order then read the
// elements at strides of 2^60 bytes (SIGSEGV); C order and Fortran order
// are both refused now, naming the overflow.
TEST(Npy, ShapeWhoseProductOverflowsIsRefused) {
  const std::string shape = "(4, 5, 13, 29, 37, 109, 113, 1429, 14449, 40388473189, 118750098349)";
  for (const char* order : {"True", "False"}) {
    Field f;
    Status s = ParseNpy(Npy(1,
                            std::string("{'descr': '|u1', 'fortran_order': ") + order +
                                ", 'shape': " + shape + ", }",
                            "abcd"),
                        &f);
    EXPECT_TRUE(s.IsInvalidArgument()) << order << ": " << s.ToString();
    EXPECT_NE(s.message().find("overflows"), std::string::npos) << s.message();
  }
}

// A source of one generated JPEG and the fields given to it.
class FieldSource : public Source {
 public:
  // image: 30x40 of varied pixels unless given.
  explicit FieldSource(std::vector<EncodedField> fields, Image img = {})
      : fields_(std::move(fields)) {
    if (img.pixels.empty()) {
      img.Reset(30, 40, 3);
      for (size_t i = 0; i < img.bytes(); ++i) img.pixels[i] = static_cast<uint8_t>(i);
    }
    EXPECT_TRUE(EncodeJpeg(img, 95, &jpeg_).ok());
  }
  size_t size() const override { return 1; }
  Status Read(size_t, EncodedSample* out) const override {
    out->bytes = jpeg_;
    out->label = 3;
    out->fields = fields_;
    return Status::OK();
  }
  std::string Describe(size_t) const override { return "/d/images/a.jpg"; }
  const std::string& identity() const override { return jpeg_; }
  const std::string& uri() const override { return jpeg_; }
  const std::vector<EncodedField>& encoded_fields() const { return fields_; }

 private:
  std::vector<EncodedField> fields_;
  std::string jpeg_;
};

TEST(FieldPrepare, FetcherServesPreparedFields) {
  FieldSource src({MaskField(Png(RandomMask(30, 40, CV_8UC1, 4, 2))),
                   {"boxes", FieldKind::kBoxes, Floats({0, 0, 20, 10}), false, ""}});
  PrepareSpec spec;
  spec.resize_short = 15;  // 15x20: half size
  SampleFetcher f(&src, spec, nullptr, 0);
  FetchScratch scratch;
  CachedSample cs;
  ASSERT_TRUE(f.Fetch(0, &scratch, &cs).ok());
  std::vector<FieldView> views;
  ASSERT_EQ(cache_format::ParseFields(cs.fields, &views), "");
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].shape, (std::vector<uint64_t>{15, 20}));
  Field boxes = cache_format::ToField(views[1]);
  EXPECT_EQ(As<float>(boxes.data), (std::vector<float>{0, 0, 10, 5}));
}

TEST(FieldPrepare, PreparedMaskAgreesWithItsPreparedImage) {
  // A scene whose JPEG's colours are its mask's classes, prepared through
  // the fetcher with a DCT-scaled decode (64 * 2 <= 300 / 2) and a centre
  // crop: away from class edges image and mask tell the same class.
  const int H = 300, W = 400;
  cv::Mat mask(H, W, CV_8UC1, cv::Scalar(0));
  cv::rectangle(mask, cv::Rect(40, 30, 150, 120), cv::Scalar(1), cv::FILLED);
  cv::rectangle(mask, cv::Rect(220, 60, 140, 200), cv::Scalar(2), cv::FILLED);
  cv::circle(mask, cv::Point(110, 220), 55, cv::Scalar(3), cv::FILLED);
  const uint8_t colour[4] = {0, 80, 160, 240};
  Image img;
  img.Reset(H, W, 3);
  for (int i = 0; i < H * W; ++i) std::memset(&img.pixels[i * 3], colour[mask.data[i]], 3);
  FieldSource src({MaskField(Png(mask))}, img);
  PrepareSpec spec;
  spec.resize_short = 64;
  spec.crop_h = spec.crop_w = 56;
  SampleFetcher f(&src, spec, nullptr, 0);
  FetchScratch scratch;
  CachedSample cs;
  ASSERT_TRUE(f.Fetch(0, &scratch, &cs).ok());
  std::vector<FieldView> views;
  ASSERT_EQ(cache_format::ParseFields(cs.fields, &views), "");
  ASSERT_EQ(views[0].shape, (std::vector<uint64_t>{56, 56}));
  size_t clear = 0, agree = 0;
  for (int p = 0; p < 56 * 56; ++p) {
    for (int c = 0; c < 4; ++c) {
      if (std::abs(cs.pixels[p * 3] - colour[c]) > 6) continue;  // blended at an edge
      ++clear;
      agree += views[0].data[p] == c;
    }
  }
  ASSERT_GT(clear, 56u * 56 * 3 / 4);
  EXPECT_GE(agree, clear * 98 / 100) << agree << " of " << clear;
}

TEST(FieldPrepare, FieldsPreparedOnAMissAreStoredAndServedOnTheHit) {
  FieldSource src({MaskField(Png(RandomMask(30, 40, CV_8UC1, 4, 2))),
                   {"boxes", FieldKind::kBoxes, Floats({4, 2, 30, 20}), false, ""},
                   {"classes", FieldKind::kClasses, Int64s({5}), false, ""}});
  test::TempDir root;
  CacheOptions o;
  o.root = root.path();
  o.capacity_bytes = 1ull << 30;
  o.fill_write = FillWrite::kBuffered;
  auto e = CacheEntry::Open(o, test::FakeKey(1));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  PrepareSpec spec;
  spec.resize_short = 15;
  SampleFetcher f(&src, spec, e->get(), 0);
  FetchScratch scratch;
  CachedSample miss, hit;
  ASSERT_TRUE(f.Fetch(0, &scratch, &miss).ok());
  std::string prepared(miss.fields);
  ASSERT_FALSE(prepared.empty());
  ASSERT_TRUE((*e)->Sync().ok());
  FetchScratch scratch2;
  ASSERT_TRUE(f.Fetch(0, &scratch2, &hit).ok());
  EXPECT_EQ(f.stats().Snapshot()[Ctr::kCacheHits], 1u);
  EXPECT_EQ(std::string(hit.fields), prepared);
  // The byte counters count the fields as well as the pixels, on both paths.
  auto c = f.stats().Snapshot();
  EXPECT_EQ(c[Ctr::kCacheMissBytes], miss.bytes() + prepared.size());
  EXPECT_EQ(c[Ctr::kCacheHitBytes], hit.bytes() + prepared.size());
  uint64_t encoded = 0;
  for (const EncodedField& ef : src.encoded_fields()) encoded += ef.bytes.size();
  EXPECT_GT(c[Ctr::kOriginBytes], encoded);
}

TEST(FieldPrepare, FetcherNamesTheImageAndTheMaskAndCountsADecodeError) {
  FieldSource src({MaskField(Png(RandomMask(31, 40, CV_8UC1, 4, 2)), "/d/masks/a.png")});
  SampleFetcher f(&src, {}, nullptr, 0);
  FetchScratch scratch;
  CachedSample cs;
  Status s = f.Fetch(0, &scratch, &cs);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("/d/images/a.jpg"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/d/masks/a.png"), std::string::npos) << s.message();
  EXPECT_EQ(f.stats().Snapshot()[Ctr::kDecodeErrors], 1u);
}

}  // namespace
}  // namespace ssdfeed
