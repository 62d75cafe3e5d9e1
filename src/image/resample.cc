#include "image/resample.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

namespace ssdfeed {

void ResizeAntialiased(const cv::Mat& src, cv::Mat& dst) {
  if (src.rows == dst.rows && src.cols == dst.cols) {
    src.copyTo(dst);
    return;
  }
  double fx = static_cast<double>(src.cols) / dst.cols;
  double fy = static_cast<double>(src.rows) / dst.rows;
  if (fx <= 1 && fy <= 1) {
    cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
    return;
  }
  bool integer = src.cols % dst.cols == 0 && src.rows % dst.rows == 0;
  if (integer) {  // OpenCV's fast path: a true box average
    cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_AREA);
    return;
  }
  double sx = std::max(0.0, (fx - 1) / 2), sy = std::max(0.0, (fy - 1) / 2);
  if (sx < kIdentityBlurSigma && sy < kIdentityBlurSigma) {  // the blur would change nothing
    cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
    return;
  }
  thread_local cv::Mat blurred;
  auto ksize = [](double s) {
    return s < kIdentityBlurSigma ? 1 : 2 * static_cast<int>(std::ceil(3 * s)) + 1;
  };
  cv::GaussianBlur(src, blurred, cv::Size(ksize(sx), ksize(sy)), std::max(sx, 1e-3),
                   std::max(sy, 1e-3), cv::BORDER_REFLECT_101);
  cv::resize(blurred, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
}

}  // namespace ssdfeed
