// A JPEG's prepare resized in its YCbCr planes: decode to the planes
// (no chroma upsampling, no colour conversion at the source's size), resize
// each plane straight to the target's size (the chroma planes' resize is
// their upsampling), then convert only the target's pixels to RGB.
#pragma once

#include <turbojpeg.h>

#include <string_view>

#include "ssdfeed/image.h"

namespace ssdfeed {

// The largest DCT scaling (1/1, 1/2, 1/4 or 1/8) that keeps both sides of
// a w x h JPEG >= min_w x min_h (1/1 when either minimum is 0).
tjscalingfactor PickDctScale(int w, int h, int min_w, int min_h);

// Whether a JPEG of `subsamp` and colour space `colorspace` (from its
// header), sh x sw, shrinks to th x tw in its planes: YCbCr with 4:4:4,
// 4:2:2, 4:2:0 or 4:4:0 chroma, RGB output, a target smaller on both sides.
// Others (grey output, CMYK, enlarging) take the RGB route. The caller
// also keeps the RGB route for a JPEG it decodes at a DCT scale.
bool ResizesInPlanes(int subsamp, int colorspace, bool gray, int sh, int sw, int th, int tw);

// Decodes bytes (sw x sh, `subsamp`, at full size) to its planes,
// resizes each with ResizeAntialiased to th x tw (half-resolution chroma is
// thereby upsampled bilinearly, at JFIF's centred siting, as libjpeg's
// "fancy" triangle filter does; TurboJPEG's own conversion of subsampled
// planes upsamples by repetition, 35 dB from its decode), and converts to
// RGB with TurboJPEG (JFIF's BT.601 full range, SIMD) into out
// (th x tw x 3). tj: a TurboJPEG decompressor.
Status DecodeJpegResizedInPlanes(tjhandle tj, std::string_view bytes, int sw, int sh, int subsamp,
                                 int th, int tw, Image* out);

}  // namespace ssdfeed
