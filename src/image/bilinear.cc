#include "image/bilinear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#if defined(__x86_64__)
#define SSDFEED_BILINEAR_AVX2 1
#include <immintrin.h>
#endif

namespace ssdfeed {

namespace {

std::atomic<bool> portable_only{false};

constexpr int kCoefBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kOne = 1 << kCoefBits;

// OpenCV's saturate_cast<short>(float): cvRound (cvtss2si, half to even
// under the default rounding mode), then clamp.
int16_t RoundCoef(float v) {
  int r = static_cast<int>(std::lrintf(v));
  return static_cast<int16_t>(std::clamp(r, -32768, 32767));
}

// Where output coordinate d samples on an axis of n source pixels resized to
// m: cv::resize's float arithmetic, step for step (offset 0), the source
// window moved by `offset` source pixels otherwise.
struct Tap {
  int s;    // left (top) source pixel, not yet clamped
  float f;  // weight of the right (bottom) one
};
Tap MapCoord(int d, double scale, double offset) {
  float f = static_cast<float>((d + 0.5) * scale - 0.5 + offset);
  int s = static_cast<int>(f);  // cvFloor: truncate, then step down below zero
  s -= s > f;
  return {s, f - static_cast<float>(s)};
}
// OpenCV's scale: the inverse of the inverse scale it is given or computes
// (m / n for n pixels resized to m).
double Scale(double inv_scale) { return 1. / inv_scale; }
double InvScale(int n, int m) { return static_cast<double>(m) / n; }

int16_t Sat16(int32_t v) { return static_cast<int16_t>(std::clamp(v, -32768, 32767)); }
uint8_t SatU8(int32_t v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// The horizontal pass, per output value (pixel x channel) of a row:
// S[left] * a0 + S[right] * a1, exact in int32, kept as the 16-bit
// (sum >> 4) that is all the vertical pass uses (OpenCV's first step
// there). Values go in blocks of four: one 16-byte load at `base`,
// shuffled into (left, right) 16-bit pairs, one multiply-add against the
// block's coefficients. Mirroring only permutes which output value gets
// which taps, so a flipped crop costs nothing more.
struct Horizontal {
  int values = 0;
  std::vector<int32_t> left, right;
  std::vector<int16_t> coef;      // a0, a1 per value
  std::vector<int32_t> base;      // per block
  std::vector<uint8_t> shuffle;   // 16 per block
  std::vector<uint8_t> group_ok;  // per four blocks: one load covers each
  int scalar_blocks = 0;          // blocks one load does not cover
  bool mirrored = false;
};

// OpenCV's taps for each output pixel, in order.
struct PixelTap {
  int s;
  int16_t a0, a1;
  bool edge;  // OpenCV's xmax on: one source pixel, weight kOne
};
void PixelTaps(int sw, int dw, double inv_scale, double offset, std::vector<PixelTap>* taps) {
  taps->resize(dw);
  double scale = Scale(inv_scale);
  bool edge = false;
  for (int dx = 0; dx < dw; ++dx) {
    Tap t = MapCoord(dx, scale, offset);
    if (t.s < 0) t = {0, 0.f};
    if (t.s + 1 >= sw) {
      edge = true;
      if (t.s >= sw - 1) t = {sw - 1, 0.f};
    }
    (*taps)[dx] = {t.s, RoundCoef((1.f - t.f) * kOne), RoundCoef(t.f * kOne), edge};
  }
}

void BuildBlocks(int row_bytes, Horizontal* h) {
  int blocks = h->values / 4;
  h->base.resize(blocks);
  h->shuffle.resize(16 * static_cast<size_t>(blocks));
  h->group_ok.assign((blocks + 3) / 4, 1);
  h->scalar_blocks = 0;
  for (int b = 0; b < blocks; ++b) {
    const int32_t* l = &h->left[4 * b];
    const int32_t* r = &h->right[4 * b];
    int lo = std::min(std::min(l[0], l[1]), std::min(l[2], l[3]));
    int hi = std::max(std::max(r[0], r[1]), std::max(r[2], r[3]));
    // The load must stay inside the row (a crop's row may end anywhere):
    // near its end it starts earlier, ending with the row.
    int base = std::min(lo, row_bytes - 16);
    bool ok = base >= 0 && hi - base <= 15;
    h->group_ok[b / 4] &= ok;
    h->scalar_blocks += !ok;
    h->base[b] = base;
    uint8_t* sh = &h->shuffle[16 * b];
    for (int i = 0; i < 4; ++i) {
      sh[4 * i] = static_cast<uint8_t>(l[i] - base);
      sh[4 * i + 1] = 0x80;  // zero: the high byte of a 16-bit lane
      sh[4 * i + 2] = static_cast<uint8_t>(r[i] - base);
      sh[4 * i + 3] = 0x80;
    }
  }
}

void BuildHorizontal(int sw, int dw, int cn, bool mirror, double inv_scale, double offset,
                     Horizontal* h) {
  thread_local std::vector<PixelTap> taps;
  PixelTaps(sw, dw, inv_scale, offset, &taps);
  h->values = dw * cn;
  h->mirrored = mirror;
  h->left.resize(h->values);
  h->right.resize(h->values);
  h->coef.resize(2 * static_cast<size_t>(h->values));
  for (int dx = 0; dx < dw; ++dx) {
    const PixelTap& t = taps[mirror ? dw - 1 - dx : dx];
    for (int k = 0; k < cn; ++k) {
      size_t v = static_cast<size_t>(dx) * cn + k;
      h->left[v] = t.s * cn + k;
      h->right[v] = t.edge ? h->left[v] : h->left[v] + cn;
      h->coef[2 * v] = t.edge ? static_cast<int16_t>(kOne) : t.a0;
      h->coef[2 * v + 1] = t.edge ? 0 : t.a1;
    }
  }
  BuildBlocks(sw * cn, h);
}

void HorizontalScalar(const Horizontal& h, const uint8_t* s, int from, int to, int16_t* d) {
  for (int v = from; v < to; ++v)
    d[v] = Sat16((s[h.left[v]] * h.coef[2 * v] + s[h.right[v]] * h.coef[2 * v + 1]) >> 4);
}

// OpenCV's vertical rounding for 8-bit images, from the 16-bit (sum >> 4)
// rows: the high half of 16-bit products, then a 2-bit rounding, all
// saturating. Its uint8 specialisation does this in the SIMD loop and in
// the scalar tail alike (its generic loop, rounding the 22-bit sum once, is
// not used for uint8), so every value of a row gets it.
uint8_t Vertical(int16_t p0, int16_t p1, int16_t b0, int16_t b1) {
  int16_t m0 = static_cast<int16_t>((p0 * b0) >> 16);
  int16_t m1 = static_cast<int16_t>((p1 * b1) >> 16);
  return SatU8(Sat16(Sat16(m0 + m1) + 2) >> 2);
}

#ifdef SSDFEED_BILINEAR_AVX2

// Eight values of a row: two blocks, loaded, shuffled, multiplied and added.
__attribute__((target("avx2"), always_inline)) inline __m256i TwoBlocks(const Horizontal& h,
                                                                        const uint8_t* s, int b) {
  __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + h.base[b]));
  __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + h.base[b + 1]));
  __m256i px = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  __m256i ctl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&h.shuffle[16 * b]));
  __m256i co = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&h.coef[8 * b]));
  return _mm256_srai_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(px, ctl), co), 4);
}

