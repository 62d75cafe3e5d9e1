// The geometry masks and boxes share with their image: nearest-neighbour
// sampling (OpenCV's INTER_NEAREST) and the box transform of a resize,
// crop and flip. Used by preparation (field_prepare) and augmentation
// (field_augment), so the two cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ssdfeed {

// For outputs off..off+n-1 of a resize from src_n to dst_n elements, the
// source index cv::resize(INTER_NEAREST) takes: min(floor(i * (1 / (dst_n /
// src_n))), src_n - 1), the same double arithmetic, so the same picks even
// where i * scale is an integer. With mirror, entry j is output
// off+n-1-j's (a flipped result needs no pass of its own). Not
// INTER_NEAREST_EXACT and not PIL's NEAREST, which sample pixel centres.
void NearestIndex(int src_n, int dst_n, int off, int n, bool mirror, std::vector<int>* idx);

// dst[y][x] = src[ys[y]][xs[x]] for elements of elem (1 or 2) bytes; dst
// rows are packed (xs.size() elements). Every source row is src_stride
// readable bytes (8-bit rows are read 16 bytes at a time within them).
void RemapNearest(const uint8_t* src, size_t src_stride, int elem, const std::vector<int>& ys,
                  const std::vector<int>& xs, uint8_t* dst);

// One affine map of box coordinates: x' = x * sx + bx, y' = y * sy + by,
// then clipped to [0, width] x [0, height] and mirrored (x' = width - x)
// when flip. A box is kept when its area after clipping is positive and at
// least min_visible of its area before (the ratio is the same in either
// coordinate system, as the map only scales and shifts).
struct BoxMap {
  double sx = 1, bx = 0, sy = 1, by = 0;
  double width = 0, height = 0;
  bool flip = false;
  double min_visible = 0.25;
};

// boxes: k * 4 floats xyxy (unaligned bytes are fine); the kept ones go to
// *out and their indices to *kept.
void MapBoxes(const uint8_t* boxes, size_t k, const BoxMap& m, std::vector<float>* out,
              std::vector<size_t>* kept);

}  // namespace ssdfeed
