#include "ssdfeed/image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>

#include "image/augment.h"
#include "image/bilinear.h"
#include "image/flip.h"
#include "image/resample.h"
#include "ssdfeed/augment.h"
#include "ssdfeed/dataset.h"

namespace ssdfeed {
namespace {

double MeanAbsDiff(const Image& a, const Image& b) {
  EXPECT_EQ(a.bytes(), b.bytes());
  double sum = 0;
  for (size_t i = 0; i < a.bytes(); ++i) sum += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return sum / a.bytes();
}

// Normal halves and zero: what a normalised pixel becomes.
float HalfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  float mant = static_cast<float>(h & 0x3ff);
  float v = exp == 0 ? 0.f : std::ldexp(1.f + mant / 1024.f, exp - 15);
  return (h & 0x8000) ? -v : v;
}

Image Sample(int* label) {
  Image img;
  EXPECT_TRUE(GenerateImage(1, 3, 10, 300, 500, &img, label).ok());
  return img;
}

Image Smooth() {
  Image img;
  img.Reset(240, 320, 3);
  for (int y = 0; y < 240; ++y)
    for (int x = 0; x < 320; ++x) {
      uint8_t* p = &img.pixels[(y * 320 + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / 320);
      p[1] = static_cast<uint8_t>(y * 255 / 240);
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(x / 20.0));
    }
  return img;
}

TEST(Decode, JpegRoundTripIsClose) {
  Image img = Smooth();
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 95, &jpg).ok());
  Decoder dec;
  Image out;
  ASSERT_TRUE(dec.Decode(jpg, false, 0, 0, &out).ok());
  EXPECT_EQ(out.height, img.height);
  EXPECT_EQ(out.width, img.width);
  EXPECT_EQ(out.channels, 3);
  EXPECT_LT(MeanAbsDiff(img, out), 2.0);
}

TEST(Decode, GrayHasOneChannel) {
  int label;
  Image img = Sample(&label);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 90, &jpg).ok());
  Decoder dec;
  Image out;
  ASSERT_TRUE(dec.Decode(jpg, true, 0, 0, &out).ok());
  EXPECT_EQ(out.channels, 1);
  EXPECT_EQ(out.bytes(), static_cast<size_t>(img.height) * img.width);
}

TEST(Decode, DctScalingKeepsAtLeastTheMinimum) {
  Image img;
  img.Reset(800, 1000, 3);
  for (size_t i = 0; i < img.bytes(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 90, &jpg).ok());
  Decoder dec;
  Image out;
  ASSERT_TRUE(dec.Decode(jpg, false, 200, 250, &out).ok());
  EXPECT_EQ(out.height, 200);  // 1/4 scale exactly
  EXPECT_EQ(out.width, 250);
  ASSERT_TRUE(dec.Decode(jpg, false, 201, 250, &out).ok());
  EXPECT_GE(out.height, 201);
  EXPECT_LT(out.height, 800);
}

TEST(Decode, BadInputsAreCorruptionNotCrashes) {
  int label;
  Image img = Sample(&label);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 90, &jpg).ok());
  Decoder dec;
  Image out;
  EXPECT_TRUE(dec.Decode("", false, 0, 0, &out).IsCorruption());
  EXPECT_TRUE(dec.Decode("hello world", false, 0, 0, &out).IsCorruption());
  Status s = dec.Decode(jpg.substr(0, jpg.size() / 2), false, 0, 0, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(dec.Decode(jpg.substr(0, 100), false, 0, 0, &out).IsCorruption());
}

TEST(Decode, PixelLimitRefusesHugeImagesBeforeDecoding) {
  Image img;
  img.Reset(1000, 1000, 3);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 50, &jpg).ok());
  Decoder dec;
  dec.limits.max_pixels = 999999;
  Image out;
  Status s = dec.Decode(jpg, false, 0, 0, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds the decode limit"), std::string::npos);
}

