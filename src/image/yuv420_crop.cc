#include "image/yuv420_crop.h"

#include <vector>

#include "image/bilinear.h"
#include "image/resample.h"
#include "image/yuv420.h"

namespace ssdfeed {

bool Yuv420CropApplies(int h, int w, int c, const CropBox& box, int out_h, int out_w) {
  if (c != 3 || box.windowed() || out_h < 1 || out_w < 1) return false;
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 || box.top + box.height > h ||
      box.left + box.width > w)
    return false;
  // A box of the output's size is copied: the decode serves it exactly.
  return RouteOf(box.height, box.width, out_h, out_w) == ResizeRoute::kBilinear;
}

Status CropYuv420(std::string_view planes, int h, int w, const CropBox& box, int out_h, int out_w,
                  uint8_t* rgb) {
  Yuv420Layout in = Yuv420Of(h, w);
  if (planes.size() != in.total())
    return Status::Corruption("yuv420 pixels: " + std::to_string(planes.size()) + " bytes, want " +
                              std::to_string(in.total()) + " for " + std::to_string(h) + "x" +
                              std::to_string(w) + "x3");
  const auto* y = reinterpret_cast<const uint8_t*>(planes.data());
  size_t n = static_cast<size_t>(out_h) * out_w;
  thread_local std::vector<uint8_t> cut;
  cut.resize(3 * n);
  // Y: the box, as RenderSample resizes a raw record's (its edges clamp).
  BilinearWindow luma{static_cast<double>(out_h) / box.height,
                      static_cast<double>(out_w) / box.width, 0, 0};
  ResizeBilinearU8Window(y + static_cast<size_t>(box.top) * w + box.left, box.height, box.width, w,
                         cut.data(), out_h, out_w, out_w, luma, box.flip);
  // Output pixel d samples luma coordinate box + (d + 0.5) / scale (pixel
  // centres at half-integers); chroma sample i covers luma 2i to 2i + 2, so
  // that is chroma index box / 2 + (d + 0.5) / (2 scale) - 0.5: half the
  // scale, offset by half the box's corner. At whole quarter positions
  // (the record's own size) these are the triangle filter's weights.
  BilinearWindow chroma{2 * luma.inv_scale_y, 2 * luma.inv_scale_x, box.top / 2.0, box.left / 2.0};
  int ch = static_cast<int>(in.chroma_h), cw = static_cast<int>(in.chroma_w);
  for (size_t k = 0; k < 2; ++k)
    ResizeBilinearU8Window(y + in.y_bytes + k * in.chroma_bytes(), ch, cw, cw,
                           cut.data() + (k + 1) * n, out_h, out_w, out_w, chroma, box.flip);
  Ycc444ToRgb(cut.data(), cut.data() + n, cut.data() + 2 * n, n, rgb);
  return Status::OK();
}

}  // namespace ssdfeed
