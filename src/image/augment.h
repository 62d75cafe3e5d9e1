// Per-epoch augmentation applied after the cache: random resized crop and
// flip, written straight into a batch slot, with optional normalisation.
#pragma once

#include <cstdint>
#include <vector>

#include "ssdfeed/augment.h"

namespace ssdfeed {

struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool flip = false;
};

// torchvision's RandomResizedCrop.get_params with randomness keyed by key.
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

// true: RenderSample converts with the baseline build of its conversion
// even where the CPU has AVX2 (tests check that both give the same bytes).
void SetRenderBaselineOnly(bool on);

// The key of (seed, epoch, id).
uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t id);

}  // namespace ssdfeed
