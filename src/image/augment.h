// Per-epoch augmentation applied after the cache: random resized crop,
// flip, or scale jitter and padded crop, written straight into a batch
// slot, with optional normalisation.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ssdfeed/augment.h"

namespace ssdfeed {

// What one sample's render does. With resize_h == 0 (RandomResizedCrop,
// flip): the box of the source (inside it) is resized to the output size,
// then mirrored when flip. With resize_h > 0 (scale jitter): the source is
// first resized to resize_h x resize_w, the box is a window of that image
// of exactly the output size, which may reach past its edges (those pixels
// are `fill`, mask values `mask_fill`), and the window is then mirrored
// when flip.
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool flip = false;
  int resize_h = 0, resize_w = 0;
  uint8_t fill = 0;
  uint16_t mask_fill = 255;
  bool windowed() const { return resize_h > 0; }
};

// The sample's box under a, with randomness keyed by key: torchvision's
// RandomResizedCrop.get_params (kResizedCrop), the flip of
// RandomHorizontalFlip (kFlip), or RandomResize + RandomHorizontalFlip +
// pad + RandomCrop.get_params of the segmentation reference
// (kScaleJitterCrop; its flip, done there before the crop, is here the
// mirrored window flipped after it: the same pixels).
CropBox SampleCrop(const AugmentSpec& a, int img_h, int img_w, uint64_t key);

// Pixels someone else owns (a cache record, a decoded image): HWC uint8.
struct PixelsView {
  const uint8_t* pixels = nullptr;
  int height = 0, width = 0, channels = 0;
};

// Crops box from src, resizes to out_h x out_w, flips, and writes one sample
// into dst in the output dtype/layout. scratch is reused between calls.
// src has 1 or 3 channels (PrepareSpec::channels()); dst holds
// out_h * out_w * src.channels elements. An OpenCV failure (out of memory)
// comes back as a Status.
Status RenderSample(const PixelsView& src, const CropBox& box, int out_h, int out_w,
                    const OutputSpec& out, void* dst, std::vector<uint8_t>* scratch);

// RenderSample of a yuv420 record from its stored planes (h x w x 3),
// where Yuv420CropApplies (image/yuv420_crop.h): the crop is cut from the
// planes and only the output is converted to RGB, then to out's dtype and
// layout as RenderSample converts.
Status RenderYuv420Sample(std::string_view planes, int h, int w, const CropBox& box, int out_h,
                          int out_w, const OutputSpec& out, void* dst,
                          std::vector<uint8_t>* scratch);

// true: RenderSample converts with the baseline build of its conversion
// even where the CPU has AVX2 (tests check that both give the same bytes).
void SetRenderBaselineOnly(bool on);

// The key of (seed, epoch, id).
uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t id);

}  // namespace ssdfeed
