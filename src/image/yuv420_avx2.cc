// The yuv420 decode in one pass per row with AVX2: chroma upsampled by the
// triangle filter and converted to RGB as Yuv420ToRgb documents, bit for
// bit. TurboJPEG's planar decode only upsamples by nearest neighbour, and
// upsampling first then converting 4:4:4 with it costs 1.7x the nearest
// decode; fused, the rows stay in L1 and a 256 x 341 record decodes in
// 39-41 us on one core here, against nearest's 36.
#include <atomic>

#include "image/yuv420.h"

#if defined(__x86_64__)
#define SSDFEED_YUV420_AVX2 1
#include <immintrin.h>

#include <algorithm>
#include <vector>
#endif

namespace ssdfeed {

namespace {

std::atomic<bool> portable_only{false};

#ifdef SSDFEED_YUV420_AVX2

// Rows of 32 pixels or more: every pass is whole 16- or 32-value blocks
// (a last one that would pass the end moved back to end there). Narrower
// images are a few hundred pixels; the portable route decodes them.
constexpr int kMinWidth = 32;

// The row of the triangle filter's output for one chroma plane: near is the
// chroma row nearest the image row, far the next nearest. sums holds
// cw + 2 int16 (the vertical sums, an edge column repeated either side).
// w >= kMinWidth, so cw and w / 2 are at least one 16-value block.
__attribute__((target("avx2"))) void UpsampleRow(const uint8_t* near, const uint8_t* far, size_t cw,
                                                 size_t w, int16_t* sums, uint8_t* out) {
  int16_t* s = sums + 1;
  // A last block that would pass the end is moved back to end there: it
  // computes some values twice, the same way, instead of a scalar tail.
  for (size_t i = 0; i < cw; i += 16) {
    size_t k = std::min(i, cw - 16);
    __m256i n = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(near + k)));
    __m256i f = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(far + k)));
    __m256i v = _mm256_add_epi16(_mm256_add_epi16(n, _mm256_add_epi16(n, n)), f);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + k), v);
  }
  s[-1] = s[0];
  s[cw] = s[cw - 1];
  size_t pairs = w / 2;
  const __m256i eight = _mm256_set1_epi16(8);
  for (size_t i = 0; i < pairs; i += 16) {
    size_t k = std::min(i, pairs - 16);
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k));
    __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k - 1));
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k + 1));
    __m256i c3 = _mm256_add_epi16(_mm256_add_epi16(c, _mm256_add_epi16(c, c)), eight);
    __m256i even = _mm256_srli_epi16(_mm256_add_epi16(c3, p), 4);
    __m256i odd = _mm256_srli_epi16(_mm256_add_epi16(c3, q), 4);
    // Per 128-bit lane: unpack interleaves, packus keeps the lanes' order,
    // so the 32 bytes come out as even, odd, even, odd... in order.
    __m256i lo = _mm256_unpacklo_epi16(even, odd), hi = _mm256_unpackhi_epi16(even, odd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * k), _mm256_packus_epi16(lo, hi));
  }
  if (w % 2 == 1) out[w - 1] = static_cast<uint8_t>((3 * s[pairs] + s[pairs - 1] + 8) >> 4);
}

// (a * ca + b * cb + add) >> 16 for 16 pixels' int16 a and b, where coef's
// 32-bit lanes hold ca (low half) and cb (high half); back to int16 in the
// pixels' order (unpack and pack both work within each 128-bit lane).
__attribute__((target("avx2"), always_inline)) inline __m256i Dot(__m256i a, __m256i b,
                                                                  __m256i coef, __m256i add) {
  __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), coef);
  __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), coef);
  lo = _mm256_srai_epi32(_mm256_add_epi32(lo, add), 16);
  hi = _mm256_srai_epi32(_mm256_add_epi32(hi, add), 16);
  return _mm256_packs_epi32(lo, hi);
}

// (a * c + 32768) >> 16 for 16 int16 a: the product's high half, plus 1
// where its low half is 32768 or more.
__attribute__((target("avx2"), always_inline)) inline __m256i MulRound(__m256i a, __m256i c) {
  return _mm256_add_epi16(_mm256_mulhi_epi16(a, c),
                          _mm256_srli_epi16(_mm256_mullo_epi16(a, c), 15));
}

struct Channels {
  __m256i r, g, b;  // int16, before the clamp
};

// libjpeg's constants that do not fit int16 are split off a multiple of
// 65536, which passes the shift exactly: 91881 v = 65536 v + 26345 v,
// -46802 v = -65536 v + 18734 v, 116130 u = 131072 u - 14942 u.
__attribute__((target("avx2"), always_inline)) inline Channels Convert(__m256i y, __m256i u,
                                                                       __m256i v) {
  const __m256i half = _mm256_set1_epi32(32768);
  const __m256i kg = _mm256_set1_epi32((18734 << 16) | (-22554 & 0xffff));
  Channels c;
  c.r = _mm256_add_epi16(_mm256_add_epi16(y, v), MulRound(v, _mm256_set1_epi16(26345)));
  c.g = _mm256_add_epi16(_mm256_sub_epi16(y, v), Dot(u, v, kg, half));
  c.b = _mm256_add_epi16(_mm256_add_epi16(y, _mm256_add_epi16(u, u)),
                         MulRound(u, _mm256_set1_epi16(-14942)));
  return c;
}

