// The warm render of yuv420 records from their planes (image/yuv420_crop.h)
// and the bilinear window it resizes with (image/bilinear.h).
#include "image/yuv420_crop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "image/augment.h"
#include "image/bilinear.h"
#include "image/pixel_codec.h"
#include "image/yuv420.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/image.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// A make-dataset photo, prepared as the loader's records are (shorter side
// 256, no crop: 256 x 329).
Image Photo(uint64_t index) { return test::PreparedPhoto(index); }

std::string Planes(const Image& img, PixelCodecScratch* s) {
  std::string stored;
  EXPECT_TRUE(
      EncodePixels(RecordCodec::kYuv420, 0, img.pixels.data(), img.height, img.width, 3, &stored, s)
          .ok());
  return stored;
}

double Psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) se += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return se == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 * a.size() / se);
}

// Each box rendered three ways: the raw record's crop (the reference), the
// yuv420 record decoded then cropped (the route before), and cropped from
// its planes. Sampling chroma once, at the output's pixels, is closer to
// raw than upsampling it by the triangle filter and resampling that (34.2
// against 35.2 dB here): it must not be further.
TEST(Yuv420Crop, KeepsTheFidelityOfDecodingFirst) {
  PixelCodecScratch s;
  AugmentSpec a;
  a.enabled = true;
  OutputSpec o;
  std::vector<uint8_t> scratch, raw(224 * 224 * 3), before(raw.size()), planes(raw.size());
  std::vector<uint8_t> all_raw, all_before, all_planes;
  int taken = 0;
  for (int i = 0; i < 4; ++i) {
    Image img = Photo(i);
    std::string stored = Planes(img, &s);
    std::vector<uint8_t> decoded(img.bytes());
    ASSERT_TRUE(
        DecodePixels(RecordCodec::kYuv420, stored, img.height, img.width, 3, decoded.data(), &s)
            .ok());
    for (uint64_t k = 0; k < 40; ++k) {
      CropBox box = SampleCrop(a, img.height, img.width, AugmentKey(5, 0, i * 100 + k));
      if (!Yuv420CropApplies(img.height, img.width, 3, box, 224, 224)) continue;
      ++taken;
      ASSERT_TRUE(RenderSample({img.pixels.data(), img.height, img.width, 3}, box, 224, 224, o,
                               raw.data(), &scratch)
                      .ok());
      ASSERT_TRUE(RenderSample({decoded.data(), img.height, img.width, 3}, box, 224, 224, o,
                               before.data(), &scratch)
                      .ok());
      ASSERT_TRUE(RenderYuv420Sample(stored, img.height, img.width, box, 224, 224, o, planes.data(),
                                     &scratch)
                      .ok());
      all_raw.insert(all_raw.end(), raw.begin(), raw.end());
      all_before.insert(all_before.end(), before.begin(), before.end());
      all_planes.insert(all_planes.end(), planes.begin(), planes.end());
    }
  }
  EXPECT_GT(taken, 100) << "most RandomResizedCrop boxes of a 256-short record take the planes";
  double p_before = Psnr(all_raw, all_before), p_planes = Psnr(all_raw, all_planes);
  std::printf("%d crops: decoded first %.2f dB, from the planes %.2f dB against raw's crops\n",
              taken, p_before, p_planes);
  EXPECT_GT(p_planes, p_before);
}