TEST(Prepare, ResizeShortKeepsAspect) {
  int label;
  Image img;  // large enough that the decoder scales in the DCT domain
  ASSERT_TRUE(GenerateImage(1, 3, 10, 1000, 1200, &img, &label).ok());
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 90, &jpg).ok());
  PrepareSpec spec;
  spec.resize_short = 128;
  Decoder dec;
  Image out;
  ASSERT_TRUE(dec.DecodeAndPrepare(jpg, spec, &out).ok());
  EXPECT_EQ(std::min(out.height, out.width), 128);
  int eh, ew;
  ShortSideSize(img.height, img.width, 128, 0, &eh, &ew);
  EXPECT_EQ(out.height, eh);
  EXPECT_EQ(out.width, ew);
  // Against the uncompressed original downscaled, the DCT-scaled path is
  // about as good as a full decode followed by the same resize.
  Image full, via_full, truth;
  ASSERT_TRUE(dec.Decode(jpg, false, 0, 0, &full).ok());
  ASSERT_TRUE(PrepareDecoded(full, spec, &via_full).ok());
  // The reference: an exact area average of the uncompressed original.
  truth.Reset(out.height, out.width, 3);
  cv::resize(cv::Mat(img.height, img.width, CV_8UC3, img.pixels.data()),
             cv::Mat(out.height, out.width, CV_8UC3, truth.pixels.data()),
             cv::Size(out.width, out.height), 0, 0, cv::INTER_AREA);
  double err_dct = MeanAbsDiff(out, truth), err_full = MeanAbsDiff(via_full, truth);
  EXPECT_LT(err_dct, err_full + 1.0) << err_dct << " vs " << err_full;
  std::printf("mean abs error vs exact area average: DCT path %.2f, full decode %.2f\n", err_dct,
              err_full);
  Image scaled;
  ASSERT_TRUE(dec.Decode(jpg, false, 256, 256, &scaled).ok());
  EXPECT_LT(scaled.height, img.height) << "the DCT-scaling path was not exercised";
}

TEST(Prepare, MaxLongCapsTheLongerSide) {
  Image img;
  img.Reset(100, 400, 3);
  PrepareSpec spec;
  spec.resize_short = 80;
  spec.max_long = 200;
  Image out;
  ASSERT_TRUE(PrepareDecoded(img, spec, &out).ok());
  EXPECT_EQ(out.width, 200);
  EXPECT_EQ(out.height, 50);
}

TEST(Prepare, ExactResizeAndCenterCrop) {
  Image img;
  img.Reset(300, 400, 3);
  for (int y = 0; y < 300; ++y)
    for (int x = 0; x < 400; ++x)
      for (int c = 0; c < 3; ++c) img.pixels[(y * 400 + x) * 3 + c] = static_cast<uint8_t>(x / 2);
  PrepareSpec spec;
  spec.crop_h = 100;
  spec.crop_w = 100;
  Image out;
  ASSERT_TRUE(PrepareDecoded(img, spec, &out).ok());
  EXPECT_EQ(out.height, 100);
  EXPECT_EQ(out.pixels[0], 75);  // left edge at x=150
  spec.resize_h = 50;
  spec.resize_w = 60;
  Status s = PrepareDecoded(img, spec, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("larger than the resized image 50x60"), std::string::npos);
}

