#include "image/bilinear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define SSDFEED_BILINEAR_AVX2 1
#endif

namespace ssdfeed {

namespace {

constexpr int kCoefBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kOne = 1 << kCoefBits;

// OpenCV's saturate_cast<short>(float): round half to even, then clamp.
int16_t RoundCoef(float v) {
  long r = std::lrint(v);
  return static_cast<int16_t>(std::clamp<long>(r, INT16_MIN, INT16_MAX));
}

// Where output coordinate d samples on an axis of n source pixels resized to
// m: cv::resize's float arithmetic, step for step.
struct Tap {
  int s;    // left (top) source pixel, not yet clamped
  float f;  // weight of the right (bottom) one
};
Tap MapCoord(int d, double scale) {
  float f = static_cast<float>((d + 0.5) * scale - 0.5);
  int s = static_cast<int>(std::floor(f));
  return {s, f - static_cast<float>(s)};
}
double Scale(int n, int m) { return 1. / (static_cast<double>(m) / n); }

// Per output value (pixel x channel) of a row: D = S[left] * a0 + S[right]
// * a1, exact in int32. Values are taken in blocks of four: one 16-byte
// load at `base`, shuffled into (left, right) 16-bit pairs, then one
// multiply-add against the block's coefficients.
struct Horizontal {
  int values = 0;
  std::vector<int32_t> left, right;
  std::vector<int16_t> coef;       // a0, a1 per value
  std::vector<int32_t> base;       // per block
  std::vector<uint8_t> shuffle;    // 16 per block
  std::vector<uint8_t> vector_ok;  // per block: one load covers it
};

void BuildHorizontal(int sw, int dw, int cn, Horizontal* h) {
  h->values = dw * cn;
  h->left.resize(h->values);
  h->right.resize(h->values);
  h->coef.resize(2 * static_cast<size_t>(h->values));
  double scale = Scale(sw, dw);
  bool at_right_edge = false;  // OpenCV's xmax: from here on, one source pixel
  for (int dx = 0; dx < dw; ++dx) {
    Tap t = MapCoord(dx, scale);
    if (t.s < 0) t = {0, 0.f};
    if (t.s + 1 >= sw) {
      at_right_edge = true;
      if (t.s >= sw - 1) t = {sw - 1, 0.f};
    }
    int16_t a0 = RoundCoef((1.f - t.f) * kOne), a1 = RoundCoef(t.f * kOne);
    for (int k = 0; k < cn; ++k) {
      size_t v = static_cast<size_t>(dx) * cn + k;
      h->left[v] = t.s * cn + k;
      h->right[v] = at_right_edge ? h->left[v] : h->left[v] + cn;
      h->coef[2 * v] = at_right_edge ? static_cast<int16_t>(kOne) : a0;
      h->coef[2 * v + 1] = at_right_edge ? 0 : a1;
    }
  }
  int blocks = h->values / 4, row_bytes = sw * cn;
  h->base.assign(blocks, 0);
  h->shuffle.assign(16 * static_cast<size_t>(blocks), 0x80);
  h->vector_ok.assign(blocks, 0);
  for (int b = 0; b < blocks; ++b) {
    int lo = INT32_MAX, hi = 0;
    for (int i = 0; i < 4; ++i) {
      lo = std::min(lo, h->left[4 * b + i]);
      hi = std::max(hi, h->right[4 * b + i]);
    }
    // The load must stay inside the row: a crop's row may end anywhere.
    if (hi - lo > 15 || lo + 16 > row_bytes) continue;
    h->base[b] = lo;
    h->vector_ok[b] = 1;
    for (int i = 0; i < 4; ++i) {
      h->shuffle[16 * b + 4 * i] = static_cast<uint8_t>(h->left[4 * b + i] - lo);
      h->shuffle[16 * b + 4 * i + 2] = static_cast<uint8_t>(h->right[4 * b + i] - lo);
    }
  }
}

void HorizontalScalar(const Horizontal& h, const uint8_t* s, int from, int to, int32_t* d) {
  for (int v = from; v < to; ++v)
    d[v] = s[h.left[v]] * h.coef[2 * v] + s[h.right[v]] * h.coef[2 * v + 1];
}

int16_t Sat16(int32_t v) { return static_cast<int16_t>(std::clamp(v, -32768, 32767)); }
uint8_t SatU8(int32_t v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// OpenCV's vertical rounding for 8-bit images: it drops 4 bits, takes the
// high half of 16-bit products and rounds by 2 bits, all saturating. Its
// uint8 specialisation does this in the SIMD loop and in the scalar tail
// alike (its generic portable loop, rounding the 22-bit sum once, is not
// used for uint8), so every value of a row gets it.
uint8_t Vertical(int32_t s0, int32_t s1, int16_t b0, int16_t b1) {
  int16_t m0 = static_cast<int16_t>((Sat16(s0 >> 4) * b0) >> 16);
  int16_t m1 = static_cast<int16_t>((Sat16(s1 >> 4) * b1) >> 16);
  return SatU8(Sat16(Sat16(m0 + m1) + 2) >> 2);
}

#ifdef SSDFEED_BILINEAR_AVX2
__attribute__((target("avx2"))) void HorizontalAvx2(const Horizontal& h, const uint8_t* s,
                                                    int32_t* __restrict d) {
  // Local copies: through h the compiler reloads every pointer each step.
  const int32_t* __restrict base = h.base.data();
  const uint8_t* __restrict ok = h.vector_ok.data();
  const uint8_t* __restrict shuffle = h.shuffle.data();
  const int16_t* __restrict coef = h.coef.data();
  int blocks = h.values / 4, b = 0;
  for (; b + 2 <= blocks; b += 2) {
    if (!(ok[b] & ok[b + 1])) {
      HorizontalScalar(h, s, 4 * b, 4 * b + 8, d);
      continue;
    }
    __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + base[b]));
    __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + base[b + 1]));
    __m256i px = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    __m256i ctl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(shuffle + 16 * b));
    __m256i co = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(coef + 8 * b));
    __m256i sum = _mm256_madd_epi16(_mm256_shuffle_epi8(px, ctl), co);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4 * b), sum);
  }
  HorizontalScalar(h, s, 4 * b, h.values, d);
}

