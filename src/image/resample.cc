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

}  // namespace

void ResizeAntialiased(const cv::Mat& src, cv::Mat& dst, bool mirror) {
  if (src.rows == dst.rows && src.cols == dst.cols)
    return MaybeMirrored(dst, mirror, [&](cv::Mat& d) { src.copyTo(d); });
  double fx = static_cast<double>(src.cols) / dst.cols;
  double fy = static_cast<double>(src.rows) / dst.rows;
  if (fx <= 1 && fy <= 1) return Bilinear(src, dst, mirror);
  bool integer = src.cols % dst.cols == 0 && src.rows % dst.rows == 0;
  if (integer) {  // OpenCV's fast path: a true box average
    return MaybeMirrored(dst, mirror,
                         [&](cv::Mat& d) { cv::resize(src, d, d.size(), 0, 0, cv::INTER_AREA); });
  }
  double sx = std::max(0.0, (fx - 1) / 2), sy = std::max(0.0, (fy - 1) / 2);
  // Under the threshold on both axes the blur would change nothing.
  if (sx < kIdentityBlurSigma && sy < kIdentityBlurSigma) return Bilinear(src, dst, mirror);
  thread_local cv::Mat blurred;
  auto ksize = [](double s) {
    return s < kIdentityBlurSigma ? 1 : 2 * static_cast<int>(std::ceil(3 * s)) + 1;
  };
  cv::GaussianBlur(src, blurred, cv::Size(ksize(sx), ksize(sy)), std::max(sx, 1e-3),
                   std::max(sy, 1e-3), cv::BORDER_REFLECT_101);
  Bilinear(blurred, dst, mirror);
}

}  // namespace ssdfeed
