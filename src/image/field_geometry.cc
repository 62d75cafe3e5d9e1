#include "image/field_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ssdfeed {

void NearestIndex(int src_n, int dst_n, int off, int n, bool mirror, std::vector<int>* idx) {
  // cv::resize computes inv_scale = dst / src and resizeNN uses 1 / inv_scale.
  double inv_scale = static_cast<double>(dst_n) / src_n;
  double step = 1. / inv_scale;
  idx->resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int s = std::min(static_cast<int>(std::floor((off + i) * step)), src_n - 1);
    (*idx)[static_cast<size_t>(mirror ? n - 1 - i : i)] = s;
  }
}

namespace {

// Horizontal sampling of 8-bit rows, 16 outputs per byte shuffle where
// their sources lie within 16 bytes of the row (always when enlarging, as a
// RandomResizedCrop mostly does, mirrored or not): a scalar gather took half
// as long as rendering the image's three channels.
struct ByteShuffles {
  std::vector<int> base;       // per block of 16 outputs: its first source byte, -1: scalar
  std::vector<uint8_t> masks;  // 16 per block: source offsets from base
  void Plan(const std::vector<int>& xs, int row_len) {
    size_t blocks = xs.size() / 16;
    base.assign(blocks, -1);
    masks.resize(blocks * 16);
    for (size_t b = 0; b < blocks; ++b) {
      auto [lo, hi] = std::minmax_element(xs.begin() + b * 16, xs.begin() + b * 16 + 16);
      if (*hi - *lo > 15 || *lo + 16 > row_len) continue;
      base[b] = *lo;
      for (int j = 0; j < 16; ++j) masks[b * 16 + j] = static_cast<uint8_t>(xs[b * 16 + j] - *lo);
    }
  }
};

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("ssse3"))) void ShuffleRow(const uint8_t* row, const std::vector<int>& xs,
                                                 const ByteShuffles& p, uint8_t* out) {
  size_t blocks = p.base.size();
  for (size_t b = 0; b < blocks; ++b) {
    if (p.base[b] < 0) {
      for (size_t x = b * 16; x < b * 16 + 16; ++x) out[x] = row[xs[x]];
      continue;
    }
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + p.base[b]));
    __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.masks.data() + b * 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b * 16), _mm_shuffle_epi8(v, m));
  }
  for (size_t x = blocks * 16; x < xs.size(); ++x) out[x] = row[xs[x]];
}
#endif

void GatherRow(const uint8_t* row, const std::vector<int>& xs, uint8_t* out) {
  for (size_t x = 0; x < xs.size(); ++x) out[x] = row[xs[x]];
}

// Elements wider than a byte are copied through memcpy: a record's field
// data need not be aligned to 2 bytes in memory (it is to 8 within the
// section).
template <int E>
void GatherWide(const uint8_t* row, const std::vector<int>& xs, uint8_t* out) {
  for (size_t x = 0; x < xs.size(); ++x)
    std::memcpy(out + x * E, row + static_cast<size_t>(xs[x]) * E, E);
}

}  // namespace

void RemapNearest(const uint8_t* src, size_t src_stride, int elem, const std::vector<int>& ys,
                  const std::vector<int>& xs, uint8_t* dst) {
  size_t row_bytes = xs.size() * static_cast<size_t>(elem);
#if defined(__x86_64__) || defined(__i386__)
  static const bool ssse3 = __builtin_cpu_supports("ssse3");
  thread_local ByteShuffles plan;
  bool shuffle = ssse3 && elem == 1;
  if (shuffle) plan.Plan(xs, static_cast<int>(src_stride));
#endif
  for (size_t y = 0; y < ys.size(); ++y) {
    uint8_t* out = dst + y * row_bytes;
    // An output row that samples the same source row as the one before
    // (all but about one in k when enlarging by k) is a copy of it.
    if (y > 0 && ys[y] == ys[y - 1]) {
      std::memcpy(out, out - row_bytes, row_bytes);
      continue;
    }
    const uint8_t* row = src + static_cast<size_t>(ys[y]) * src_stride;
#if defined(__x86_64__) || defined(__i386__)
    if (shuffle) {
      ShuffleRow(row, xs, plan, out);
      continue;
    }
#endif
    if (elem == 1) {
      GatherRow(row, xs, out);
    } else {
      GatherWide<2>(row, xs, out);
    }
  }
}

void MapBoxes(const uint8_t* boxes, size_t k, const BoxMap& m, std::vector<float>* out,
              std::vector<size_t>* kept) {
  out->clear();
  kept->clear();
  for (size_t i = 0; i < k; ++i) {
    float b[4];
    std::memcpy(b, boxes + i * 16, 16);
    double x1 = b[0] * m.sx + m.bx, y1 = b[1] * m.sy + m.by;
    double x2 = b[2] * m.sx + m.bx, y2 = b[3] * m.sy + m.by;
    double area = (x2 - x1) * (y2 - y1);
    double cx1 = std::clamp(x1, 0.0, m.width), cx2 = std::clamp(x2, 0.0, m.width);
    double cy1 = std::clamp(y1, 0.0, m.height), cy2 = std::clamp(y2, 0.0, m.height);
    double seen = (cx2 - cx1) * (cy2 - cy1);
    // NaN coordinates fail both tests and are dropped with the rest.
    if (!(x2 > x1 && y2 > y1 && seen > 0 && seen >= m.min_visible * area)) continue;
    if (m.flip) {
      double l = m.width - cx2, r = m.width - cx1;
      cx1 = l;
      cx2 = r;
    }
    out->insert(out->end(), {static_cast<float>(cx1), static_cast<float>(cy1),
                             static_cast<float>(cx2), static_cast<float>(cy2)});
    kept->push_back(i);
  }
}

}  // namespace ssdfeed