TEST(Prepare, ValidateAndCanonical) {
  PrepareSpec a, b;
  a.resize_short = 256;
  b.resize_short = 256;
  EXPECT_EQ(a.Canonical(), b.Canonical());
  b.gray = true;
  EXPECT_NE(a.Canonical(), b.Canonical());
  PrepareSpec bad;
  bad.resize_h = 10;
  EXPECT_FALSE(bad.Validate().ok());
  bad.resize_w = 10;
  bad.resize_short = 5;
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(Augment, ServedSampleShapeFollowsAugmentThenCropThenResize) {
  PrepareSpec p;
  AugmentSpec a;
  SampleShape s = ServedSampleShape(p, a);
  EXPECT_FALSE(s.fixed());
  EXPECT_EQ(s.channels, 3);
  p.resize_h = 40;
  p.resize_w = 50;
  s = ServedSampleShape(p, a);
  EXPECT_EQ(s.height, 40);
  EXPECT_EQ(s.width, 50);
  p.crop_h = p.crop_w = 32;
  p.gray = true;
  s = ServedSampleShape(p, a);
  EXPECT_EQ(s.height, 32);
  EXPECT_EQ(s.channels, 1);
  a.enabled = true;
  a.height = 24;
  a.width = 20;
  s = ServedSampleShape(p, a);
  EXPECT_EQ(s.height, 24);
  EXPECT_EQ(s.width, 20);
}

TEST(Prepare, JsonRoundTrip) {
  PrepareSpec a;
  a.resize_short = 256;
  a.max_long = 512;
  a.crop_h = 224;
  a.crop_w = 200;
  a.gray = true;
  Result<PrepareSpec> b = PrepareSpec::FromJson(a.ToJson());
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->Canonical(), a.Canonical());
  // A manifest's object also holds source keys: ignored here.
  Result<PrepareSpec> c = PrepareSpec::FromJson(R"({"resize_h":8,"resize_w":9,"image_key":"x"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->resize_h, 8);
  EXPECT_EQ(c->resize_w, 9);
  EXPECT_EQ(c->resize_short, 0);
}

TEST(Prepare, JsonErrorsSayWhatIsWrong) {
  Result<PrepareSpec> not_json = PrepareSpec::FromJson("[1,");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.status().code(), Status::Code::kInvalidArgument);
  Result<PrepareSpec> wrong_type = PrepareSpec::FromJson(R"({"crop_h":"big"})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("prepare spec"), std::string::npos);
  Result<PrepareSpec> invalid = PrepareSpec::FromJson(R"({"resize_h":8})");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("resize needs both"), std::string::npos);
}

// A manifest's prepare object may come from an import: sizes out of range
// were converted (a float past int's range: undefined behaviour) or accepted
// (a side no record can hold, allocated by every prepare).
TEST(Prepare, JsonSizesOutOfRangeAreRefusedByName) {
  for (const char* bad : {R"({"resize_short":1e300})", R"({"resize_short":256.5})",
                          R"({"crop_h":4294967297,"crop_w":4})", R"({"resize_short":-9e18})"}) {
    Result<PrepareSpec> r = PrepareSpec::FromJson(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("is not a size"), std::string::npos) << bad;
  }
  Result<PrepareSpec> huge = PrepareSpec::FromJson(R"({"resize_short":2000000000})");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("at most 65535"), std::string::npos);
  EXPECT_TRUE(PrepareSpec::FromJson(R"({"resize_short":65535})").ok());
}

// ResizeAntialiased skips a Gaussian whose sigma is under
// kIdentityBlurSigma because OpenCV's 8-bit kernel rounds it to the
// identity: the blur must leave every byte as it was, for noise (the worst
// case) in every channel. If an OpenCV release computes it differently,
// this fails and the threshold must be looked at again.
TEST(Resample, ABlurUnderTheThresholdSigmaIsTheIdentity) {
  cv::Mat noise(120, 160, CV_8UC3);
  cv::randu(noise, 0, 256);
  for (double sigma : {0.05, 0.1, 0.15, 0.2, 0.24, kIdentityBlurSigma - 1e-9}) {
    cv::Mat out;
    cv::GaussianBlur(noise, out, cv::Size(3, 3), sigma, sigma, cv::BORDER_REFLECT_101);
    EXPECT_EQ(cv::norm(noise, out, cv::NORM_INF), 0) << "sigma " << sigma;
  }
  // One axis blurred, the other under the threshold: a 1-tap kernel there
  // gives the same bytes as the 3-tap one it replaces.
  for (double sigma : {0.1, 0.24}) {
    cv::Mat three, one;
    cv::GaussianBlur(noise, three, cv::Size(7, 3), 1.0, sigma, cv::BORDER_REFLECT_101);
    cv::GaussianBlur(noise, one, cv::Size(7, 1), 1.0, sigma, cv::BORDER_REFLECT_101);
    EXPECT_EQ(cv::norm(three, one, cv::NORM_INF), 0) << "sigma " << sigma;
  }
  cv::Mat out;  // and it is not at 0.35: the check can fail
  cv::GaussianBlur(noise, out, cv::Size(3, 3), 0.35, 0.35, cv::BORDER_REFLECT_101);
  EXPECT_GT(cv::norm(noise, out, cv::NORM_INF), 0);
}

