// The record codecs (src/image/pixel_codec.h): round trips, zstd bit-exact,
// jpeg equal in fidelity to TurboJPEG's own round trip, and damaged bytes
// refused as Corruption.
#include "image/pixel_codec.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "image/yuv420.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// A make-dataset photo (colour fields, shapes, texture, noise), prepared to
// 256 px the way a cache entry is.
Image Photo(uint64_t index, bool gray = false) { return test::PreparedPhoto(index, 256, gray); }

double Psnr(const uint8_t* a, const uint8_t* b, size_t n) {
  double se = 0;
  for (size_t i = 0; i < n; ++i) se += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return se == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 * n / se);
}

// TurboJPEG's own round trip at the same quality and subsampling.
std::vector<uint8_t> TurboRoundTrip(const Image& img, int quality) {
  tjhandle c = tjInitCompress(), d = tjInitDecompress();
  int pf = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  int samp = img.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  unsigned char* jpg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(c, img.pixels.data(), img.width, 0, img.height, pf, &jpg, &size, samp,
                        quality, 0),
            0);
  std::vector<uint8_t> out(img.bytes());
  EXPECT_EQ(tjDecompress2(d, jpg, size, out.data(), img.width, 0, img.height, pf, 0), 0);
  tjFree(jpg);
  tjDestroy(c);
  tjDestroy(d);
  return out;
}

std::string Encode(RecordCodec codec, const Image& img, PixelCodecScratch* s, int quality = 90) {
  std::string out;
  EXPECT_TRUE(
      EncodePixels(codec, quality, img.pixels.data(), img.height, img.width, img.channels, &out, s)
          .ok());
  return out;
}

TEST(PixelCodec, ZstdIsBitExactAndSmaller) {
  PixelCodecScratch s;
  for (int i = 0; i < 3; ++i) {
    for (bool gray : {false, true}) {
      Image img = Photo(i, gray);
      std::string stored = Encode(RecordCodec::kZstd, img, &s);
      EXPECT_LT(stored.size(), img.bytes() * 0.9);
      std::vector<uint8_t> back(img.bytes());
      ASSERT_TRUE(DecodePixels(RecordCodec::kZstd, stored, img.height, img.width, img.channels,
                               back.data(), &s)
                      .ok());
      EXPECT_EQ(back, img.pixels);
    }
  }
}

TEST(PixelCodec, ZstdRoundTripsOddShapes) {
  PixelCodecScratch s;
  for (auto [h, w, c] : {std::tuple{1, 1, 1}, {1, 7, 3}, {9, 1, 3}, {5, 3, 4}, {33, 17, 2}}) {
    Image img;
    img.Reset(h, w, c);
    for (size_t k = 0; k < img.bytes(); ++k) img.pixels[k] = static_cast<uint8_t>(k * 37 + 11);
    std::string stored = Encode(RecordCodec::kZstd, img, &s);
    std::vector<uint8_t> back(img.bytes());
    ASSERT_TRUE(DecodePixels(RecordCodec::kZstd, stored, h, w, c, back.data(), &s).ok());
    EXPECT_EQ(back, img.pixels) << h << "x" << w << "x" << c;
  }
}

TEST(PixelCodec, JpegMatchesTurboJpegsOwnRoundTrip) {
  PixelCodecScratch s;
  for (bool gray : {false, true}) {
    for (int quality : {50, 90}) {
      Image img = Photo(3, gray);
      std::string stored = Encode(RecordCodec::kJpeg, img, &s, quality);
      // 4:2:0 halves colour's share; gray has none to halve.
      EXPECT_LT(stored.size(), img.bytes() / (gray ? 2 : 4));
      std::vector<uint8_t> back(img.bytes());
      ASSERT_TRUE(DecodePixels(RecordCodec::kJpeg, stored, img.height, img.width, img.channels,
                               back.data(), &s)
                      .ok());
      std::vector<uint8_t> turbo = TurboRoundTrip(img, quality);
      double ours = Psnr(img.pixels.data(), back.data(), img.bytes());
      double theirs = Psnr(img.pixels.data(), turbo.data(), img.bytes());
      EXPECT_NEAR(ours, theirs, 0.5) << "gray " << gray << " q" << quality;
      EXPECT_GT(ours, 25.0);
    }
  }
}

