// Bilinear resizing of uint8 images with 1 or 3 channels, giving the bytes
// OpenCV 4.6's cv::resize(INTER_LINEAR) gives on x86-64, in 40-45% of the
// time (one core: a RandomResizedCrop to 224x224 63 -> 25 us, a 420x345 ->
// 311x256 prepare 115 -> 52 us).
//
// Why not cv::resize: for 3 channels its horizontal pass moves one pixel
// per step through two 4-byte loads. That pass took most of the 63 us a
// RandomResizedCrop of a 311x256 image to 224x224 took, and the resize
// was 13% of a cold epoch's CPU in prepare. Here the pass works on four
// output values per 128-bit lane through one byte shuffle and one
// multiply-add, from tables built per call, and keeps the 16-bit values
// the vertical pass starts from. A mirrored output is a permuted table, so
// a flipped crop needs no pass of its own.
//
// The arithmetic is OpenCV's, so cached records and rendered batches keep
// their bytes: the same float coordinate maps and 11-bit coefficients,
// the same exact integer horizontal pass, and the same saturating 16-bit
// rounding in the vertical pass. All integer, so every machine with AVX2
// gets the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ssdfeed {

// dst (dh x dw x cn, rows dst_stride bytes apart) = src (sh x sw x cn, rows
// src_stride apart) resized with half-pixel centres and edge clamping, and
// mirrored left to right when `mirror` (the same bytes as resizing, then
// flipping). Reads only within src's sh rows of sw * cn bytes. False
// (nothing written) where this code does not apply or would be slower:
// cn other than 1 or 3, an empty size, a shrink by about 3x or more, a
// source row under 16 bytes, or a CPU without AVX2; the caller then uses
// cv::resize, whose bytes these are.
bool ResizeBilinearU8(const uint8_t* src, int sh, int sw, size_t src_stride, int cn, uint8_t* dst,
                      int dh, int dw, size_t dst_stride, bool mirror = false);

// The same at a given inverse scale per axis (output pixels per source
// pixel), as cv::resize(src, dst, cv::Size(), inv_scale_x, inv_scale_y,
// INTER_LINEAR) maps: for a source that stands for a fractional number of
// pixels (the last chroma sample of an odd-sized JPEG covers one luma
// pixel, not two). dh x dw is what is written: OpenCV would make
// round(sh * inv_scale_y) x round(sw * inv_scale_x), of which these are the
// top-left values. Declines where ResizeBilinearU8 does.
bool ResizeBilinearU8AtScale(const uint8_t* src, int sh, int sw, size_t src_stride, int cn,
                             uint8_t* dst, int dh, int dw, size_t dst_stride, double inv_scale_y,
                             double inv_scale_x, bool mirror = false);

// Where a one-channel resize samples its source: output pixel (dy, dx)
// centres on source coordinates ((dy + 0.5) / inv_scale_y - 0.5 + offset_y,
// (dx + 0.5) / inv_scale_x - 0.5 + offset_x), sample centres at whole
// numbers. Offsets 0 are ResizeBilinearU8AtScale's map; a fractional one
// starts the window between samples (a yuv420 record's chroma plane, whose
// samples sit between pairs of luma pixels: image/yuv420_crop.h).
struct BilinearWindow {
  double inv_scale_y = 1, inv_scale_x = 1;
  double offset_y = 0, offset_x = 0;
};

// dst (dh x dw, one channel) = src (sh x sw, one channel) sampled over win
// with ResizeBilinearU8's arithmetic (coefficients, rounding, clamping at
// src's edges), mirrored left to right when `mirror`. Never declines: with
// AVX2 where it has it, value by value elsewhere, the same bytes on every
// machine.
void ResizeBilinearU8Window(const uint8_t* src, int sh, int sw, size_t src_stride, uint8_t* dst,
                            int dh, int dw, size_t dst_stride, const BilinearWindow& win,
                            bool mirror = false);

// Tests: make ResizeBilinearU8 decline, as on a CPU without AVX2, and
// ResizeBilinearU8Window take its value-by-value route.
void SetBilinearPortableOnly(bool on);

}  // namespace ssdfeed
