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

// The chroma row (or column) nearest image row (column) y, and the next
// nearest: its neighbour above for an even y, below for an odd one, itself
// at an edge; n is the chroma plane's height (width).
inline size_t Yuv420NearRow(size_t y) { return y / 2; }
inline size_t Yuv420FarRow(size_t y, size_t n) {
  size_t c = y / 2;
  if (y % 2 == 1) return c + 1 < n ? c + 1 : n - 1;
  return c == 0 ? 0 : c - 1;
}

// Cb or Cr at full resolution: the chroma plane of an h x w image
// (Yuv420Of(h, w)) upsampled 2x by the triangle filter, JPEG's centred
// chroma siting (libjpeg's "fancy" upsampling, rounded half up): pixel
// (y, x) weighs its block's sample 9/16, the nearest block's across its
// row and across its column 3/16 each, the diagonal one 1/16; at the edges
// the last row or column is repeated. Writes h x w bytes to out.
void UpsampleChroma(const uint8_t* chroma, int h, int w, uint8_t* out);

// The inverse, as written in the docs: chroma upsampled by the triangle
// filter (UpsampleChroma's weights, computed here per pixel), then
// libjpeg's YCbCr -> RGB. Writes h x w x 3 bytes to rgb. The codec
// decodes with Yuv420ToRgbAvx2, or upsamples with UpsampleChroma and
// converts with TurboJPEG's SIMD (tjDecodeYUVPlanes, 4:4:4); both give these
// very bytes (libjpeg's constants and rounding): this one is the reference
// the tests hold them to.
void Yuv420ToRgb(const uint8_t* planes, int h, int w, uint8_t* rgb);

// Yuv420ToRgb's very bytes in one AVX2 pass per row (yuv420_avx2.cc); false,
// with nothing written, for images narrower than 32 pixels, where the CPU
// has no AVX2, or where SetYuv420PortableOnly(true) asked for the portable
// route (UpsampleChroma, then TurboJPEG's 4:4:4 conversion), which tests
// compare it with.
bool Yuv420ToRgbAvx2(const uint8_t* planes, int h, int w, uint8_t* rgb);
void SetYuv420PortableOnly(bool on);

// n pixels of full-resolution Y, Cb and Cr (4:4:4) to n x 3 RGB by the
// conversion above (libjpeg's constants and rounding): with AVX2 where it
// can (Ycc444ToRgbAvx2: false, nothing written, for n under 32, no AVX2
// or SetYuv420PortableOnly), else pixel by pixel, the same bytes.
void Ycc444ToRgb(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t n, uint8_t* rgb);
bool Ycc444ToRgbAvx2(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t n,
                     uint8_t* rgb);

}  // namespace ssdfeed