TEST(PixelCodec, JpegRefusesOtherChannelCountsAndQualities) {
  PixelCodecScratch s;
  Image img;
  img.Reset(8, 8, 4);
  std::string out;
  EXPECT_TRUE(EncodePixels(RecordCodec::kJpeg, 90, img.pixels.data(), 8, 8, 4, &out, &s)
                  .IsInvalidArgument());
  img.Reset(8, 8, 3);
  EXPECT_TRUE(EncodePixels(RecordCodec::kJpeg, 0, img.pixels.data(), 8, 8, 3, &out, &s)
                  .IsInvalidArgument());
  EXPECT_TRUE(out.empty());
}

TEST(PixelCodec, RawCopiesAndChecksItsLength) {
  PixelCodecScratch s;
  Image img = Photo(1);
  std::string stored = Encode(RecordCodec::kRaw, img, &s);
  ASSERT_EQ(stored.size(), img.bytes());
  std::vector<uint8_t> back(img.bytes());
  ASSERT_TRUE(DecodePixels(RecordCodec::kRaw, stored, 256, 256, 3, back.data(), &s).ok());
  EXPECT_EQ(back, img.pixels);
  EXPECT_TRUE(DecodePixels(RecordCodec::kRaw, std::string_view(stored).substr(1), 256, 256, 3,
                           back.data(), &s)
                  .IsCorruption());
}

TEST(PixelCodec, NoPixelsStoreNothing) {
  PixelCodecScratch s;
  for (RecordCodec codec :
       {RecordCodec::kRaw, RecordCodec::kZstd, RecordCodec::kJpeg, RecordCodec::kYuv420}) {
    std::string out;
    ASSERT_TRUE(EncodePixels(codec, 90, nullptr, 0, 0, 0, &out, &s).ok());
    EXPECT_TRUE(out.empty());
    EXPECT_TRUE(DecodePixels(codec, "", 0, 0, 0, nullptr, &s).ok());
    EXPECT_TRUE(DecodePixels(codec, "x", 0, 0, 0, nullptr, &s).IsCorruption());
  }
}

// Every single-byte flip and every truncation is Corruption (jpeg by its
// trailer) or, for zstd, decodes to the very same pixels (its content
// checksum: a flip of a bit the format ignores changes nothing). Never a
// crash, never other pixels.
TEST(PixelCodec, EveryDamagedByteIsCorruption) {
  PixelCodecScratch s;
  Image img = Photo(2);
  img.Reset(64, 48, 3);  // the photo's first rows: small enough to flip every byte
  for (RecordCodec codec : {RecordCodec::kZstd, RecordCodec::kJpeg}) {
    std::string stored = Encode(codec, img, &s);
    std::vector<uint8_t> back(img.bytes());
    for (size_t at = 0; at < stored.size(); ++at) {
      std::string bad = stored;
      bad[at] = static_cast<char>(bad[at] ^ (1 << (at % 8)));
      Status st = DecodePixels(codec, bad, 64, 48, 3, back.data(), &s);
      bool same = codec == RecordCodec::kZstd && st.ok() && back == img.pixels;
      ASSERT_TRUE(st.IsCorruption() || same)
          << "codec " << int(codec) << " byte " << at << ": " << st.ToString();
    }
    for (size_t len = 0; len < stored.size(); len += 1 + len / 8) {
      Status st =
          DecodePixels(codec, std::string_view(stored).substr(0, len), 64, 48, 3, back.data(), &s);
      ASSERT_TRUE(st.IsCorruption()) << "codec " << int(codec) << " length " << len;
    }
    EXPECT_TRUE(DecodePixels(codec, stored, 64, 47, 3, back.data(), &s).IsCorruption());
    EXPECT_TRUE(DecodePixels(codec, stored + "x", 64, 48, 3, back.data(), &s).IsCorruption());
    ASSERT_TRUE(DecodePixels(codec, stored, 64, 48, 3, back.data(), &s).ok());
  }
}