// A shrink by up to 1.5x (a RandomResizedCrop to 224 from a 256-px image)
// gives the same bytes as the blur-then-sample it skips.
TEST(Resample, SkippingTheIdentityBlurKeepsEveryByte) {
  cv::Mat src(256, 341, CV_8UC3);
  cv::randu(src, 0, 256);
  for (int side : {230, 250, 280, 300, 330}) {
    cv::Mat roi = src(cv::Rect(0, 0, side, 250)), got(224, 224, CV_8UC3), want;
    ResizeAntialiased(roi, got);
    double sx = (side / 224.0 - 1) / 2, sy = (250 / 224.0 - 1) / 2;
    cv::Mat blurred;
    cv::GaussianBlur(roi, blurred, cv::Size(3, 3), std::max(sx, 1e-3), std::max(sy, 1e-3),
                     cv::BORDER_REFLECT_101);
    cv::resize(blurred, want, got.size(), 0, 0, cv::INTER_LINEAR);
    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0) << side;
  }
}

// The bilinear kernel claims cv::resize(INTER_LINEAR)'s bytes, mirrored
// too (cv::flip after): random sizes (shrinks, enlargements, one pixel, 8x
// either way), both channel counts, each source a crop whose last row ends
// where its buffer does, so a load past the crop's row is a heap overflow
// under ASan. It may decline only a wide shrink or a source row under 16
// bytes (OpenCV then resizes).
TEST(Resample, TheBilinearKernelGivesOpenCvsBytes) {
  uint8_t probe = 0, out = 0;
  if (!ResizeBilinearU8(&probe, 1, 1, 1, 1, &out, 1, 1, 1))
    GTEST_SKIP() << "no AVX2 here: cv::resize itself is used";
  std::mt19937 rng(20261130);
  auto side = [&](int i) { return 1 + static_cast<int>(rng() % (i % 8 == 0 ? 9 : 400)); };
  auto scaled = [&](int s) {  // 0.35x to 4x
    return std::max(1, static_cast<int>(std::lround(s * (0.35 + (rng() % 1000) * 0.00365))));
  };
  int declined = 0;
  for (int i = 0; i < 800; ++i) {
    int c = i % 2 ? 3 : 1, sh = side(i), sw = side(i);
    bool any = i % 5 == 0;  // else within the usual factors
    int dh = any ? side(i + 1) : scaled(sh), dw = any ? side(i + 2) : scaled(sw);
    bool mirror = i % 3 == 0;
    int left = static_cast<int>(rng() % 5);
    size_t stride = static_cast<size_t>(sw + left) * c;
    std::vector<uint8_t> buf(stride * sh);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    cv::Mat src(sh, sw, CV_8UC(c), buf.data() + left * c, stride), want;
    cv::resize(src, want, cv::Size(dw, dh), 0, 0, cv::INTER_LINEAR);
    if (mirror) cv::flip(want, want, 1);
    cv::Mat got(dh, dw, CV_8UC(c));
    if (!ResizeBilinearU8(src.data, sh, sw, stride, c, got.data, dh, dw, got.step, mirror)) {
      ASSERT_TRUE(sw >= 2 * dw || sw * c < 16)
          << sh << "x" << sw << " -> " << dh << "x" << dw << ": neither a shrink nor a thin source";
      ++declined;
      continue;
    }
    ASSERT_EQ(cv::norm(got, want, cv::NORM_INF), 0)
        << sh << "x" << sw << " -> " << dh << "x" << dw << " c " << c << " mirror " << mirror;
  }
  EXPECT_LT(declined, 200);  // most shapes are the kernel's
  // A RandomResizedCrop's shapes are never declined.
  cv::Mat img(256, 311, CV_8UC3), got(224, 224, CV_8UC3);
  cv::randu(img, 0, 256);
  for (int w : {60, 150, 224, 311})
    EXPECT_TRUE(ResizeBilinearU8(img.data, 200, w, img.step, 3, got.data, 224, 224, got.step)) << w;
  SetBilinearPortableOnly(true);  // declines, and so ResizeAntialiased uses OpenCV
  EXPECT_FALSE(ResizeBilinearU8(&probe, 1, 1, 1, 1, &out, 1, 1, 1));
  SetBilinearPortableOnly(false);
  EXPECT_FALSE(ResizeBilinearU8(&probe, 1, 1, 1, 2, &out, 1, 1, 2)) << "2 channels: not ours";
}

