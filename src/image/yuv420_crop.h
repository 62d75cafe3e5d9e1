// A RandomResizedCrop (or a flip) of a yuv420 record, cut from its planes:
// the warm path's render of that codec. Y is cropped and resized as a raw
// record's pixels are (the same bilinear map and arithmetic, one channel);
// Cb and Cr are sampled bilinearly at the same output pixels straight from
// their half-resolution planes (chroma sample i sits at luma coordinate
// 2i + 1/2, JPEG's centred siting); then the output's three full-size
// planes are converted to RGB (BT.601 full range, libjpeg's arithmetic:
// image/yuv420.h). Decoding the record first converted every pixel of it
// and upsampled its chroma, then resized three channels; this converts
// only the output. docs/cache-format.md, "yuv420", states the arithmetic.
#pragma once

#include <cstdint>
#include <string_view>

#include "image/augment.h"

namespace ssdfeed {

// True where CropYuv420 renders box of an h x w x c record to out_h x
// out_w: three channels, a box inside the image resized without an
// antialiasing blur (an enlargement, or a shrink under 1.5x on both axes
// that is not by whole factors: what ResizeAntialiased resizes bilinearly,
// which is every RandomResizedCrop of a record under 1.5x the output),
// and no scale-jitter window. Elsewhere, and for a box of the output's
// size (a copy: no augmentation, or a flip alone), the record is decoded
// and rendered as any other (RenderSample), which serves it exactly.
bool Yuv420CropApplies(int h, int w, int c, const CropBox& box, int out_h, int out_w);

// Writes out_h x out_w x 3 RGB of box of the record's planes (an h x w
// image's Yuv420StoredBytes, checked) to rgb, mirrored when box.flip (the
// same bytes as mirroring after). Corruption for planes of another size.
// Where Yuv420CropApplies.
Status CropYuv420(std::string_view planes, int h, int w, const CropBox& box, int out_h, int out_w,
                  uint8_t* rgb);

}  // namespace ssdfeed
