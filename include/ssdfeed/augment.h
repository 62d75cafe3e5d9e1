// What the image layer does after the cache, per epoch: the random resized
// crop, flip or scale jitter and padded crop (AugmentSpec) and the element type and layout of the
// batch (OutputSpec). Loader options hold these; the image layer implements them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ssdfeed/image.h"

namespace ssdfeed {

// Which per-epoch augment AugmentSpec describes.
enum class AugmentKind {
  // torchvision's RandomResizedCrop (same meaning of size, scale and ratio),
  // then a horizontal flip with probability 1/2 when `flip`.
  kResizedCrop,
  // A horizontal flip with probability flip_prob, nothing else: samples keep
  // their prepared shape (torchvision's RandomHorizontalFlip).
  kFlip,
  // The torchvision segmentation reference's RandomResize(jitter_min,
  // jitter_max) (shorter side drawn uniformly from [min, max], aspect kept),
  // RandomHorizontalFlip(flip_prob), then RandomCrop(height, width) of the
  // image padded on the bottom and right to at least that size (pixels with
  // `fill`, masks with `mask_fill`).
  kScaleJitterCrop,
};

struct AugmentSpec {
  bool enabled = false;                             // Default off: samples are served as prepared.
  AugmentKind kind = AugmentKind::kResizedCrop;     // Default RandomResizedCrop.
  int height = 224, width = 224;                    // Output size (not kFlip). Default 224x224.
  double scale_min = 0.08, scale_max = 1.0;         // Area fraction. Default (0.08, 1).
  double ratio_min = 3.0 / 4, ratio_max = 4.0 / 3;  // Aspect w/h. Default (3/4, 4/3).
  bool flip = true;                                 // Random horizontal flip. Default true.
  // kFlip and kScaleJitterCrop: probability of the flip (when `flip`), in
  // [0, 1]. Default 0.5.
  double flip_prob = 0.5;
  // kScaleJitterCrop: the shorter side's range in pixels. Default (260, 1040),
  // the segmentation reference's 0.5x and 2x of its base size 520.
  int jitter_min = 260, jitter_max = 1040;
  uint8_t fill = 0;          // kScaleJitterCrop: the padding's pixel value. Default 0.
  uint16_t mask_fill = 255;  // kScaleJitterCrop: the padding's mask value. Default 255.
  // Boxes are clipped to the crop and dropped (with their classes) when less
  // than this fraction of their area remains inside it. Default 0.25.
  double min_box_visible = 0.25;
};

enum class DType { kUint8, kFloat32, kFloat16 };
enum class Layout { kNHWC, kNCHW };

struct OutputSpec {
  DType dtype = DType::kUint8;    // Default uint8 (no normalisation).
  Layout layout = Layout::kNHWC;  // Default NHWC.
  // Float outputs are (pixel / 255 - mean[c]) / std[c]. Defaults: 0 and 1.
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
};

// Bytes of one element of t.
size_t DTypeSize(DType t);

// (height, width, channels) of every served sample; height and width are 0
// when they vary from sample to sample (no augment, crop or exact resize).
// The one place that decides it: the loader sizes batches with it and the
// Python adapters declare their element shapes with it.
struct SampleShape {
  int height = 0, width = 0, channels = 3;
  bool fixed() const { return height > 0; }
};
SampleShape ServedSampleShape(const PrepareSpec& prepare, const AugmentSpec& augment);

}  // namespace ssdfeed
