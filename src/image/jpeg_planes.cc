// Measured on 400 photo-like 0.2 MP JPEGs (q90, 4:2:0; build/bench/
// decode_bench), one thread, per CPU-second: TurboJPEG's decode to RGB
// 1,290 images/s, to planes 1,500; the prepare to short side 256 1,024
// through RGB, 1,137 through the planes: the chroma upsampling and colour
// conversion run on the target's pixels (0.47x of these), and the resize
// reads 1.5 bytes a pixel instead of 3.
#include "image/jpeg_planes.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "image/bilinear.h"
#include "image/cv_call.h"
#include "image/resample.h"
#include "util/stage_clock.h"

namespace ssdfeed {

tjscalingfactor PickDctScale(int w, int h, int min_w, int min_h) {
  tjscalingfactor best{1, 1};
  if (min_w <= 0 || min_h <= 0) return best;
  int n = 0;
  tjscalingfactor* sf = tjGetScalingFactors(&n);
  for (int i = 0; i < n; ++i) {
    // Only 1/2, 1/4 and 1/8: libjpeg-turbo's other M/8 scalings use plain C
    // IDCTs that are slower than a full-size SIMD decode (measured: 6/8 at
    // 1,035 images/s against 1,290 for the full size on 0.2 MP photos).
    if (sf[i].num != 1 || (sf[i].denom != 2 && sf[i].denom != 4 && sf[i].denom != 8)) continue;
    int sw = TJSCALED(w, sf[i]);
    int sh = TJSCALED(h, sf[i]);
    if (sw >= min_w && sh >= min_h && sw < TJSCALED(w, best)) best = sf[i];
  }
  return best;
}

bool ResizesInPlanes(int subsamp, int colorspace, bool gray, int sh, int sw, int th, int tw) {
  bool planar = subsamp == TJSAMP_444 || subsamp == TJSAMP_422 || subsamp == TJSAMP_420 ||
                subsamp == TJSAMP_440;
  return !gray && colorspace == TJCS_YCbCr && planar && th < sh && tw < sw && th > 0 && tw > 0;
}

namespace {

constexpr int kPlanes = 3;

// An h x w plane over img's pixels.
cv::Mat PlaneMat(Image* img, int h, int w) {
  img->Reset(h, w, 1);
  return cv::Mat(h, w, CV_8UC1, img->pixels.data());
}

// Resizes a chroma plane that samples every fx-th column and fy-th row of
// an sh x sw image to that image's th x tw, into *out. The plane has
// ceil(sw / fx) columns: at an odd side its last sample stands for one
// pixel, not two, so the scale is the image's (sw / fx / tw), not the
// plane's, or chroma would drift from luma across the image. Shrinking is
// low-passed as ResizeAntialiased does (the Gaussian of sigma
// (factor - 1) / 2).
void ResizeChroma(const cv::Mat& plane, int fx, int fy, int sh, int sw, int th, int tw,
                  cv::Mat* out) {
  double sx = static_cast<double>(sw) / fx / tw, sy = static_cast<double>(sh) / fy / th;
  double gx = std::max(0.0, (sx - 1) / 2), gy = std::max(0.0, (sy - 1) / 2);
  const cv::Mat* src = &plane;
  thread_local cv::Mat blurred, wider;
  if (gx >= kIdentityBlurSigma || gy >= kIdentityBlurSigma) {
    auto ksize = [](double g) {
      return g < kIdentityBlurSigma ? 1 : 2 * static_cast<int>(std::ceil(3 * g)) + 1;
    };
    cv::GaussianBlur(plane, blurred, cv::Size(ksize(gx), ksize(gy)), std::max(gx, 1e-3),
                     std::max(gy, 1e-3), cv::BORDER_REFLECT_101);
    src = &blurred;
  }
  out->create(th, tw, CV_8UC1);
  if (ResizeBilinearU8AtScale(src->data, src->rows, src->cols, src->step, 1, out->data, th, tw,
                              out->step, 1 / sy, 1 / sx))
    return;
  // OpenCV maps with exactly these scales when given no size, and makes
  // round(columns / sx) >= tw columns (rows likewise): the top-left th x tw.
  cv::resize(*src, wider, cv::Size(), 1 / sx, 1 / sy, cv::INTER_LINEAR);
  wider(cv::Rect(0, 0, tw, th)).copyTo(*out);
}

}  // namespace

Status DecodeJpegResizedInPlanes(tjhandle tj, std::string_view bytes, int sw, int sh, int subsamp,
                                 int th, int tw, Image* out) {
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  thread_local Image decoded[kPlanes];
  thread_local cv::Mat resized[kPlanes];
  cv::Mat from[kPlanes];
  unsigned char* decoded_planes[kPlanes];
  for (int i = 0; i < kPlanes; ++i) {
    from[i] = PlaneMat(&decoded[i], tjPlaneHeight(i, sh, subsamp), tjPlaneWidth(i, sw, subsamp));
    decoded_planes[i] = from[i].data;
  }
  if (tjDecompressToYUVPlanes(tj, src, bytes.size(), decoded_planes, sw, nullptr, sh, 0) != 0)
    return Status::Corruption(std::string("corrupt JPEG: ") + tjGetErrorStr2(tj));
  MarkStage(Tmr::kDecode);  // the rest is prepare (resize in the planes, to RGB)
  int fx = tjMCUWidth[subsamp] / 8, fy = tjMCUHeight[subsamp] / 8;
  SSDFEED_RETURN_IF_ERROR(CvCall("resize of a JPEG's planes", [&] {
    // TurboJPEG pads the luma plane to whole chroma samples: only the
    // image's own sw x sh pixels are resized (a blur's border may read the
    // pad row or column, decoded from what the encoder put there, in
    // practice the edge repeated).
    resized[0].create(th, tw, CV_8UC1);
    ResizeAntialiased(from[0](cv::Rect(0, 0, sw, sh)), resized[0]);
    for (int i = 1; i < kPlanes; ++i) {
      if (from[i].cols * fx != sw || from[i].rows * fy != sh) {
        ResizeChroma(from[i], fx, fy, sh, sw, th, tw, &resized[i]);
        continue;
      }
      resized[i].create(th, tw, CV_8UC1);  // even sides: the same maps, a faster kernel
      ResizeAntialiased(from[i], resized[i]);
    }
  }));
  const unsigned char* planes[kPlanes];
  int strides[kPlanes];
  for (int i = 0; i < kPlanes; ++i) {
    planes[i] = resized[i].data;
    strides[i] = static_cast<int>(resized[i].step);
  }
  out->Reset(th, tw, 3);
  // All three planes are th x tw by now: TurboJPEG only converts (4:4:4).
  if (tjDecodeYUVPlanes(tj, planes, strides, TJSAMP_444, out->pixels.data(), tw, 0, th, TJPF_RGB,
                        0) != 0)
    return Status::IOError(std::string("YCbCr to RGB failed: ") + tjGetErrorStr2(tj));
  return Status::OK();
}

}  // namespace ssdfeed
