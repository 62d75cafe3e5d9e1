#include "image/augment.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "image/flip.h"
#include "image/resample.h"
#include "util/hash.h"

namespace ssdfeed {

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

// Writes px (h x w x C, HWC) into dst in layout as op(pixel, channel),
// reading each row mirrored when Flip, so the flip costs no pass of its
// own. C and Flip are constants so the loops unroll and vectorise: with
// them variables, this ran 10-15% slower than the flat loop it replaced.
template <int C, bool Flip, typename T, typename Op>
void Convert(const uint8_t* px, int h, int w, Layout layout, T* dst, Op op) {
  size_t plane = static_cast<size_t>(h) * w, row = static_cast<size_t>(w) * C;
  for (int y = 0; y < h; ++y) {
    const uint8_t* in = px + y * row;
    size_t p = static_cast<size_t>(y) * w;
    auto at = [&](int x) { return in + (Flip ? (w - 1 - x) : x) * C; };
    if (layout == Layout::kNCHW) {
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < C; ++k) dst[k * plane + p + x] = op(at(x)[k], k);
    } else {
      T* out = dst + p * C;
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < C; ++k) out[x * C + k] = op(at(x)[k], k);
    }
  }
}

template <typename T, typename Op>
void ConvertAny(const uint8_t* px, int h, int w, int c, bool flip, Layout layout, T* dst, Op op) {
  // PrepareSpec::channels() is 1 (gray) or 3.
  if (c == 3) {
    flip ? Convert<3, true>(px, h, w, layout, dst, op)
         : Convert<3, false>(px, h, w, layout, dst, op);
  } else {
    flip ? Convert<1, true>(px, h, w, layout, dst, op)
         : Convert<1, false>(px, h, w, layout, dst, op);
  }
}

// Float outputs: (pixel / 255 - mean) / std, through conv to T.
template <typename T, typename Conv>
void Normalize(const uint8_t* px, int h, int w, int c, bool flip, const OutputSpec& o, T* dst,
               Conv conv) {
  float scale[3] = {}, bias[3] = {};
  for (int k = 0; k < c; ++k) {
    scale[k] = 1.0f / (255.0f * o.std[k]);
    bias[k] = -o.mean[k] / o.std[k];
  }
  ConvertAny(px, h, w, c, flip, o.layout, dst,
             [=](uint8_t v, int k) { return conv(v * scale[k] + bias[k]); });
}

}  // namespace

uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t id) {
  return Mix64(seed ^ Mix64(epoch ^ Mix64(id + 0x9e37)));
}

size_t DTypeSize(DType t) { return t == DType::kUint8 ? 1 : t == DType::kFloat16 ? 2 : 4; }

SampleShape ServedSampleShape(const PrepareSpec& p, const AugmentSpec& a) {
  SampleShape s;
  s.channels = p.channels();
  if (a.enabled) {
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

CropBox SampleCrop(const AugmentSpec& a, int H, int W, uint64_t key) {
  KeyedRng rng{key};
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

void RenderSample(const PixelsView& src, const CropBox& box, int out_h, int out_w,
                  const OutputSpec& out, void* dst, std::vector<uint8_t>* scratch) {
  int c = src.channels;
  int type = CV_8UC(c);
  cv::Mat img(src.height, src.width, type, const_cast<uint8_t*>(src.pixels));
  cv::Mat roi = img(cv::Rect(box.left, box.top, box.width, box.height));
  bool direct = out.dtype == DType::kUint8 && out.layout == Layout::kNHWC;
  size_t bytes = static_cast<size_t>(out_h) * out_w * c;
  // Flipped uint8 HWC: resized into scratch, then mirrored into dst. The
  // other outputs read the scratch mirrored as they convert it.
  bool into_dst = direct && !box.flip;
  if (!into_dst && scratch->size() < bytes) scratch->resize(bytes);
  cv::Mat target(out_h, out_w, type, into_dst ? dst : scratch->data());
  ResizeAntialiased(roi, target);
  if (into_dst) return;
  if (direct) {
    FlipHorizontalInto(target.data, static_cast<uint8_t*>(dst), out_h, out_w, c);
  } else if (out.dtype == DType::kUint8) {  // uint8 NCHW
    ConvertAny(target.data, out_h, out_w, c, box.flip, Layout::kNCHW, static_cast<uint8_t*>(dst),
               [](uint8_t v, int) { return v; });
  } else if (out.dtype == DType::kFloat32) {
    Normalize(target.data, out_h, out_w, c, box.flip, out, static_cast<float*>(dst),
              [](float v) { return v; });
  } else {
    // Float32 first, then one flat pass to half: the flat loop vectorises,
    // a half conversion inside the strided ones did not (2x slower).
    thread_local std::vector<float> wide;
    wide.resize(bytes);
    Normalize(target.data, out_h, out_w, c, box.flip, out, wide.data(), [](float v) { return v; });
    auto* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < bytes; ++i) d[i] = FloatToHalf(wide[i]);
  }
}

}  // namespace ssdfeed
