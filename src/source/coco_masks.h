// COCO instance segmentations (an annotation's "segmentation") and their
// rasterisation to binary masks, bit for bit as pycocotools' annToMask does
// it (maskApi.c's rleFrPoly, rleFrString, rleMerge, rleDecode): polygons
// are traced on a 5x upsampled grid and filled between their y-boundaries,
// so the coco: source's masks equal the masks every COCO tool evaluates.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ssdfeed/status.h"

namespace ssdfeed {

// One annotation's segmentation: polygons (each x0,y0,x1,y1,... in pixels)
// or a run-length encoding (column-major runs of 0s then 1s alternating,
// starting with 0s; COCO's "counts").
struct CocoSegmentation {
  std::vector<std::vector<double>> polygons;
  std::vector<uint32_t> runs;  // RLE: used when polygons is empty
};

// Reads a.segmentation for an image of h x w: a list of polygons (each an
// even number, at least 6, of finite coordinates), or {"size":[h,w],
// "counts": [runs...] or COCO's compressed string}. Anything else, or an
// RLE of another size or whose runs do not add up to h*w, is Corruption
// naming `where` and `ann`.
Status ParseCocoSegmentation(const nlohmann::json& a, int64_t h, int64_t w,
                             const std::string& where, const std::string& ann,
                             CocoSegmentation* out);

// Rasterises s into out[y * w + x] (h * w bytes, 0 or 1): polygons filled
// and unioned as pycocotools merges them, an RLE decoded.
void RasteriseCocoSegmentation(const CocoSegmentation& s, int64_t h, int64_t w, uint8_t* out);

}  // namespace ssdfeed