// The whole record at its own size is its decode but for rounding (the
// triangle filter's weights are bilinear ones at quarter positions: the
// two round differently), so a box of the output's size is left to the
// decode; and a mirrored crop is the crop mirrored.
TEST(Yuv420Crop, TheWholeRecordIsItsDecodeAndAFlipIsAMirror) {
  PixelCodecScratch s;
  Image img = Photo(1);
  std::string stored = Planes(img, &s);
  std::vector<uint8_t> decoded(img.bytes()), got(img.bytes());
  ASSERT_TRUE(
      DecodePixels(RecordCodec::kYuv420, stored, img.height, img.width, 3, decoded.data(), &s)
          .ok());
  CropBox whole{0, 0, img.height, img.width, false};
  EXPECT_FALSE(Yuv420CropApplies(img.height, img.width, 3, whole, img.height, img.width));
  EXPECT_FALSE(Yuv420CropApplies(img.height, img.width, 3, {1, 3, 200, 200, true}, 200, 200));
  ASSERT_TRUE(
      CropYuv420(stored, img.height, img.width, whole, img.height, img.width, got.data()).ok());
  int worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - decoded[i]));
  EXPECT_LE(worst, 3);
  EXPECT_GT(Psnr(got, decoded), 50.0);

  for (CropBox box : {CropBox{3, 5, 151, 187, false}, CropBox{0, 1, 256, 300, false},
                      CropBox{1, 2, 100, 97, false}}) {
    for (int ow : {224, 223}) {
      std::vector<uint8_t> plain(224 * ow * 3), mirrored(plain.size());
      box.flip = false;
      ASSERT_TRUE(CropYuv420(stored, img.height, img.width, box, 224, ow, plain.data()).ok());
      box.flip = true;
      ASSERT_TRUE(CropYuv420(stored, img.height, img.width, box, 224, ow, mirrored.data()).ok());
      for (int y = 0; y < 224; ++y)
        for (int x = 0; x < ow; ++x)
          for (int c = 0; c < 3; ++c)
            ASSERT_EQ(mirrored[(y * ow + x) * 3 + c], plain[(y * ow + ow - 1 - x) * 3 + c])
                << box.left << " to " << ow << ": " << y << "," << x;
    }
  }
}

// Where each output pixel samples chroma: Y and Cr flat, Cb a ramp of 3
// per chroma column (Cb = 64 + 3 j), so Cb, read back from B (B - Y =
// 1.772 (Cb - 128), rounded), is 64 + 3 times the chroma coordinate the
// pixel maps to: left / 2 + (d + 0.5) * bw / (2 out_w) - 0.5, clamped to the
// plane. Half a chroma sample off is 1.5 in Cb; the tolerance is 1. The
// same with the flip, read from the mirrored column.
TEST(Yuv420Crop, ChromaIsSampledWhereItsSamplesSit) {
  const int h = 40, w = 79;  // chroma 20 x 40, the last column half a block
  Yuv420Layout l = Yuv420Of(h, w);
  std::string planes(l.total(), '\0');
  std::fill(planes.begin(), planes.begin() + l.y_bytes, static_cast<char>(128));
  for (size_t r = 0; r < l.chroma_h; ++r)
    for (size_t j = 0; j < l.chroma_w; ++j) {
      planes[l.y_bytes + r * l.chroma_w + j] = static_cast<char>(64 + 3 * j);
      planes[l.y_bytes + l.chroma_bytes() + r * l.chroma_w + j] = static_cast<char>(128);
    }
  for (CropBox box : {CropBox{3, 5, 30, 51, false}, CropBox{0, 0, 35, 79, false},
                      CropBox{7, 28, 33, 51, true}, CropBox{2, 1, 17, 40, true}}) {
    const int oh = 24, ow = 60;
    ASSERT_TRUE(Yuv420CropApplies(h, w, 3, box, oh, ow));
    std::vector<uint8_t> rgb(oh * ow * 3);
    ASSERT_TRUE(CropYuv420(planes, h, w, box, oh, ow, rgb.data()).ok());
    for (int d = 0; d < ow; ++d) {
      double at = box.left / 2.0 + (d + 0.5) * box.width / (2.0 * ow) - 0.5;
      at = std::clamp(at, 0.0, static_cast<double>(l.chroma_w - 1));
      int x = box.flip ? ow - 1 - d : d;
      for (int y = 0; y < oh; ++y) {
        const uint8_t* p = &rgb[(y * ow + x) * 3];
        double cb = 128 + (p[2] - 128) / 1.772;
        ASSERT_NEAR(cb, 64 + 3 * at, 1.0) << "box left " << box.left << " width " << box.width
                                          << (box.flip ? " flipped" : "") << ", column " << d;
        ASSERT_NEAR(p[0], 128, 1) << "Cr and Y are flat";
      }
    }
  }
}

