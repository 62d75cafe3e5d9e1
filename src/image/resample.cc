#include "image/resample.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "image/bilinear.h"
#include "image/flip.h"

namespace ssdfeed {

namespace {

// Writes r(src), mirrored when asked, into dst: straight in unmirrored,
// else through a buffer and FlipHorizontalInto.
template <typename Resize>
void MaybeMirrored(cv::Mat& dst, bool mirror, Resize r) {
  if (!mirror) return r(dst);
  thread_local cv::Mat unflipped;
  unflipped.create(dst.size(), dst.type());
  r(unflipped);
  for (int y = 0; y < dst.rows; ++y)  // row by row: dst may be a strided view
    FlipHorizontalInto(unflipped.ptr(y), dst.ptr(y), 1, dst.cols, dst.channels());
}

// cv::resize(INTER_LINEAR)'s bytes, through the faster kernel where it
// applies (8-bit, 1 or 3 channels, AVX2), which also mirrors for free.
void Bilinear(const cv::Mat& src, cv::Mat& dst, bool mirror) {
  if (src.depth() == CV_8U && dst.type() == src.type() &&
      ResizeBilinearU8(src.data, src.rows, src.cols, src.step, src.channels(), dst.data, dst.rows,
                       dst.cols, dst.step, mirror))
    return;
  MaybeMirrored(dst, mirror,
                [&](cv::Mat& d) { cv::resize(src, d, d.size(), 0, 0, cv::INTER_LINEAR); });
}

// The antialiasing blur's sigma along an axis of n pixels shrunk to m:
// (factor - 1) / 2, as scikit-image's anti_aliasing.
double BlurSigma(int n, int m) { return std::max(0.0, (static_cast<double>(n) / m - 1) / 2); }

}  // namespace

ResizeRoute RouteOf(int src_h, int src_w, int dst_h, int dst_w) {
  if (src_h == dst_h && src_w == dst_w) return ResizeRoute::kCopy;
  double fx = static_cast<double>(src_w) / dst_w, fy = static_cast<double>(src_h) / dst_h;
  if (fx <= 1 && fy <= 1) return ResizeRoute::kBilinear;
  // OpenCV's fast path: a true box average.
  if (src_w % dst_w == 0 && src_h % dst_h == 0) return ResizeRoute::kBoxAverage;
  // Under the threshold on both axes the blur would change nothing.
  if (BlurSigma(src_w, dst_w) < kIdentityBlurSigma && BlurSigma(src_h, dst_h) < kIdentityBlurSigma)
    return ResizeRoute::kBilinear;
  return ResizeRoute::kBlurBilinear;
}

void ResizeAntialiased(const cv::Mat& src, cv::Mat& dst, bool mirror) {
  switch (RouteOf(src.rows, src.cols, dst.rows, dst.cols)) {
    case ResizeRoute::kCopy:
      return MaybeMirrored(dst, mirror, [&](cv::Mat& d) { src.copyTo(d); });
    case ResizeRoute::kBilinear:
      return Bilinear(src, dst, mirror);
    case ResizeRoute::kBoxAverage:
      return MaybeMirrored(dst, mirror,
                           [&](cv::Mat& d) { cv::resize(src, d, d.size(), 0, 0, cv::INTER_AREA); });
    case ResizeRoute::kBlurBilinear:
      break;
  }
  double sx = BlurSigma(src.cols, dst.cols), sy = BlurSigma(src.rows, dst.rows);
  thread_local cv::Mat blurred;
  auto ksize = [](double s) {
    return s < kIdentityBlurSigma ? 1 : 2 * static_cast<int>(std::ceil(3 * s)) + 1;
  };
  cv::GaussianBlur(src, blurred, cv::Size(ksize(sx), ksize(sy)), std::max(sx, 1e-3),
                   std::max(sy, 1e-3), cv::BORDER_REFLECT_101);
  Bilinear(blurred, dst, mirror);
}

}  // namespace ssdfeed
