// make-dataset: deterministic ImageNet-like sample datasets (the built-in
// default for the demo, the tests and the benchmarks), and colour-coded
// scenes with masks and boxes in the Pascal VOC, COCO and WebDataset layouts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ssdfeed/env.h"
#include "ssdfeed/image.h"

namespace ssdfeed {

struct MakeDatasetOptions {
  std::string dir;  // output directory (created). Required.
  // folder | tfrecord | tar (ImageNet-like images and labels), or scenes:
  // voc (JPEGImages/*.jpg + SegmentationClass/*.png palette masks), coco
  // (images/*.jpg + annotations.json) or wds-seg (tars of .jpg, .seg.png,
  // .cls, .npy, .json). Default folder.
  std::string format = "folder";
  size_t count = 1000;      // samples. Default 1000.
  int classes = 10;         // labels 0..classes-1 (scenes: objects' 1..classes,
                            // at most 255). Default 10.
  uint64_t seed = 0;        // same seed, same bytes. Default 0.
  double corrupt = 0.0;     // fraction of samples made undecodable. Default 0.
  size_t shard_size = 500;  // samples per tfrecord/tar shard. Default 500.
  int min_side = 300;       // image sides are drawn from [min_side, max_side].
  int max_side = 500;       // Defaults 300 and 500 (ImageNet-like).
  int quality = 90;         // JPEG quality. Default 90.
  int threads = 0;          // 0: one per core.
  Env* env = nullptr;       // Default Env::Default().
};

struct MakeDatasetReport {
  size_t samples = 0;
  size_t corrupt = 0;
  uint64_t bytes = 0;
  std::string uri;  // the source URI that reads it back (fields included)
};

Status MakeDataset(const MakeDatasetOptions& opts, MakeDatasetReport* report);

// Sample `index` of the dataset with this seed: label and natural-looking
// pixels (smooth colour fields, shapes, texture and noise), its sides drawn
// from [min_side, max_side] (1 or more). An OpenCV failure comes back as a
// Status.
Status GenerateImage(uint64_t seed, uint64_t index, int classes, int min_side, int max_side,
                     Image* out, int* label);

// A colour-coded scene: a background of class 0 and up to four filled
// rectangles or ellipses, each in its own quarter of the image (so none
// hides another's centre) and in its class's colour (SceneColour). Every
// seventh scene has no object. The mask holds the class of every pixel, so
// masks, boxes and pixels agree.
struct SceneObject {
  int cls = 0;                           // 1..classes
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // box, xyxy pixel edges
  bool crowd = false;                    // COCO's iscrowd (some scenes)
};
struct Scene {
  Image image;                // RGB
  std::vector<uint8_t> mask;  // height*width class ids
  std::vector<SceneObject> objects;
};
Status GenerateScene(uint64_t seed, uint64_t index, int classes, int min_side, int max_side,
                     Scene* out);

// The RGB colour of class c in scenes: Pascal VOC's palette (0 is black).
void SceneColour(int cls, uint8_t rgb[3]);
// The COCO category id of class c (1..): c(c+1)/2, not contiguous (1, 3, 6,
// 10, ...), so readers must map ids to indices.
int64_t SceneCategoryId(int cls);
// An 8-bit single-channel PNG: grey, or indices into VOC's palette.
Status EncodePng8(const uint8_t* pixels, int height, int width, bool palette, std::string* out);

// Whether make-dataset corrupts sample `index` for this seed and fraction.
bool IsCorruptSample(uint64_t seed, uint64_t index, double fraction);

}  // namespace ssdfeed