// At a given scale (an odd JPEG's chroma plane resized at the image's
// scale), the kernel gives the top-left of what cv::resize makes when
// handed the same scale and no size.
TEST(Resample, TheBilinearKernelAtAGivenScaleGivesOpenCvsBytes) {
  uint8_t probe = 0, out = 0;
  if (!ResizeBilinearU8(&probe, 1, 1, 1, 1, &out, 1, 1, 1))
    GTEST_SKIP() << "no AVX2 here: cv::resize itself is used";
  std::mt19937 rng(20261205);
  for (int i = 0; i < 300; ++i) {
    int sw = 17 + static_cast<int>(rng() % 400), sh = 2 + static_cast<int>(rng() % 400);
    // A plane of ceil(n / 2) samples for an odd n-pixel side, resized to t.
    int nw = 2 * sw - 1, nh = 2 * sh - 1;
    int tw = std::max(1, static_cast<int>(nw * (0.3 + (rng() % 1000) * 0.0007)));
    int th = std::max(1, static_cast<int>(nh * (0.3 + (rng() % 1000) * 0.0007)));
    double ix = 2.0 * tw / nw, iy = 2.0 * th / nh;
    cv::Mat src(sh, sw, CV_8UC1), want, got(th, tw, CV_8UC1);
    cv::randu(src, 0, 256);
    cv::resize(src, want, cv::Size(), ix, iy, cv::INTER_LINEAR);
    ASSERT_GE(want.cols, tw);
    ASSERT_GE(want.rows, th);
    if (!ResizeBilinearU8AtScale(src.data, sh, sw, src.step, 1, got.data, th, tw, got.step, iy, ix))
      continue;  // a shrink past the kernel's reach: ResizeChroma uses OpenCV
    ASSERT_EQ(cv::norm(got, want(cv::Rect(0, 0, tw, th)), cv::NORM_INF), 0)
        << sh << "x" << sw << " -> " << th << "x" << tw;
  }
}

// ResizeAntialiased's mirror gives the bytes of a cv::flip after it, on
// every path: bilinear (the kernel, or OpenCV where it declines), the blur
// first, the box average, the plain copy.
TEST(Resample, AMirroredResizeIsTheResizeFlipped) {
  cv::Mat img(300, 410, CV_8UC3);
  cv::randu(img, 0, 256);
  for (bool portable : {false, true}) {
    SetBilinearPortableOnly(portable);
    for (cv::Size to : {cv::Size(224, 224), cv::Size(100, 90), cv::Size(205, 150),
                        cv::Size(410, 300), cv::Size(41, 30)}) {
      cv::Mat plain(to, CV_8UC3), mirrored(to, CV_8UC3), want;
      ResizeAntialiased(img, plain);
      ResizeAntialiased(img, mirrored, true);
      cv::flip(plain, want, 1);
      EXPECT_EQ(cv::norm(mirrored, want, cv::NORM_INF), 0) << to << " portable " << portable;
    }
  }
  SetBilinearPortableOnly(false);
}

