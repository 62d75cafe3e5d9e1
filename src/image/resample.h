// The one resampling routine of prepare and augment.
#pragma once

#include <opencv2/core.hpp>

namespace ssdfeed {

// Resizes src into dst (dst's size and type set by the caller). Shrinking is
// antialiased: an exact box average for integer factors, otherwise a
// Gaussian low-pass (sigma = (factor - 1) / 2 per axis, as scikit-image's
// anti_aliasing) then bilinear sampling. Enlarging is bilinear. Measured on a
// 400x450 -> 256x288 RGB image: 0.2 ms, where OpenCV's INTER_AREA at a
// fractional factor takes 1.05 ms. With `mirror`, dst is the result
// flipped left to right (the same bytes as flipping it after). Throws what
// OpenCV throws: its callers wrap it in CvCall (image/cv_call.h).
void ResizeAntialiased(const cv::Mat& src, cv::Mat& dst, bool mirror = false);

// Which of those ResizeAntialiased takes for a src_h x src_w source resized
// to dst_h x dst_w (the yuv420 crop follows it: image/yuv420_crop.h).
enum class ResizeRoute {
  kCopy,          // the same size
  kBilinear,      // an enlargement, or a shrink the blur would leave as it is
  kBoxAverage,    // a shrink by whole factors on both axes
  kBlurBilinear,  // a Gaussian low-pass, then bilinear
};
ResizeRoute RouteOf(int src_h, int src_w, int dst_h, int dst_w);

// Below this sigma a 3-tap Gaussian's side taps (at most exp(-8) = 0.0003)
// round to zero in OpenCV's 8-bit fixed-point kernel, so the blur is the
// identity and is skipped along that axis: same bytes, less work. Most of a
// RandomResizedCrop's shrinks (at most 1.5x) are in this range.
constexpr double kIdentityBlurSigma = 0.25;

}  // namespace ssdfeed
