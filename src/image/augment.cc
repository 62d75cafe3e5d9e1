#include "image/augment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "image/cv_call.h"
#include "image/resample.h"
#include "image/yuv420_crop.h"
#include "ssdfeed/enum_names.h"
#include "util/hash.h"

namespace ssdfeed {

// The spellings of DType, Layout, AugmentKind (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(DType, "dtype", {DType::kUint8, "uint8"}, {DType::kFloat32, "float32"},
                   {DType::kFloat16, "float16"})
SSDFEED_ENUM_TABLE(Layout, "layout", {Layout::kNHWC, "NHWC"}, {Layout::kNCHW, "NCHW"})
SSDFEED_ENUM_TABLE(AugmentKind, "augment kind", {AugmentKind::kResizedCrop, "resized_crop"},
                   {AugmentKind::kFlip, "flip"},
                   {AugmentKind::kScaleJitterCrop, "scale_jitter_crop"})

namespace {

// Counter-based uniform draws: the same key gives the same numbers.
struct KeyedRng {
  uint64_t state;
  uint64_t Next() { return Mix64(state++); }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1p-53);
  }
  int Int(int lo, int hi) {  // inclusive
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
};

// Rounds half up and flushes what is under half's normal range to zero.
// Selects, not branches, so RenderSample's flat float16 loop vectorises
// (the same bits as the branching form it replaced, for all 2^32 floats).
uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  // Exponent and mantissa fields do not overlap, so + is |; the rounding
  // carry may reach exponent 31, which is infinity, as it should.
  uint32_t h = sign + (static_cast<uint32_t>(exp) << 10) + (mant >> 13) + ((mant >> 12) & 1u);
  h = exp <= 0 ? sign : h;
  h = exp >= 31 ? (sign | 0x7c00u) : h;
  return static_cast<uint16_t>(h);
}

// Writes px (h x w x C, HWC) into dst in layout as op(pixel, channel). C
// is a constant so the channel loop unrolls and the pixel loop vectorises.
template <int C, typename T, typename Op>
inline void Convert(const uint8_t* px, int h, int w, Layout layout, T* dst, Op op) {
  size_t plane = static_cast<size_t>(h) * w;
  if (layout == Layout::kNHWC) {
    for (size_t p = 0; p < plane; ++p)
      for (int k = 0; k < C; ++k) dst[p * C + k] = op(px[p * C + k], k);
    return;
  }
  for (size_t p = 0; p < plane; ++p)
    for (int k = 0; k < C; ++k) dst[k * plane + p] = op(px[p * C + k], k);
}

template <typename T, typename Op>
inline void ConvertAny(const uint8_t* px, int h, int w, int c, Layout layout, T* dst, Op op) {
  // PrepareSpec::channels() is 1 (gray) or 3.
  if (c == 3) return Convert<3>(px, h, w, layout, dst, op);
  Convert<1>(px, h, w, layout, dst, op);
}

// Float outputs: (pixel / 255 - mean) / std.
inline void Normalize(const uint8_t* px, int h, int w, int c, const OutputSpec& o, float* dst) {
  float scale[3] = {}, bias[3] = {};
  for (int k = 0; k < c; ++k) {
    scale[k] = 1.0f / (255.0f * o.std[k]);
    bias[k] = -o.mean[k] / o.std[k];
  }
  ConvertAny(px, h, w, c, o.layout, dst, [=](uint8_t v, int k) { return v * scale[k] + bias[k]; });
}

// A resized (and already mirrored) crop into uint8 NCHW, float32 or float16.
inline void ConvertCropImpl(const uint8_t* px, int h, int w, int c, const OutputSpec& o,
                            void* dst) {
  if (o.dtype == DType::kUint8)
    return ConvertAny(px, h, w, c, Layout::kNCHW, static_cast<uint8_t*>(dst),
                      [](uint8_t v, int) { return v; });
  if (o.dtype == DType::kFloat32) return Normalize(px, h, w, c, o, static_cast<float*>(dst));
  // Float32 first, then one flat pass to half: the flat loop vectorises,
  // a half conversion inside the strided ones did not (2x slower).
  size_t n = static_cast<size_t>(h) * w * c;
  thread_local std::vector<float> wide;
  wide.resize(n);
  Normalize(px, h, w, c, o, wide.data());
  auto* d = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(wide[i]);
}

// The same code compiled twice: the baseline x86-64 build has 16-byte
// vectors only and does the channel (de)interleaving one lane at a time;
// with AVX2 the float32 NCHW conversion runs 4x faster. No FMA: a fused
// multiply-add would round differently from the baseline, and a batch must
// not depend on which machine rendered it.
__attribute__((flatten)) void ConvertCropBase(const uint8_t* px, int h, int w, int c,
                                              const OutputSpec& o, void* dst) {
  ConvertCropImpl(px, h, w, c, o, dst);
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"), flatten)) void ConvertCropAvx2(const uint8_t* px, int h, int w,
                                                              int c, const OutputSpec& o,
                                                              void* dst) {
  ConvertCropImpl(px, h, w, c, o, dst);
}
#endif

