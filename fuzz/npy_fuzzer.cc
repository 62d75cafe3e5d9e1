// The .npy parser (an "array" field of a sample, read from the origin) and
// the mask PNG decoder over arbitrary bytes: never a crash; an array it
// accepts holds exactly product(shape) * itemsize bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "image/field_prepare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Field f;
  if (ParseNpy(bytes, &f).ok()) {
    // Overflow-checked, as the parser's own check must be: a product that
    // wraps to the data's size is a wrong accept (and Fortran order then
    // reads out of bounds).
    uint64_t n = DTypeItemSize(f.dtype);
    for (uint64_t d : f.shape)
      if (__builtin_mul_overflow(n, d, &n)) std::abort();
    if (n != f.data.size()) std::abort();
  }
  MaskPixels m;
  DecodeLimits limits;
  limits.max_pixels = 1 << 20;
  if (DecodeMaskPng(bytes, limits, &m).ok() &&
      m.data.size() != static_cast<size_t>(m.height) * m.width * m.elem)
    std::abort();
  return 0;
}
