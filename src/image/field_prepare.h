// Preparation of a sample's fields other than its image: the same geometry
// as the image (PrepareGeometry: resize, then centre crop), applied to
// masks (nearest neighbour, so never a value not in the source) and boxes
// (scaled, shifted, clipped; boxes mostly cut away dropped with their
// classes); arrays (.npy) parsed; labels and bytes passed through. What
// comes out is cached; docs/ARCHITECTURE.md ("Field geometry").
#pragma once

#include <string_view>
#include <vector>

#include "ssdfeed/image.h"
#include "ssdfeed/sample.h"

namespace ssdfeed {

// A decoded mask: class ids, elem bytes each (1, or 2 for 16-bit PNGs in
// host order), rows packed.
struct MaskPixels {
  int height = 0, width = 0, elem = 1;
  std::vector<uint8_t> data;
};

// A PNG of class ids: 1-16 bit grey, or palette indices (the index is the
// class, the palette's colours are ignored). Anything else (RGB, alpha) is
// InvalidArgument; a damaged PNG Corruption.
Status DecodeMaskPng(std::string_view bytes, const DecodeLimits& limits, MaskPixels* out);

// A .npy file (format versions 1-3) into dtype (numpy's dtype.str), shape
// and data in C order (a Fortran-ordered array is transposed). Object and
// structured dtypes, and data not matching the header, are InvalidArgument
// saying what is wrong (the caller names the file).
Status ParseNpy(std::string_view bytes, Field* out);

// The fields of one sample (EncodedSample::fields) prepared for an image
// whose preparation had geometry g. A mask whose size is not the image's
// origin size is InvalidArgument naming the mask's file and both sizes; the
// caller adds the image's file. Boxes keep min_visible of their area or are
// dropped, with the matching entries of the classes field.
Status PrepareFields(const std::vector<EncodedField>& in, const PrepareGeometry& g,
                     const DecodeLimits& limits, std::vector<Field>* out,
                     double min_visible = 0.25);

}  // namespace ssdfeed