std::atomic<bool> baseline_only{false};  // SetRenderBaselineOnly

void ConvertCrop(const uint8_t* px, int h, int w, int c, const OutputSpec& o, void* dst) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && !baseline_only.load(std::memory_order_relaxed))
    return ConvertCropAvx2(px, h, w, c, o, dst);
#endif
  ConvertCropBase(px, h, w, c, o, dst);
}

// The window (top, left, out_h x out_w) of an h x w x c image, `fill` where
// it reaches past the image, mirrored left to right when flip.
void CopyWindow(const uint8_t* img, int h, int w, int c, const CropBox& box, uint8_t* dst) {
  size_t row_bytes = static_cast<size_t>(box.width) * c;
  // The window's columns that lie on the image: [x0, x1).
  int x0 = std::clamp(-box.left, 0, box.width), x1 = std::clamp(w - box.left, x0, box.width);
  for (int y = 0; y < box.height; ++y) {
    uint8_t* out = dst + y * row_bytes;
    int sy = box.top + y;
    if (sy < 0 || sy >= h) {
      std::memset(out, box.fill, row_bytes);
      continue;
    }
    std::memset(out, box.fill, static_cast<size_t>(x0) * c);
    std::memcpy(out + static_cast<size_t>(x0) * c,
                img + (static_cast<size_t>(sy) * w + box.left + x0) * c,
                static_cast<size_t>(x1 - x0) * c);
    std::memset(out + static_cast<size_t>(x1) * c, box.fill,
                static_cast<size_t>(box.width - x1) * c);
    if (!box.flip) continue;
    for (int l = 0, r = box.width - 1; l < r; ++l, --r)
      std::swap_ranges(out + static_cast<size_t>(l) * c, out + static_cast<size_t>(l + 1) * c,
                       out + static_cast<size_t>(r) * c);
  }
}

}  // namespace

void SetRenderBaselineOnly(bool on) { baseline_only.store(on, std::memory_order_relaxed); }

uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t id) {
  return Mix64(seed ^ Mix64(epoch ^ Mix64(id + 0x9e37)));
}

size_t DTypeSize(DType t) { return t == DType::kUint8 ? 1 : t == DType::kFloat16 ? 2 : 4; }

SampleShape ServedSampleShape(const PrepareSpec& p, const AugmentSpec& a) {
  SampleShape s;
  s.channels = p.channels();
  if (a.enabled && a.kind != AugmentKind::kFlip) {  // a flip keeps the prepared shape
    s.height = a.height;
    s.width = a.width;
  } else if (p.crop_h > 0) {
    s.height = p.crop_h;
    s.width = p.crop_w;
  } else if (p.resize_h > 0) {
    s.height = p.resize_h;
    s.width = p.resize_w;
  }
  return s;
}

namespace {

CropBox ResizedCropBox(const AugmentSpec& a, int H, int W, KeyedRng& rng) {
  CropBox b;
  double area = static_cast<double>(H) * W;
  double lr0 = std::log(a.ratio_min), lr1 = std::log(a.ratio_max);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    double target = area * rng.Uniform(a.scale_min, a.scale_max);
    double ratio = std::exp(rng.Uniform(lr0, lr1));
    int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      b = {rng.Int(0, H - h), rng.Int(0, W - w), h, w, false};
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: centre crop within the ratio bounds
    double in_ratio = static_cast<double>(W) / H;
    int w = W, h = H;
    if (in_ratio < a.ratio_min) {
      h = static_cast<int>(std::lround(w / a.ratio_min));
    } else if (in_ratio > a.ratio_max) {
      w = static_cast<int>(std::lround(h * a.ratio_max));
    }
    b = {(H - h) / 2, (W - w) / 2, h, w, false};
  }
  b.flip = a.flip && (rng.Next() & 1);
  return b;
}

bool DrawFlip(const AugmentSpec& a, KeyedRng& rng) {
  return a.flip && rng.Uniform(0, 1) < a.flip_prob;
}

// torchvision's resize to a shorter side of s: the longer side is
// int(s * long / short), truncated as Python's int() does.
void ResizedToShortSide(int H, int W, int s, int* h, int* w) {
  int short_side = std::min(H, W), long_side = std::max(H, W);
  int long_new = static_cast<int>(static_cast<double>(s) * long_side / short_side);
  *h = H <= W ? s : long_new;
  *w = H <= W ? long_new : s;
}

