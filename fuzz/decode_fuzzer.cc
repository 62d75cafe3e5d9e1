// The JPEG/PNG front: any bytes must give an image or a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ssdfeed/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ssdfeed::Decoder dec;
  dec.limits.max_pixels = 4 * 1000 * 1000;  // keep each run fast
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ssdfeed::PrepareSpec spec;
  spec.resize_short = 32;
  spec.crop_h = spec.crop_w = 16;
  ssdfeed::Image img;
  (void)dec.DecodeAndPrepare(bytes, spec, &img);
  (void)dec.Decode(bytes, true, 0, 0, &img);
  return 0;
}