// pshufb masks that interleave 16 R, G, B bytes of a lane into 48: output
// byte i of block k takes channel (16 k + i) % 3 of pixel (16 k + i) / 3
// (-128: none), the same in both lanes.
struct InterleaveMasks {
  alignas(32) int8_t m[3][3][32];  // [block][channel]
  InterleaveMasks() {
    for (int k = 0; k < 3; ++k)
      for (int ch = 0; ch < 3; ++ch)
        for (int i = 0; i < 16; ++i) {
          int at = 16 * k + i;
          m[k][ch][i] = m[k][ch][i + 16] = static_cast<int8_t>(at % 3 == ch ? at / 3 : -128);
        }
  }
};

__attribute__((target("avx2"))) void ConvertRow(const uint8_t* y, const uint8_t* cb,
                                                const uint8_t* cr, size_t w, uint8_t* rgb) {
  static const InterleaveMasks masks;
  __m256i il[3][3];
  for (int k = 0; k < 3; ++k)
    for (int ch = 0; ch < 3; ++ch)
      il[k][ch] = _mm256_load_si256(reinterpret_cast<const __m256i*>(masks.m[k][ch]));
  const __m256i zero = _mm256_setzero_si256(), c128 = _mm256_set1_epi16(128);
  for (size_t i = 0; i < w; i += 32) {
    size_t x = std::min(i, w - 32);
    __m256i Y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + x));
    __m256i U = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + x));
    __m256i V = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cr + x));
    Channels lo = Convert(_mm256_unpacklo_epi8(Y, zero),
                          _mm256_sub_epi16(_mm256_unpacklo_epi8(U, zero), c128),
                          _mm256_sub_epi16(_mm256_unpacklo_epi8(V, zero), c128));
    Channels hi = Convert(_mm256_unpackhi_epi8(Y, zero),
                          _mm256_sub_epi16(_mm256_unpackhi_epi8(U, zero), c128),
                          _mm256_sub_epi16(_mm256_unpackhi_epi8(V, zero), c128));
    // packus clamps to 0-255 and restores each lane's pixel order.
    __m256i ch[3] = {_mm256_packus_epi16(lo.r, hi.r), _mm256_packus_epi16(lo.g, hi.g),
                     _mm256_packus_epi16(lo.b, hi.b)};
    __m256i out[3];
    for (int k = 0; k < 3; ++k)
      out[k] = _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(ch[0], il[k][0]),
                                               _mm256_shuffle_epi8(ch[1], il[k][1])),
                               _mm256_shuffle_epi8(ch[2], il[k][2]));
    // Lane 0 holds pixels x..x+15 (bytes 0-47), lane 1 the next 16.
    auto* d = reinterpret_cast<__m256i*>(rgb + 3 * x);
    _mm256_storeu_si256(d, _mm256_permute2x128_si256(out[0], out[1], 0x20));
    _mm256_storeu_si256(d + 1, _mm256_permute2x128_si256(out[2], out[0], 0x30));
    _mm256_storeu_si256(d + 2, _mm256_permute2x128_si256(out[1], out[2], 0x31));
  }
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

#endif  // SSDFEED_YUV420_AVX2

}  // namespace

void SetYuv420PortableOnly(bool on) { portable_only.store(on, std::memory_order_relaxed); }

bool Yuv420ToRgbAvx2(const uint8_t* planes, int h, int w, uint8_t* rgb) {
#ifdef SSDFEED_YUV420_AVX2
  if (w < kMinWidth || !HaveAvx2() || portable_only.load(std::memory_order_relaxed)) return false;
  Yuv420Layout l = Yuv420Of(h, w);
  size_t W = static_cast<size_t>(w), cw = l.chroma_w;
  // Rows of a few KiB, made once per thread.
  thread_local std::vector<int16_t> sums;
  thread_local std::vector<uint8_t> rows;
  sums.resize(cw + 2);
  rows.resize(2 * W);
  const uint8_t* cb = planes + l.y_bytes;
  const uint8_t* cr = cb + l.chroma_bytes();
  for (size_t y = 0; y < static_cast<size_t>(h); ++y) {
    size_t near = Yuv420NearRow(y) * cw, far = Yuv420FarRow(y, l.chroma_h) * cw;
    UpsampleRow(cb + near, cb + far, cw, W, sums.data(), rows.data());
    UpsampleRow(cr + near, cr + far, cw, W, sums.data(), rows.data() + W);
    ConvertRow(planes + y * W, rows.data(), rows.data() + W, W, rgb + 3 * y * W);
  }
  return true;
#else
  (void)planes, (void)h, (void)w, (void)rgb;
  return false;
#endif
}

bool Ycc444ToRgbAvx2(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t n,
                     uint8_t* rgb) {
#ifdef SSDFEED_YUV420_AVX2
  if (n < static_cast<size_t>(kMinWidth) || !HaveAvx2() ||
      portable_only.load(std::memory_order_relaxed))
    return false;
  ConvertRow(y, cb, cr, n, rgb);  // planes of one size are one long row
  return true;
#else
  (void)y, (void)cb, (void)cr, (void)n, (void)rgb;
  return false;
#endif
}

}  // namespace ssdfeed