CropBox ScaleJitterBox(const AugmentSpec& a, int H, int W, KeyedRng& rng) {
  CropBox b;
  ResizedToShortSide(H, W, rng.Int(a.jitter_min, a.jitter_max), &b.resize_h, &b.resize_w);
  b.flip = DrawFlip(a, rng);
  // Padded (bottom, right) to at least the crop, then RandomCrop's offset.
  int padded_h = std::max(b.resize_h, a.height), padded_w = std::max(b.resize_w, a.width);
  b.top = rng.Int(0, padded_h - a.height);
  int left = rng.Int(0, padded_w - a.width);
  // The reference crops the flipped image at `left`: that is the window
  // mirrored about the image's centre, flipped after (padding included,
  // which then lies left of the image and ends up on the right again).
  b.left = b.flip ? b.resize_w - left - a.width : left;
  b.height = a.height;
  b.width = a.width;
  b.fill = a.fill;
  b.mask_fill = a.mask_fill;
  return b;
}

}  // namespace

CropBox SampleCrop(const AugmentSpec& a, int H, int W, uint64_t key) {
  KeyedRng rng{key};
  switch (a.kind) {
    case AugmentKind::kFlip:
      return {0, 0, H, W, DrawFlip(a, rng)};
    case AugmentKind::kScaleJitterCrop:
      return ScaleJitterBox(a, H, W, rng);
    case AugmentKind::kResizedCrop:
      break;
  }
  return ResizedCropBox(a, H, W, rng);
}

namespace {

// A windowed box (scale jitter): the source resized to resize_h x resize_w,
// then its window, padded and mirrored, into dst (out_h x out_w x c).
Status RenderWindow(const PixelsView& src, const CropBox& box, uint8_t* dst) {
  int c = src.channels;
  const uint8_t* resized = src.pixels;
  thread_local std::vector<uint8_t> buf;
  if (box.resize_h != src.height || box.resize_w != src.width) {
    buf.resize(static_cast<size_t>(box.resize_h) * box.resize_w * c);
    Status s = CvCall("render", [&] {
      cv::Mat img(src.height, src.width, CV_8UC(c), const_cast<uint8_t*>(src.pixels));
      cv::Mat target(box.resize_h, box.resize_w, CV_8UC(c), buf.data());
      ResizeAntialiased(img, target, false);
    });
    if (!s.ok())
      return s.WithContext("resize of a " + std::to_string(src.height) + "x" +
                           std::to_string(src.width) + " image to " + std::to_string(box.resize_h) +
                           "x" + std::to_string(box.resize_w));
    resized = buf.data();
  }
  CopyWindow(resized, box.resize_h, box.resize_w, c, box, dst);
  return Status::OK();
}

// draw(target) writes out_h x out_w x c uint8 HWC pixels: straight into
// dst where out is uint8 NHWC, else into scratch, converted from there.
template <typename Draw>
Status RenderConverted(int out_h, int out_w, int c, const OutputSpec& out, void* dst,
                       std::vector<uint8_t>* scratch, Draw draw) {
  bool direct = out.dtype == DType::kUint8 && out.layout == Layout::kNHWC;
  size_t bytes = static_cast<size_t>(out_h) * out_w * c;
  if (!direct && scratch->size() < bytes) scratch->resize(bytes);
  auto* target = static_cast<uint8_t*>(direct ? dst : scratch->data());
  SSDFEED_RETURN_IF_ERROR(draw(target));
  if (!direct) ConvertCrop(target, out_h, out_w, c, out, dst);
  return Status::OK();
}

// The box of src resized to out_h x out_w (mirrored when box.flip).
Status RenderCrop(const PixelsView& src, const CropBox& box, int out_h, int out_w,
                  uint8_t* target) {
  Status s = CvCall("render", [&] {
    int type = CV_8UC(src.channels);
    cv::Mat img(src.height, src.width, type, const_cast<uint8_t*>(src.pixels));
    cv::Mat roi = img(cv::Rect(box.left, box.top, box.width, box.height));
    cv::Mat t(out_h, out_w, type, target);
    ResizeAntialiased(roi, t, box.flip);
  });
  if (!s.ok())
    return s.WithContext("crop " + std::to_string(box.height) + "x" + std::to_string(box.width) +
                         " of a " + std::to_string(src.height) + "x" + std::to_string(src.width) +
                         " image to " + std::to_string(out_h) + "x" + std::to_string(out_w));
  return Status::OK();
}

}  // namespace

Status RenderSample(const PixelsView& src, const CropBox& box, int out_h, int out_w,
                    const OutputSpec& out, void* dst, std::vector<uint8_t>* scratch) {
  if (box.windowed() && (box.height != out_h || box.width != out_w))
    return Status::InvalidArgument("a scale-jitter window must be the output size");
  return RenderConverted(out_h, out_w, src.channels, out, dst, scratch, [&](uint8_t* target) {
    return box.windowed() ? RenderWindow(src, box, target)
                          : RenderCrop(src, box, out_h, out_w, target);
  });
}

Status RenderYuv420Sample(std::string_view planes, int h, int w, const CropBox& box, int out_h,
                          int out_w, const OutputSpec& out, void* dst,
                          std::vector<uint8_t>* scratch) {
  return RenderConverted(out_h, out_w, 3, out, dst, scratch, [&](uint8_t* target) {
    return CropYuv420(planes, h, w, box, out_h, out_w, target);
  });
}

}  // namespace ssdfeed
