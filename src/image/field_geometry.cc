#include "image/field_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// Elements are copied through memcpy: a record's field data need not be
// aligned to 2 bytes in memory (it is to 8 within the section).
template <int E>
void Remap(const uint8_t* src, size_t src_stride, const std::vector<int>& ys,
           const std::vector<int>& xs, uint8_t* dst) {
  size_t w = xs.size();
  for (size_t y = 0; y < ys.size(); ++y) {
    const uint8_t* row = src + static_cast<size_t>(ys[y]) * src_stride;
    uint8_t* out = dst + y * w * E;
    for (size_t x = 0; x < w; ++x)
      std::memcpy(out + x * E, row + static_cast<size_t>(xs[x]) * E, E);
  }
}

}  // namespace

void RemapNearest(const uint8_t* src, size_t src_stride, int elem, const std::vector<int>& ys,
                  const std::vector<int>& xs, uint8_t* dst) {
  if (elem == 1) return Remap<1>(src, src_stride, ys, xs, dst);
  Remap<2>(src, src_stride, ys, xs, dst);
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