// Sixteen values from four blocks, as 16-bit (sum >> 4).
__attribute__((target("avx2"), always_inline)) inline void Group(const Horizontal& h,
                                                                 const uint8_t* s, int b,
                                                                 int16_t* d) {
  if (!h.group_ok[b / 4]) return HorizontalScalar(h, s, 4 * b, 4 * b + 16, d);
  // packs works per 128-bit lane: put the four 64-bit quarters back in order.
  __m256i p = _mm256_packs_epi32(TwoBlocks(h, s, b), TwoBlocks(h, s, b + 2));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4 * b), _mm256_permute4x64_epi64(p, 0xD8));
}

// A mirrored row is walked from its last output value back, so the source
// row is still read upwards: a source not in cache (the bound's, or a
// big image's) is streamed by the prefetcher either way; read downwards,
// a mirrored crop took twice as long.
__attribute__((target("avx2"))) void HorizontalAvx2(const Horizontal& h, const uint8_t* s,
                                                    int16_t* __restrict d) {
  int groups = h.values / 16;
  if (h.mirrored) {
    HorizontalScalar(h, s, 16 * groups, h.values, d);
    for (int g = groups; g-- > 0;) Group(h, s, 4 * g, d);
    return;
  }
  for (int g = 0; g < groups; ++g) Group(h, s, 4 * g, d);
  HorizontalScalar(h, s, 16 * groups, h.values, d);
}

__attribute__((target("avx2"))) __m256i Vertical16(const int16_t* p0, const int16_t* p1, __m256i b0,
                                                   __m256i b1) {
  __m256i m0 = _mm256_mulhi_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0)), b0);
  __m256i m1 = _mm256_mulhi_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)), b1);
  __m256i sum = _mm256_adds_epi16(m0, m1);
  return _mm256_srai_epi16(_mm256_adds_epi16(sum, _mm256_set1_epi16(2)), 2);
}