TEST(PixelCodec, ForeignCodecIsCorruption) {
  PixelCodecScratch s;
  Image img = Photo(4);
  std::vector<uint8_t> back(img.bytes());
  std::string z = Encode(RecordCodec::kZstd, img, &s);
  std::string j = Encode(RecordCodec::kJpeg, img, &s);
  EXPECT_TRUE(DecodePixels(RecordCodec::kJpeg, z, 256, 256, 3, back.data(), &s).IsCorruption());
  EXPECT_TRUE(DecodePixels(RecordCodec::kZstd, j, 256, 256, 3, back.data(), &s).IsCorruption());
  EXPECT_TRUE(DecodePixels(RecordCodec::kJpeg, j, 256, 256, 1, back.data(), &s).IsCorruption());
  EXPECT_TRUE(
      DecodePixels(static_cast<RecordCodec>(7), z, 256, 256, 3, back.data(), &s).IsCorruption());
}

// yuv420's arithmetic is the format (docs/cache-format.md, "yuv420"): a
// 3 x 3 image (odd sides: the chroma blocks of the last row and column
// count it twice) gives these planes, written from the documented formulas,
// and decodes to these pixels (chroma upsampled by the triangle filter: the
// gray corner takes some of its neighbours' colour).
TEST(PixelCodec, Yuv420GoldenPlanesAndBack) {
  const uint8_t rgb[27] = {255, 0,   0,  0,  255, 0,   0,  0,   255, 255, 255, 255, 0, 0,
                           0,   128, 64, 32, 10,  200, 30, 250, 250, 5,   90,  90,  90};
  const uint8_t planes[17] = {0x4c, 0x96, 0x1d, 0xff, 0x00, 0x4f, 0x7c, 0xde, 0x5a,  // Y
                              0x60, 0xb2, 0x28, 0x80,                                // Cb
                              0x85, 0x87, 0x61, 0x80};                               // Cr
  const uint8_t back_want[27] = {83, 83, 19, 158, 150, 131, 39, 14,  82,  249, 255, 173, 0, 10,
                                 0,  83, 71, 109, 93,  165, 0,  200, 251, 130, 84,  96,  74};
  PixelCodecScratch s;
  std::string stored;
  ASSERT_TRUE(EncodePixels(RecordCodec::kYuv420, 90, rgb, 3, 3, 3, &stored, &s).ok());
  EXPECT_EQ(stored, std::string(reinterpret_cast<const char*>(planes), sizeof planes));
  std::vector<uint8_t> back(27);
  ASSERT_TRUE(DecodePixels(RecordCodec::kYuv420, stored, 3, 3, 3, back.data(), &s).ok());
  EXPECT_EQ(back, std::vector<uint8_t>(back_want, back_want + 27));
}

