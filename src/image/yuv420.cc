// BT.601 full-range YCbCr in 16-bit fixed point, the constants libjpeg
// uses (round(coefficient * 65536)), so a record's planes are what a JPEG
// encoder would subsample. Chroma is computed once per 2 x 2 block from
// the block's summed R, G, B (one rounding, not an average of rounded
// per-pixel values); at an odd right or bottom edge the last column or row
// counts twice, so every block sums four pixels.
#include "image/yuv420.h"

#include <algorithm>
#include <vector>

namespace ssdfeed {

namespace {

// Y = 0.299 R + 0.587 G + 0.114 B; Cb = -0.168736 R - 0.331264 G + 0.5 B + 128;
// Cr = 0.5 R - 0.418688 G - 0.081312 B + 128. Each row sums to 65536 (Y)
// or 0 (Cb, Cr), so gray stays gray.
constexpr int32_t kYR = 19595, kYG = 38470, kYB = 7471;
constexpr int32_t kCbR = -11059, kCbG = -21709, kCbB = 32768;
constexpr int32_t kCrR = 32768, kCrG = -27439, kCrB = -5329;
// R = Y + 1.402 (Cr - 128); G = Y - 0.344136 (Cb - 128) - 0.714136 (Cr - 128);
// B = Y + 1.772 (Cb - 128).
constexpr int32_t kRCr = 91881, kGCb = -22554, kGCr = -46802, kBCb = 116130;

inline uint8_t Clamp255(int32_t v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

void LumaRow(const uint8_t* __restrict rgb, size_t w, uint8_t* __restrict y) {
  for (size_t x = 0; x < w; ++x) {
    const uint8_t* p = rgb + 3 * x;
    y[x] = static_cast<uint8_t>((kYR * p[0] + kYG * p[1] + kYB * p[2] + 32768) >> 16);
  }
}

// One row of chroma from image rows r0 and r1 (the same row at an odd
// bottom edge).
void ChromaRow(const uint8_t* r0, const uint8_t* r1, size_t w, size_t cw, uint8_t* cb,
               uint8_t* cr) {
  for (size_t bx = 0; bx < cw; ++bx) {
    size_t x0 = 2 * bx, x1 = std::min(x0 + 1, w - 1);
    int32_t s[3];
    for (int k = 0; k < 3; ++k)
      s[k] = r0[3 * x0 + k] + r0[3 * x1 + k] + r1[3 * x0 + k] + r1[3 * x1 + k];
    // The sums are 4x the block's mean: shift by 18, not 16.
    constexpr int32_t kBias = (128 << 18) + (1 << 17);
    cb[bx] = Clamp255((kCbR * s[0] + kCbG * s[1] + kCbB * s[2] + kBias) >> 18);
    cr[bx] = Clamp255((kCrR * s[0] + kCrG * s[1] + kCrB * s[2] + kBias) >> 18);
  }
}

}  // namespace

Yuv420Layout Yuv420Of(int h, int w) {
  Yuv420Layout l;
  l.y_bytes = static_cast<size_t>(h) * static_cast<size_t>(w);
  l.chroma_h = (static_cast<size_t>(h) + 1) / 2;
  l.chroma_w = (static_cast<size_t>(w) + 1) / 2;
  return l;
}

size_t Yuv420StoredBytes(int h, int w, int c) {
  if (h <= 0 || w <= 0) return 0;
  if (c == 1) return static_cast<size_t>(h) * static_cast<size_t>(w);
  if (c == 3) return Yuv420Of(h, w).total();
  return 0;
}

void RgbToYuv420(const uint8_t* rgb, int h, int w, uint8_t* planes) {
  Yuv420Layout l = Yuv420Of(h, w);
  size_t W = static_cast<size_t>(w), row = 3 * W;
  for (size_t y = 0; y < static_cast<size_t>(h); ++y) LumaRow(rgb + y * row, W, planes + y * W);
  uint8_t* cb = planes + l.y_bytes;
  uint8_t* cr = cb + l.chroma_bytes();
  for (size_t by = 0; by < l.chroma_h; ++by) {
    size_t y0 = 2 * by, y1 = std::min(y0 + 1, static_cast<size_t>(h) - 1);
    ChromaRow(rgb + y0 * row, rgb + y1 * row, W, l.chroma_w, cb + by * l.chroma_w,
              cr + by * l.chroma_w);
  }
}

void UpsampleChroma(const uint8_t* chroma, int h, int w, uint8_t* out) {
  Yuv420Layout l = Yuv420Of(h, w);
  size_t W = static_cast<size_t>(w), cw = l.chroma_w, pairs = W / 2;
  // A row of vertical sums (3 near + far, at most 1020), the edge columns
  // repeated on either side so the horizontal pass needs no branch.
  thread_local std::vector<uint16_t> sums;
  sums.resize(cw + 2);
  uint16_t* s = sums.data() + 1;
  for (size_t y = 0; y < static_cast<size_t>(h); ++y) {
    const uint8_t* near = chroma + Yuv420NearRow(y) * cw;
    const uint8_t* far = chroma + Yuv420FarRow(y, l.chroma_h) * cw;
    for (size_t k = 0; k < cw; ++k) s[k] = static_cast<uint16_t>(3 * near[k] + far[k]);
    s[-1] = s[0];
    s[cw] = s[cw - 1];
    uint8_t* o = out + y * W;
    for (size_t k = 0; k < pairs; ++k) {
      const uint16_t* c = s + k;  // c[-1]: s's pad at k = 0 (an index k - 1 would wrap)
      o[2 * k] = static_cast<uint8_t>((3 * c[0] + c[-1] + 8) >> 4);
      o[2 * k + 1] = static_cast<uint8_t>((3 * c[0] + c[1] + 8) >> 4);
    }
    if (W % 2 == 1) o[W - 1] = static_cast<uint8_t>((3 * s[pairs] + *(s + pairs - 1) + 8) >> 4);
  }
}

namespace {

// libjpeg's YCbCr -> RGB of one pixel, Cb and Cr less 128.
inline void YccPixel(int32_t luma, int32_t u, int32_t v, uint8_t* p) {
  p[0] = Clamp255(luma + ((kRCr * v + 32768) >> 16));
  p[1] = Clamp255(luma + ((kGCb * u + kGCr * v + 32768) >> 16));
  p[2] = Clamp255(luma + ((kBCb * u + 32768) >> 16));
}

}  // namespace

void Ycc444ToRgb(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t n, uint8_t* rgb) {
  if (Ycc444ToRgbAvx2(y, cb, cr, n, rgb)) return;
  for (size_t i = 0; i < n; ++i) YccPixel(y[i], cb[i] - 128, cr[i] - 128, rgb + 3 * i);
}

void Yuv420ToRgb(const uint8_t* planes, int h, int w, uint8_t* rgb) {
  Yuv420Layout l = Yuv420Of(h, w);
  size_t W = static_cast<size_t>(w), cw = l.chroma_w;
  const uint8_t* cb = planes + l.y_bytes;
  const uint8_t* cr = cb + l.chroma_bytes();
  for (size_t y = 0; y < static_cast<size_t>(h); ++y) {
    size_t r0 = Yuv420NearRow(y) * cw, r1 = Yuv420FarRow(y, l.chroma_h) * cw;
    for (size_t x = 0; x < W; ++x) {
      size_t c0 = Yuv420NearRow(x), c1 = Yuv420FarRow(x, cw);
      auto tri = [&](const uint8_t* p) {
        return (9 * p[r0 + c0] + 3 * p[r0 + c1] + 3 * p[r1 + c0] + p[r1 + c1] + 8) >> 4;
      };
      YccPixel(planes[y * W + x], tri(cb) - 128, tri(cr) - 128, rgb + 3 * (y * W + x));
    }
  }
}

}  // namespace ssdfeed
