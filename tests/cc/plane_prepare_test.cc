// The prepare of a JPEG that shrinks resizes its YCbCr planes and converts
// only the target to RGB (image/jpeg_planes.h): what it changes, what it
// must keep (quality against an ideal shrink), and where it does not apply.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>
#include <string>

#include "ssdfeed/dataset.h"
#include "ssdfeed/image.h"

namespace ssdfeed {
namespace {

double Psnr(const Image& a, const Image& b) {
  EXPECT_EQ(a.bytes(), b.bytes());
  double se = 0;
  for (size_t i = 0; i < a.bytes() && i < b.bytes(); ++i)
    se += std::pow(double(a.pixels[i]) - b.pixels[i], 2);
  return se == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 * a.bytes() / se);
}

std::string Jpeg(const Image& img, int subsamp, int quality = 90) {
  tjhandle c = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(c, img.pixels.data(), img.width, 0, img.height, TJPF_RGB, &buf, &size,
                        subsamp, quality, 0),
            0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(c);
  return out;
}

// A photo-like image: make-dataset's scenes (colour fields, shapes,
// texture, sensor noise) at ImageNet's sizes, or smooth gradients.
Image Scene(uint64_t index, int min_side, int max_side) {
  Image img;
  int label = 0;
  EXPECT_TRUE(GenerateImage(40, index, 10, min_side, max_side, &img, &label).ok());
  return img;
}

Image Gradients(int h, int w) {
  Image img;
  img.Reset(h, w, 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(128 + 100 * std::sin(x / 23.0 + y / 61.0));
      p[1] = static_cast<uint8_t>(y * 255 / h);
      p[2] = static_cast<uint8_t>(128 + 90 * std::cos(std::hypot(x - w / 3.0, y - h / 2.0) / 30));
    }
  return img;
}

// What the prepare did before: the full RGB decode, then the resize.
Image ThroughRgb(const std::string& jpg, const PrepareSpec& spec) {
  Decoder dec;
  Image full, out;
  EXPECT_TRUE(dec.Decode(jpg, spec.gray, 0, 0, &full).ok());
  EXPECT_TRUE(PrepareDecoded(full, spec, &out).ok());
  return out;
}

// An ideal shrink of the original image: OpenCV's area average (the exact
// integral of the pixels each output pixel covers), then the crop.
Image AreaReference(const Image& full, const PrepareSpec& spec) {
  Image resized;
  PrepareGeometry g = PlanPrepare(spec, full.height, full.width);
  resized.Reset(g.resized_h, g.resized_w, 3);
  cv::Mat src(full.height, full.width, CV_8UC3, const_cast<uint8_t*>(full.pixels.data()));
  cv::Mat dst(g.resized_h, g.resized_w, CV_8UC3, resized.pixels.data());
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_AREA);
  Image out;
  out.Reset(g.out_h, g.out_w, 3);
  cv::Mat(dst, cv::Rect(g.crop_left, g.crop_top, g.out_w, g.out_h))
      .copyTo(cv::Mat(g.out_h, g.out_w, CV_8UC3, out.pixels.data()));
  return out;
}

Image Prepared(const std::string& jpg, const PrepareSpec& spec) {
  Decoder dec;
  Image out;
  EXPECT_TRUE(dec.DecodeAndPrepare(jpg, spec, &out).ok());
  return out;
}

PrepareSpec Short(int side, int crop = 0) {
  PrepareSpec s;
  s.resize_short = side;
  s.crop_h = s.crop_w = crop;
  return s;
}