// The codec decodes in one AVX2 pass where the CPU has it, else with
// UpsampleChroma and TurboJPEG's SIMD conversion; every byte of either must
// be what the documented arithmetic (Yuv420ToRgb, per pixel) gives, for
// any planes and odd sides (widths on either side of the 32-pixel steps).
TEST(PixelCodec, Yuv420DecodeIsTheDocumentedArithmetic) {
  PixelCodecScratch s;
  uint32_t x = 12345;
  for (bool portable : {false, true}) {
    SetYuv420PortableOnly(portable);
    for (auto [h, w] : {std::pair{1, 1},
                        {1, 6},
                        {2, 7},
                        {9, 11},
                        {33, 64},
                        {3, 31},
                        {4, 32},
                        {5, 33},
                        {6, 63},
                        {7, 65},
                        {17, 97},
                        {255, 255},
                        {256, 341}}) {
      std::string planes(Yuv420StoredBytes(h, w, 3), '\0');
      for (char& b : planes) b = static_cast<char>((x = x * 1664525 + 1013904223) >> 24);
      std::vector<uint8_t> got(size_t(h) * w * 3), want(got.size());
      ASSERT_TRUE(DecodePixels(RecordCodec::kYuv420, planes, h, w, 3, got.data(), &s).ok());
      Yuv420ToRgb(reinterpret_cast<const uint8_t*>(planes.data()), h, w, want.data());
      EXPECT_EQ(got, want) << h << "x" << w << (portable ? " portable" : " avx2");
    }
  }
  SetYuv420PortableOnly(false);
}

// Gray stays gray (the coefficients of Y sum to 1, of Cb and Cr to 0), and
// a one-channel image is stored as it is: both round trip exactly.
TEST(PixelCodec, Yuv420GrayRoundTripsExactly) {
  PixelCodecScratch s;
  for (int c : {1, 3}) {
    Image img;
    img.Reset(7, 5, c);
    for (size_t k = 0; k < img.bytes(); k += c)
      for (int j = 0; j < c; ++j) img.pixels[k + j] = static_cast<uint8_t>(k * 29 / c);
    std::string stored = Encode(RecordCodec::kYuv420, img, &s);
    EXPECT_EQ(stored.size(), c == 1 ? 35u : 35u + 2 * 4 * 3);
    std::vector<uint8_t> back(img.bytes());
    ASSERT_TRUE(DecodePixels(RecordCodec::kYuv420, stored, 7, 5, c, back.data(), &s).ok());
    EXPECT_EQ(back, img.pixels) << c << " channels";
  }
}

// The fidelity docs/cache-format.md states: only chroma is lost, at half
// raw's bytes. make-dataset's photos (saturated colour fields with sharp
// edges: the hardest case for half-resolution chroma) keep 32.5-33.6 dB
// with the triangle filter's upsampling (30.6-31.7 with nearest, which
// this bound refuses), at least 0.5 dB above what jpeg q90 keeps of the
// same images.
TEST(PixelCodec, Yuv420HalvesPhotosAboveJpegQ90) {
  PixelCodecScratch s;
  for (int i = 0; i < 4; ++i) {
    Image img = Photo(i);
    std::string stored = Encode(RecordCodec::kYuv420, img, &s);
    EXPECT_EQ(stored.size(), img.bytes() / 2);
    std::vector<uint8_t> back(img.bytes()), jpeg(img.bytes());
    ASSERT_TRUE(DecodePixels(RecordCodec::kYuv420, stored, img.height, img.width, img.channels,
                             back.data(), &s)
                    .ok());
    ASSERT_TRUE(DecodePixels(RecordCodec::kJpeg, Encode(RecordCodec::kJpeg, img, &s), img.height,
                             img.width, img.channels, jpeg.data(), &s)
                    .ok());
    double psnr = Psnr(img.pixels.data(), back.data(), img.bytes());
    double q90 = Psnr(img.pixels.data(), jpeg.data(), img.bytes());
    std::printf("photo %d: yuv420 %.2f dB against raw, jpeg q90 %.2f dB\n", i, psnr, q90);
    EXPECT_GE(psnr, 32.0) << "photo " << i;
    EXPECT_GT(psnr, q90 + 0.5) << "photo " << i;
  }
}