// The SIMD mirror steps five pixels at a time and stops six short of the
// row's end: every width from 1 up, and every channel count, must come out
// as OpenCV's flip; each row's neighbours are untouched by its stores.
TEST(Flip, MirrorsLikeOpenCvAtEveryWidth) {
  for (int c : {1, 3, 4})
    for (int w = 1; w <= 70; ++w) {
      cv::Mat src(5, w, CV_8UC(c)), want;
      cv::randu(src, 0, 256);
      cv::flip(src, want, 1);
      // A guard byte on each side of dst catches a store outside it.
      std::vector<uint8_t> dst(src.total() * c + 2, 0xa5);
      FlipHorizontalInto(src.data, dst.data() + 1, 5, w, c);
      cv::Mat got(5, w, CV_8UC(c), dst.data() + 1);
      ASSERT_EQ(cv::norm(got, want, cv::NORM_INF), 0) << "w " << w << " c " << c;
      ASSERT_EQ(dst.front(), 0xa5);
      ASSERT_EQ(dst.back(), 0xa5);
    }
}

// A flip-only augment keeps the prepared shape; the scale-jitter crop is
// its crop size, as RandomResizedCrop.
TEST(Augment, FlipKeepsThePreparedShapeAndScaleJitterCropIsItsSize) {
  PrepareSpec p;
  AugmentSpec a;
  a.enabled = true;
  a.kind = AugmentKind::kFlip;
  EXPECT_FALSE(ServedSampleShape(p, a).fixed());
  p.crop_h = 40;
  p.crop_w = 50;
  EXPECT_EQ(ServedSampleShape(p, a).height, 40);
  EXPECT_EQ(ServedSampleShape(p, a).width, 50);
  a.kind = AugmentKind::kScaleJitterCrop;
  a.height = 30;
  a.width = 20;
  EXPECT_EQ(ServedSampleShape(p, a).height, 30);
  EXPECT_EQ(ServedSampleShape(p, a).width, 20);
}

// Flip(p): the whole image mirrored, with probability p over samples, the
// same for the same key; p 0 and 1 never and always.
TEST(Augment, FlipOnlyMirrorsTheWholeImageWithItsProbability) {
  AugmentSpec a;
  a.enabled = true;
  a.kind = AugmentKind::kFlip;
  for (double p : {0.0, 0.3, 1.0}) {
    a.flip_prob = p;
    int flips = 0;
    for (uint64_t id = 0; id < 2000; ++id) {
      CropBox b = SampleCrop(a, 37, 53, AugmentKey(7, 1, id));
      ASSERT_EQ(b.top, 0);
      ASSERT_EQ(b.left, 0);
      ASSERT_EQ(b.height, 37);
      ASSERT_EQ(b.width, 53);
      ASSERT_FALSE(b.windowed());
      ASSERT_EQ(b.flip, SampleCrop(a, 37, 53, AugmentKey(7, 1, id)).flip);
      flips += b.flip;
    }
    EXPECT_NEAR(flips / 2000.0, p, 0.04) << p;
  }
  cv::Mat img(37, 53, CV_8UC3);
  cv::randu(img, 0, 256);
  cv::Mat want;
  cv::flip(img, want, 1);
  std::vector<uint8_t> out(img.total() * 3), scratch;
  ASSERT_TRUE(RenderSample({img.data, 37, 53, 3}, {0, 0, 37, 53, true}, 37, 53, OutputSpec{},
                           out.data(), &scratch)
                  .ok());
  EXPECT_EQ(std::memcmp(out.data(), want.data, out.size()), 0);
}

