#include "image/resample.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "image/bilinear.h"

namespace ssdfeed {

namespace {

// cv::resize(INTER_LINEAR)'s bytes, through the faster kernel where it
// applies (8-bit, 1 or 3 channels, AVX2).
void Bilinear(const cv::Mat& src, cv::Mat& dst) {
  if (src.depth() == CV_8U && dst.type() == src.type() &&
      ResizeBilinearU8(src.data, src.rows, src.cols, src.step, src.channels(), dst.data, dst.rows,
                       dst.cols, dst.step))
    return;
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
}

}  // namespace

void ResizeAntialiased(const cv::Mat& src, cv::Mat& dst) {
  if (src.rows == dst.rows && src.cols == dst.cols) {
    src.copyTo(dst);
    return;
  }
  double fx = static_cast<double>(src.cols) / dst.cols;
  double fy = static_cast<double>(src.rows) / dst.rows;
  if (fx <= 1 && fy <= 1) {
    Bilinear(src, dst);
    return;
  }
  bool integer = src.cols % dst.cols == 0 && src.rows % dst.rows == 0;
  if (integer) {  // OpenCV's fast path: a true box average
    cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_AREA);
    return;
  }
  double sx = std::max(0.0, (fx - 1) / 2), sy = std::max(0.0, (fy - 1) / 2);
  if (sx < kIdentityBlurSigma && sy < kIdentityBlurSigma) {  // the blur would change nothing
    Bilinear(src, dst);
    return;
  }
  thread_local cv::Mat blurred;
  auto ksize = [](double s) {
    return s < kIdentityBlurSigma ? 1 : 2 * static_cast<int>(std::ceil(3 * s)) + 1;
  };
  cv::GaussianBlur(src, blurred, cv::Size(ksize(sx), ksize(sy)), std::max(sx, 1e-3),
                   std::max(sy, 1e-3), cv::BORDER_REFLECT_101);
  Bilinear(blurred, dst);
}

}  // namespace ssdfeed