TEST(PixelCodec, Yuv420RefusesOtherLengthsAndChannels) {
  PixelCodecScratch s;
  Image img = Photo(5);
  std::string stored = Encode(RecordCodec::kYuv420, img, &s);
  std::vector<uint8_t> back(img.bytes());
  const std::string longer = stored + "x";
  for (std::string_view bad : {std::string_view(stored).substr(1), std::string_view(longer)})
    EXPECT_TRUE(
        DecodePixels(RecordCodec::kYuv420, bad, 256, 256, 3, back.data(), &s).IsCorruption());
  EXPECT_TRUE(
      DecodePixels(RecordCodec::kYuv420, stored, 256, 255, 3, back.data(), &s).IsCorruption());
  Status two = DecodePixels(RecordCodec::kYuv420, stored, 256, 256, 2, back.data(), &s);
  EXPECT_TRUE(two.IsCorruption()) << two.ToString();
  std::string out;
  EXPECT_TRUE(
      EncodePixels(RecordCodec::kYuv420, 90, back.data(), 8, 8, 4, &out, &s).IsInvalidArgument());
  EXPECT_TRUE(out.empty());
}

// Raw entries keep their names and manifests: the canonical text and JSON
// of a raw spec are what they were before codecs.
TEST(PrepareSpecCodec, RawKeepsItsTextAndOthersChangeIt) {
  PrepareSpec raw;
  raw.resize_short = 256;
  raw.crop_h = raw.crop_w = 224;
  EXPECT_EQ(raw.Canonical(),
            "prep3;rgb;short=256;long=0;exact=0x0;crop=224x224;resample=gauss-aa/linear;"
            "jpeg=tj-dct248-islow-planes");
  EXPECT_EQ(raw.ToJson().find("codec"), std::string::npos);
  PrepareSpec zstd = raw, jpeg = raw, jpeg50 = raw, jpeg_gray = raw;
  zstd.codec = jpeg.codec = jpeg50.codec = jpeg_gray.codec = RecordCodec::kJpeg;
  zstd.codec = RecordCodec::kZstd;
  jpeg50.quality = 50;
  jpeg_gray.gray = true;
  EXPECT_EQ(zstd.Canonical(), raw.Canonical() + ";codec=zstd-up-l1");
  EXPECT_EQ(jpeg.Canonical(), raw.Canonical() + ";codec=jpeg-q90-420");
  EXPECT_NE(jpeg50.Canonical(), jpeg.Canonical());
  EXPECT_NE(jpeg_gray.Canonical().find(";codec=jpeg-q90-gray"), std::string::npos);
  PrepareSpec zstd50 = zstd;
  zstd50.quality = 50;  // quality is jpeg's only: the same zstd bytes, the same entry
  EXPECT_EQ(zstd50.Canonical(), zstd.Canonical());
  for (const PrepareSpec& s : {zstd, jpeg50, jpeg_gray}) {
    Result<PrepareSpec> back = PrepareSpec::FromJson(s.ToJson());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->Canonical(), s.Canonical());
    EXPECT_EQ(back->quality, s.quality);
  }
}

TEST(PrepareSpecCodec, BadCodecOrQualityIsRefusedByName) {
  PrepareSpec s;
  for (int q : {0, 101, -5}) {
    s.quality = q;
    Status st = s.Validate();
    ASSERT_TRUE(st.IsInvalidArgument());
    EXPECT_NE(st.message().find("quality must be 1-100"), std::string::npos) << st.message();
  }
  s.quality = 90;
  s.codec = static_cast<RecordCodec>(9);
  EXPECT_TRUE(s.Validate().IsInvalidArgument());
  Result<PrepareSpec> bad = PrepareSpec::FromJson(R"({"codec":"lz4"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(
      bad.status().message().find("codec must be 'raw', 'zstd', 'jpeg' or 'yuv420', not 'lz4'"),
      std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(PrepareSpec::FromJson(R"({"codec":3})").ok());
  EXPECT_FALSE(PrepareSpec::FromJson(R"({"codec":"jpeg","quality":500})").ok());
  EXPECT_FALSE(PrepareSpec::FromJson(R"({"codec":"jpeg","quality":"high"})").ok());
}

}  // namespace
}  // namespace ssdfeed