__attribute__((target("avx2"))) void VerticalAvx2(const int16_t* p0, const int16_t* p1, int16_t b0,
                                                  int16_t b1, int values, uint8_t* out) {
  __m256i vb0 = _mm256_set1_epi16(b0), vb1 = _mm256_set1_epi16(b1);
  int x = 0;
  for (; x + 32 <= values; x += 32) {
    __m256i r = _mm256_packus_epi16(Vertical16(p0 + x, p1 + x, vb0, vb1),
                                    Vertical16(p0 + x + 16, p1 + x + 16, vb0, vb1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), _mm256_permute4x64_epi64(r, 0xD8));
  }
  for (; x < values; ++x) out[x] = Vertical(p0[x], p1[x], b0, b1);
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

#endif  // SSDFEED_BILINEAR_AVX2

// The two passes over the source, one output row at a time, keeping the
// two horizontally resized source rows the row needs. `avx2` picks the
// passes' code; both give the same bytes.
void Resize(const Horizontal& h, const uint8_t* src, int sh, int row_bytes, size_t src_stride,
            uint8_t* dst, int dh, size_t dst_stride, double inv_scale_y, double offset_y,
            bool avx2) {
  thread_local std::vector<int16_t> rows;
  size_t pitch = (static_cast<size_t>(h.values) + 31) / 32 * 32;
  rows.resize(2 * pitch);
  int held[2] = {-1, -1};
  auto row = [&](int r, int keep) -> const int16_t* {  // never evicts row `keep`
    for (int i = 0; i < 2; ++i)
      if (held[i] == r) return &rows[i * pitch];
    int i = held[0] == keep ? 1 : 0;
    const uint8_t* s = src + static_cast<size_t>(r) * src_stride;
#ifdef SSDFEED_BILINEAR_AVX2
    if (avx2) {
      if (r + 1 < sh) {  // the next row down is most likely next: ask for it now
        const char* next = reinterpret_cast<const char*>(s + src_stride);
        for (int at = 0; at < row_bytes; at += 64) _mm_prefetch(next + at, _MM_HINT_T0);
      }
      HorizontalAvx2(h, s, &rows[i * pitch]);
    } else {
      HorizontalScalar(h, s, 0, h.values, &rows[i * pitch]);
    }
#else
    HorizontalScalar(h, s, 0, h.values, &rows[i * pitch]);
#endif
    held[i] = r;
    return &rows[i * pitch];
  };
  double scale = Scale(inv_scale_y);
  for (int dy = 0; dy < dh; ++dy) {
    Tap t = MapCoord(dy, scale, offset_y);  // rows clamped, weights not: as OpenCV
    int r0 = std::clamp(t.s, 0, sh - 1), r1 = std::clamp(t.s + 1, 0, sh - 1);
    int16_t b0 = RoundCoef((1.f - t.f) * kOne), b1 = RoundCoef(t.f * kOne);
    const int16_t* p0 = row(r0, r1);
    const int16_t* p1 = row(r1, r0);
    uint8_t* out = dst + static_cast<size_t>(dy) * dst_stride;
#ifdef SSDFEED_BILINEAR_AVX2
    if (avx2) {
      VerticalAvx2(p0, p1, b0, b1, h.values, out);
      continue;
    }
#endif
    for (int x = 0; x < h.values; ++x) out[x] = Vertical(p0[x], p1[x], b0, b1);
  }
}

bool Avx2Usable() {
#ifdef SSDFEED_BILINEAR_AVX2
  return HaveAvx2() && !portable_only.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace

void SetBilinearPortableOnly(bool on) { portable_only.store(on, std::memory_order_relaxed); }

bool ResizeBilinearU8(const uint8_t* src, int sh, int sw, size_t src_stride, int cn, uint8_t* dst,
                      int dh, int dw, size_t dst_stride, bool mirror) {
  return ResizeBilinearU8AtScale(src, sh, sw, src_stride, cn, dst, dh, dw, dst_stride,
                                 InvScale(sh, dh), InvScale(sw, dw), mirror);
}

bool ResizeBilinearU8AtScale(const uint8_t* src, int sh, int sw, size_t src_stride, int cn,
                             uint8_t* dst, int dh, int dw, size_t dst_stride, double inv_scale_y,
                             double inv_scale_x, bool mirror) {
  if (!Avx2Usable()) return false;
  if ((cn != 1 && cn != 3) || sh < 1 || sw < 1 || dh < 1 || dw < 1) return false;
  thread_local Horizontal h;
  BuildHorizontal(sw, dw, cn, mirror, inv_scale_x, 0, &h);
  // Four values' taps span more than 16 bytes from a shrink by about 3x (3
  // channels) or 4.5x (1), and no 16-byte load fits a row under 16 bytes:
  // one-value-at-a-time code would be slower than OpenCV's pixel at a
  // time, so it resizes those.
  if (h.scalar_blocks * 16 > h.values / 4) return false;
  Resize(h, src, sh, sw * cn, src_stride, dst, dh, dst_stride, inv_scale_y, 0, true);
  return true;
}

void ResizeBilinearU8Window(const uint8_t* src, int sh, int sw, size_t src_stride, uint8_t* dst,
                            int dh, int dw, size_t dst_stride, const BilinearWindow& win,
                            bool mirror) {
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1) return;
  thread_local Horizontal h;
  BuildHorizontal(sw, dw, 1, mirror, win.inv_scale_x, win.offset_x, &h);
  // Blocks one 16-byte load cannot serve (a row under 16 bytes, a steep
  // shrink) go value by value inside the AVX2 pass too: the same bytes.
  Resize(h, src, sh, sw, src_stride, dst, dh, dst_stride, win.inv_scale_y, win.offset_y,
         Avx2Usable());
}

}  // namespace ssdfeed