// The bytes change (so the spec's text does), and they stay as close to an
// ideal shrink of the original image (OpenCV's area average) as the RGB
// route's were: within 0.2 dB on photo-like scenes, in every chroma layout
// the planes take, at odd sides; on smooth gradients,
// where both are above 45 dB, within 1 dB (the planes are rounded to 8 bits
// before the colour conversion, and chroma's rounding shows there).
TEST(PlanePrepare, AShrinkInThePlanesIsAsCloseToTheOriginalAsTheRgbRoute) {
  struct Case {
    Image img;
    int subsamp;
    PrepareSpec spec;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 4; ++i) cases.push_back({Scene(i, 333, 500), TJSAMP_420, Short(256)});
  cases.push_back({Scene(4, 375, 500), TJSAMP_422, Short(256, 224)});
  cases.push_back({Scene(5, 375, 500), TJSAMP_444, Short(224)});
  cases.push_back({Gradients(375, 500), TJSAMP_420, Short(256, 256)});
  cases.push_back({Gradients(333, 501), TJSAMP_440, Short(255)});  // odd sides
  for (const Case& c : cases) {
    std::string jpg = Jpeg(c.img, c.subsamp);
    Image planes = Prepared(jpg, c.spec), rgb = ThroughRgb(jpg, c.spec);
    Image ideal = AreaReference(c.img, c.spec);
    std::string what = std::to_string(c.img.height) + "x" + std::to_string(c.img.width) +
                       " subsamp " + std::to_string(c.subsamp);
    ASSERT_EQ(planes.height, rgb.height) << what;
    ASSERT_EQ(planes.width, rgb.width) << what;
    EXPECT_TRUE(planes.pixels != rgb.pixels) << what << ": still resized in RGB";
    double ours = Psnr(planes, ideal), before = Psnr(rgb, ideal);
    std::printf("%s: planes %.2f dB, RGB route %.2f dB against the original's area shrink\n",
                what.c_str(), ours, before);
    EXPECT_GT(ours, before - (before > 45 ? 1.0 : 0.2)) << what;
  }
  EXPECT_NE(Short(256).Canonical().find("jpeg=tj-dct248-islow-planes"), std::string::npos);
}

// Where the planes do not apply, the prepare is the RGB route's, byte for
// byte: grey output, an enlarging resize, no resize, and a source at least
// twice the target on both sides (decoded at a DCT scale, then resized).
TEST(PlanePrepare, GreyEnlargingUnresizedAndDctScaledPreparesKeepTheRgbRoute) {
  std::string jpg = Jpeg(Scene(9, 200, 240), TJSAMP_420);
  PrepareSpec grey = Short(128);
  grey.gray = true;
  for (const PrepareSpec& spec : {grey, Short(300), Short(0, 128)}) {
    Image a = Prepared(jpg, spec), b = ThroughRgb(jpg, spec);
    EXPECT_TRUE(a.pixels == b.pixels) << spec.Canonical();
  }
  std::string large = Jpeg(Scene(6, 600, 900), TJSAMP_420);
  PrepareSpec spec = Short(140);
  Decoder dec;
  Image scaled, b;
  ASSERT_TRUE(dec.Decode(large, false, 280, 280, &scaled).ok());
  ASSERT_LT(scaled.height, 600) << "not DCT-scaled";
  ASSERT_TRUE(PrepareDecoded(scaled, spec, &b).ok());
  EXPECT_TRUE(Prepared(large, spec).pixels == b.pixels);
}

// The sample's geometry (for its masks and boxes) is the planned one.
TEST(PlanePrepare, TheGeometryIsThePlannedOne) {
  std::string jpg = Jpeg(Scene(3, 333, 500), TJSAMP_420);
  Decoder dec;
  Image out;
  PrepareGeometry g;
  PrepareSpec spec = Short(256, 224);
  ASSERT_TRUE(dec.DecodeAndPrepare(jpg, spec, &out, &g).ok());
  int h = 0, w = 0, ss = 0, cs = 0;
  tjhandle d = tjInitDecompress();
  ASSERT_EQ(tjDecompressHeader3(d, reinterpret_cast<const unsigned char*>(jpg.data()), jpg.size(),
                                &w, &h, &ss, &cs),
            0);
  tjDestroy(d);
  PrepareGeometry want = PlanPrepare(spec, h, w);
  EXPECT_EQ(g.resized_h, want.resized_h);
  EXPECT_EQ(g.resized_w, want.resized_w);
  EXPECT_EQ(g.crop_top, want.crop_top);
  EXPECT_EQ(g.crop_left, want.crop_left);
  EXPECT_EQ(out.height, 224);
  EXPECT_EQ(out.width, 224);
}

}  // namespace
}  // namespace ssdfeed
