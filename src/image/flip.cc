#include "image/flip.h"

#include <cstddef>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SSDFEED_FLIP_SSSE3 1
#endif

namespace ssdfeed {

namespace {

void FlipRowScalar(const uint8_t* src, uint8_t* dst, int from, int w, int c) {
  for (int x = from; x < w; ++x) std::memcpy(dst + x * c, src + (w - 1 - x) * c, c);
}

#ifdef SSDFEED_FLIP_SSSE3
// Five 3-byte pixels per 16-byte load, reversed by one byte shuffle. The
// load starts a byte before the five (so it never reads past the row's
// end) and the store writes a byte past them (the next pixel's first,
// written again by the next step), so x stops 6 pixels short of each end.
__attribute__((target("ssse3"))) void FlipRgbRow(const uint8_t* src, uint8_t* dst, int w) {
  const __m128i rev = _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, -1);
  int x = 0;
  for (; x + 6 <= w; x += 5) {
    const uint8_t* s = src + 3 * static_cast<ptrdiff_t>(w - 5 - x) - 1;
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 3 * x), _mm_shuffle_epi8(v, rev));
  }
  FlipRowScalar(src, dst, x, w, 3);
}

bool HaveSsse3() {
  static const bool have = __builtin_cpu_supports("ssse3");
  return have;
}
#endif

}  // namespace

void FlipHorizontalInto(const uint8_t* src, uint8_t* dst, int h, int w, int c) {
  size_t row = static_cast<size_t>(w) * c;
  for (int y = 0; y < h; ++y, src += row, dst += row) {
#ifdef SSDFEED_FLIP_SSSE3
    if (c == 3 && HaveSsse3()) {
      FlipRgbRow(src, dst, w);
      continue;
    }
#endif
    FlipRowScalar(src, dst, 0, w, c);
  }
}

}  // namespace ssdfeed