// Sixteen source values of one row, as 16-bit products' high halves.
__attribute__((target("avx2"))) __m256i HighProducts16(const int32_t* s, __m256i b) {
  __m256i lo = _mm256_srai_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)), 4);
  __m256i hi = _mm256_srai_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 8)), 4);
  // packs works per 128-bit lane: put the four 64-bit quarters back in order.
  __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
  return _mm256_mulhi_epi16(p, b);
}

// Sixteen values of Vertical.
__attribute__((target("avx2"))) void Vertical16Avx2(const int32_t* s0, const int32_t* s1,
                                                    __m256i b0, __m256i b1, uint8_t* out) {
  __m256i sum = _mm256_adds_epi16(HighProducts16(s0, b0), HighProducts16(s1, b1));
  __m256i r = _mm256_srai_epi16(_mm256_adds_epi16(sum, _mm256_set1_epi16(2)), 2);
  __m256i u8 = _mm256_permute4x64_epi64(_mm256_packus_epi16(r, r), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(u8));
}

__attribute__((target("avx2"))) void VerticalAvx2(const int32_t* s0, const int32_t* s1, int16_t b0,
                                                  int16_t b1, int values, uint8_t* out) {
  __m256i vb0 = _mm256_set1_epi16(b0), vb1 = _mm256_set1_epi16(b1);
  int x = 0;
  for (; x + 16 <= values; x += 16) Vertical16Avx2(s0 + x, s1 + x, vb0, vb1, out + x);
  for (; x < values; ++x) out[x] = Vertical(s0[x], s1[x], b0, b1);
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

std::atomic<bool> portable_only{false};

}  // namespace

void SetBilinearPortableOnly(bool on) { portable_only.store(on, std::memory_order_relaxed); }

bool ResizeBilinearU8(const uint8_t* src, int sh, int sw, size_t src_stride, int cn, uint8_t* dst,
                      int dh, int dw, size_t dst_stride) {
#ifdef SSDFEED_BILINEAR_AVX2
  if (!HaveAvx2() || portable_only.load(std::memory_order_relaxed)) return false;
  if ((cn != 1 && cn != 3) || sh < 1 || sw < 1 || dh < 1 || dw < 1) return false;
  thread_local Horizontal h;
  BuildHorizontal(sw, dw, cn, &h);
  // Two horizontally resized source rows, tagged with the row they hold.
  thread_local std::vector<int32_t> rows;
  size_t pitch = (static_cast<size_t>(h.values) + 15) / 16 * 16;
  rows.resize(2 * pitch);
  int held[2] = {-1, -1};
  auto row = [&](int r, int keep) -> const int32_t* {  // never evicts row `keep`
    for (int i = 0; i < 2; ++i)
      if (held[i] == r) return &rows[i * pitch];
    int i = held[0] == keep ? 1 : 0;
    HorizontalAvx2(h, src + static_cast<size_t>(r) * src_stride, &rows[i * pitch]);
    held[i] = r;
    return &rows[i * pitch];
  };
  double scale = Scale(sh, dh);
  for (int dy = 0; dy < dh; ++dy) {
    Tap t = MapCoord(dy, scale);  // rows clamped, weights not: as OpenCV
    int r0 = std::clamp(t.s, 0, sh - 1), r1 = std::clamp(t.s + 1, 0, sh - 1);
    int16_t b0 = RoundCoef((1.f - t.f) * kOne), b1 = RoundCoef(t.f * kOne);
    const int32_t* s0 = row(r0, r1);
    const int32_t* s1 = row(r1, r0);
    VerticalAvx2(s0, s1, b0, b1, h.values, dst + static_cast<size_t>(dy) * dst_stride);
  }
  return true;
#else
  (void)src, (void)sh, (void)sw, (void)src_stride, (void)cn, (void)dst, (void)dh, (void)dw,
      (void)dst_stride;
  return false;
#endif
}

}  // namespace ssdfeed
