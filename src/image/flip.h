// Horizontal mirror of an HWC uint8 image, written to another buffer.
#pragma once

#include <cstdint>

namespace ssdfeed {

// dst = src mirrored left to right; both h x w x c, rows contiguous, not
// overlapping. OpenCV's flip moves a 3-channel image a byte at a time
// through an index table: a fifth of a 224 x 224 crop's render time.
void FlipHorizontalInto(const uint8_t* src, uint8_t* dst, int h, int w, int c);

}  // namespace ssdfeed
