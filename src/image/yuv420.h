// The yuv420 record codec's pixels: RGB to a full-resolution Y plane and
// half-resolution Cb and Cr planes (BT.601 full range, the YCbCr of
// JPEG/JFIF), and back. The integer arithmetic, the rounding and the chroma
// downsampling are the format: docs/cache-format.md, "yuv420", states them
// and tests/cc/yuv420_test.cc pins them with a golden example.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ssdfeed {

// The planes of an h x w image: chroma planes are ceil(h/2) x ceil(w/2).
struct Yuv420Layout {
  size_t y_bytes = 0, chroma_h = 0, chroma_w = 0;
  size_t chroma_bytes() const { return chroma_h * chroma_w; }
  size_t total() const { return y_bytes + 2 * chroma_bytes(); }
};
Yuv420Layout Yuv420Of(int h, int w);

// The stored bytes of an h x w x c image: c == 3 the three planes (Y, then
// Cb, then Cr, each row after row); c == 1 the gray plane as it is. 0 for
// other channel counts (the codec refuses them).
size_t Yuv420StoredBytes(int h, int w, int c);

// rgb: h x w x 3 HWC. Writes Yuv420Of(h, w).total() bytes to planes.
void RgbToYuv420(const uint8_t* rgb, int h, int w, uint8_t* planes);

// The inverse, as written in the docs: each chroma sample serves the 2 x 2
// pixels it was averaged from (nearest upsampling). Writes h x w x 3 bytes
// to rgb. The codec decodes with TurboJPEG's SIMD conversion instead
// (tjDecodeYUVPlanes, fast upsampling), which gives these very bytes
// (libjpeg's constants and rounding): this one is the reference the tests
// hold it to.
void Yuv420ToRgb(const uint8_t* planes, int h, int w, uint8_t* rgb);

}  // namespace ssdfeed