// The segmentation reference's RandomResize(min, max) + flip + RandomCrop
// with padding, written out here with OpenCV: resize (the same resampler),
// flip, pad bottom and right with the fill, crop at torchvision's offset.
TEST(Augment, ScaleJitterCropIsResizeFlipPadThenCrop) {
  AugmentSpec a;
  a.enabled = true;
  a.kind = AugmentKind::kScaleJitterCrop;
  a.height = 64;
  a.width = 80;
  a.jitter_min = 30;
  a.jitter_max = 120;
  a.fill = 7;
  cv::Mat img(50, 70, CV_8UC3);
  cv::randu(img, 0, 256);
  int padded = 0, flipped = 0;
  std::vector<uint8_t> out(64 * 80 * 3), scratch;
  for (uint64_t id = 0; id < 60; ++id) {
    CropBox b = SampleCrop(a, 50, 70, AugmentKey(3, 0, id));
    ASSERT_TRUE(b.windowed());
    // Shorter side (50) drawn from [30, 120], the longer one int(s * 70 / 50).
    ASSERT_GE(b.resize_h, 30);
    ASSERT_LE(b.resize_h, 120);
    ASSERT_EQ(b.resize_w, static_cast<int>(b.resize_h * 70.0 / 50));
    cv::Mat resized(b.resize_h, b.resize_w, CV_8UC3), ref;
    ResizeAntialiased(img, resized);
    if (b.flip) cv::flip(resized, resized, 1);
    int ph = std::max(b.resize_h, 64), pw = std::max(b.resize_w, 80);
    cv::copyMakeBorder(resized, ref, 0, ph - b.resize_h, 0, pw - b.resize_w, cv::BORDER_CONSTANT,
                       cv::Scalar::all(7));
    int j = b.flip ? b.resize_w - b.left - b.width : b.left;  // the reference's offset
    ASSERT_GE(b.top, 0);
    ASSERT_LE(b.top, ph - 64);
    ASSERT_GE(j, 0);
    ASSERT_LE(j, pw - 80);
    cv::Mat want = ref(cv::Rect(j, b.top, 80, 64)).clone();
    ASSERT_TRUE(
        RenderSample({img.data, 50, 70, 3}, b, 64, 80, OutputSpec{}, out.data(), &scratch).ok());
    ASSERT_EQ(std::memcmp(out.data(), want.data, out.size()), 0)
        << "id " << id << " resized " << b.resize_h << "x" << b.resize_w << " flip " << b.flip;
    padded += ph > b.resize_h || pw > b.resize_w;
    flipped += b.flip;
  }
  EXPECT_GT(padded, 5);  // both cases were seen
  EXPECT_LT(padded, 55);
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, 50);
}

// RenderSample mirrors as it converts (or into dst for uint8 HWC): the same
// bytes as resizing, then cv::flip, then converting, in every output kind,
// for colour and gray, at an odd output width (the flip's scalar tail).
TEST(Augment, AFlippedRenderIsTheResizedCropMirrored) {
  constexpr int kH = 224, kW = 223;
  for (int c : {3, 1}) {
    cv::Mat img(256, 300, CV_8UC(c));
    cv::randu(img, 0, 256);
    PixelsView px{img.data, img.rows, img.cols, c};
    CropBox box{17, 31, 180, 200, true};
    cv::Mat resized(kH, kW, CV_8UC(c)), mirrored;
    ResizeAntialiased(img(cv::Rect(box.left, box.top, box.width, box.height)), resized);
    cv::flip(resized, mirrored, 1);
    CropBox plain = box;
    plain.flip = false;
    std::vector<uint8_t> scratch;
    for (DType dt : {DType::kUint8, DType::kFloat32, DType::kFloat16})
      for (Layout lay : {Layout::kNHWC, Layout::kNCHW}) {
        OutputSpec o;
        o.dtype = dt;
        o.layout = lay;
        o.mean = {0.4f, 0.5f, 0.6f};
        o.std = {0.2f, 0.25f, 0.3f};
        size_t plane = static_cast<size_t>(kH) * kW, n = plane * c * DTypeSize(dt);
        std::vector<uint8_t> flipped(n), want(n), unflipped(n);
        ASSERT_TRUE(RenderSample(px, box, kH, kW, o, flipped.data(), &scratch).ok());
        // The mirrored image rendered without a flip is what the flip must give.
        PixelsView mp{mirrored.data, kH, kW, c};
        ASSERT_TRUE(RenderSample(mp, {0, 0, kH, kW, false}, kH, kW, o, want.data(), &scratch).ok());
        std::string what = "c " + std::to_string(c) + " dtype " + std::to_string(int(dt)) +
                           " layout " + std::to_string(int(lay));
        EXPECT_EQ(flipped, want) << what;
        ASSERT_TRUE(RenderSample(px, plain, kH, kW, o, unflipped.data(), &scratch).ok());
        EXPECT_NE(unflipped, want) << what;  // the flip did something
        // And both against conversions written out here, pixel by pixel.
        for (bool flip : {false, true}) {
          const cv::Mat& ref = flip ? mirrored : resized;
          const std::vector<uint8_t>& got = flip ? flipped : unflipped;
          for (size_t p = 0; p < plane; p += 37)
            for (size_t k = 0; k < static_cast<size_t>(c); ++k) {
              size_t at = lay == Layout::kNCHW ? k * plane + p : p * c + k;
              uint8_t v = ref.data[p * c + k];
              float f = (v / 255.f - o.mean[k]) / o.std[k];
              if (dt == DType::kUint8) {
                ASSERT_EQ(got[at], v) << what << " flip " << flip;
              } else if (dt == DType::kFloat32) {
                float g;
                std::memcpy(&g, got.data() + at * 4, 4);
                ASSERT_NEAR(g, f, 1e-5) << what << " flip " << flip;
              } else {
                uint16_t half;
                std::memcpy(&half, got.data() + at * 2, 2);
                // Within half a unit in the last place of a half (11 bits).
                ASSERT_NEAR(HalfToFloat(half), f, std::abs(f) / 2048 + 1e-7)
                    << what << " flip " << flip;
              }
            }
        }
      }
  }
}