// The 4:4:4 conversion with AVX2 is the one pixel by pixel, bit for bit,
// over every Y, Cb and Cr extreme and random values in between.
TEST(Yuv420Crop, TheConversionIsTheSameOnEveryRoute) {
  std::mt19937 rng(3);
  for (size_t n : {size_t{31}, size_t{32}, size_t{33}, size_t{1000}, size_t{50176}}) {
    std::vector<uint8_t> y(n), cb(n), cr(n);
    for (size_t i = 0; i < n; ++i) {
      y[i] = i < 8 ? (i & 1) * 255 : static_cast<uint8_t>(rng());
      cb[i] = i < 8 ? ((i >> 1) & 1) * 255 : static_cast<uint8_t>(rng());
      cr[i] = i < 8 ? ((i >> 2) & 1) * 255 : static_cast<uint8_t>(rng());
    }
    std::vector<uint8_t> fast(3 * n), slow(3 * n);
    Ycc444ToRgb(y.data(), cb.data(), cr.data(), n, fast.data());
    SetYuv420PortableOnly(true);
    Ycc444ToRgb(y.data(), cb.data(), cr.data(), n, slow.data());
    SetYuv420PortableOnly(false);
    ASSERT_EQ(fast, slow) << n << " pixels";
  }
}

TEST(Yuv420Crop, AppliesOnlyWhereTheCropIsBilinear) {
  CropBox box{0, 0, 200, 200, false};
  EXPECT_TRUE(Yuv420CropApplies(256, 320, 3, box, 224, 224));
  EXPECT_FALSE(Yuv420CropApplies(256, 320, 1, box, 224, 224)) << "gray";
  EXPECT_TRUE(Yuv420CropApplies(256, 320, 3, box, 224, 223)) << "odd width";
  EXPECT_FALSE(Yuv420CropApplies(256, 320, 3, {0, 0, 256, 320, false}, 128, 160))
      << "a shrink by 2: a box average";
  EXPECT_FALSE(Yuv420CropApplies(256, 320, 3, {0, 0, 256, 320, false}, 150, 150))
      << "a shrink by 1.7: blurred first";
  EXPECT_FALSE(Yuv420CropApplies(256, 320, 3, {0, 100, 200, 240, false}, 224, 224))
      << "past the right edge";
  CropBox window{0, 0, 224, 224, false};
  window.resize_h = 300, window.resize_w = 300;
  EXPECT_FALSE(Yuv420CropApplies(256, 320, 3, window, 224, 224)) << "scale jitter";
}

// The window's AVX2 and value-by-value routes give the same bytes, at
// fractional offsets, mirrored or not, on rows narrower than one load; at
// offset 0 they are ResizeBilinearU8AtScale's bytes.
TEST(BilinearWindow, SameBytesOnEveryRouteAndTheKernelsAtOffsetZero) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    int sh = 4 + rng() % 150, sw = 4 + rng() % 170;
    std::vector<uint8_t> src(static_cast<size_t>(sh) * sw);
    for (auto& v : src) v = static_cast<uint8_t>(rng());
    int dh = 2 + rng() % 120, dw = 2 + rng() % 120;
    BilinearWindow win{dh / (sh * (0.6 + (rng() % 100) / 100.0)),
                       dw / (sw * (0.6 + (rng() % 100) / 100.0)), (rng() % 9) / 2.0,
                       (rng() % 9) / 2.0};
    bool mirror = trial % 2;
    std::vector<uint8_t> avx(static_cast<size_t>(dh) * dw), portable(avx.size());
    ResizeBilinearU8Window(src.data(), sh, sw, sw, avx.data(), dh, dw, dw, win, mirror);
    SetBilinearPortableOnly(true);
    ResizeBilinearU8Window(src.data(), sh, sw, sw, portable.data(), dh, dw, dw, win, mirror);
    SetBilinearPortableOnly(false);
    ASSERT_EQ(avx, portable) << sh << "x" << sw << " -> " << dh << "x" << dw;
    win.offset_x = win.offset_y = 0;
    std::vector<uint8_t> kernel(avx.size());
    if (!ResizeBilinearU8AtScale(src.data(), sh, sw, sw, 1, kernel.data(), dh, dw, dw,
                                 win.inv_scale_y, win.inv_scale_x, mirror))
      continue;  // no AVX2 here, or a shape the kernel leaves to OpenCV
    ResizeBilinearU8Window(src.data(), sh, sw, sw, avx.data(), dh, dw, dw, win, mirror);
    ASSERT_EQ(avx, kernel) << sh << "x" << sw << " -> " << dh << "x" << dw;
  }
}

}  // namespace
}  // namespace ssdfeed