// The conversion after the resize is compiled twice (baseline x86-64 and
// AVX2, chosen at run time): a batch must not depend on which machine
// rendered it, so both give the same bytes for every output kind.
// What OpenCV throws (here: a crop outside the image) comes back as a
// Status naming the crop; it escaped as an exception before.
TEST(Augment, AnOpenCvFailureIsAStatusNotAnException) {
  cv::Mat img(20, 30, CV_8UC3, cv::Scalar::all(9));
  PixelsView px{img.data, img.rows, img.cols, 3};
  std::vector<uint8_t> dst(8 * 8 * 3), scratch;
  OutputSpec o;
  Status s = RenderSample(px, {5, 5, 40, 10, false}, 8, 8, o, dst.data(), &scratch);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("OpenCV"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("crop 40x10 of a 20x30 image"), std::string::npos) << s.ToString();
}

TEST(Augment, TheAvx2AndBaselineConversionsGiveTheSameBytes) {
  for (int c : {3, 1}) {
    cv::Mat img(200, 260, CV_8UC(c));
    cv::randu(img, 0, 256);
    PixelsView px{img.data, img.rows, img.cols, c};
    std::vector<uint8_t> scratch;
    for (DType dt : {DType::kUint8, DType::kFloat32, DType::kFloat16})
      for (Layout lay : {Layout::kNHWC, Layout::kNCHW})
        for (bool flip : {false, true}) {
          OutputSpec o;
          o.dtype = dt;
          o.layout = lay;
          if (dt != DType::kUint8) {
            o.mean = {0.485f, 0.456f, 0.406f};
            o.std = {0.229f, 0.224f, 0.225f};
          }
          CropBox box{11, 7, 150, 170, flip};
          size_t n = 97 * 101 * c * DTypeSize(dt);
          std::vector<uint8_t> best(n), base(n);
          ASSERT_TRUE(RenderSample(px, box, 97, 101, o, best.data(), &scratch).ok());
          SetRenderBaselineOnly(true);
          ASSERT_TRUE(RenderSample(px, box, 97, 101, o, base.data(), &scratch).ok());
          SetRenderBaselineOnly(false);
          EXPECT_EQ(best, base) << "c " << c << " dtype " << int(dt) << " layout " << int(lay)
                                << " flip " << flip;
        }
  }
}

}  // namespace
}  // namespace ssdfeed
