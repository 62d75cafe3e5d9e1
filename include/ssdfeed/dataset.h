// make-dataset: deterministic ImageNet-like sample datasets (the built-in
// default for the demo, the tests and the benchmarks).
#pragma once

#include <cstdint>
#include <string>

#include "ssdfeed/env.h"
#include "ssdfeed/image.h"

namespace ssdfeed {

struct MakeDatasetOptions {
  std::string dir;                // output directory (created). Required.
  std::string format = "folder";  // folder | tfrecord | tar. Default folder.
  size_t count = 1000;            // samples. Default 1000.
  int classes = 10;               // labels 0..classes-1. Default 10.
  uint64_t seed = 0;              // same seed, same bytes. Default 0.
  double corrupt = 0.0;           // fraction of samples made undecodable. Default 0.
  size_t shard_size = 500;        // samples per tfrecord/tar shard. Default 500.
  int min_side = 300;             // image sides are drawn from [min_side, max_side].
  int max_side = 500;             // Defaults 300 and 500 (ImageNet-like).
  int quality = 90;               // JPEG quality. Default 90.
  int threads = 0;                // 0: one per core.
  Env* env = nullptr;             // Default Env::Default().
};

struct MakeDatasetReport {
  size_t samples = 0;
  size_t corrupt = 0;
  uint64_t bytes = 0;
  std::string uri;  // the source URI that reads it back
};

Status MakeDataset(const MakeDatasetOptions& opts, MakeDatasetReport* report);

// Sample `index` of the dataset with this seed: label and natural-looking
// pixels (smooth colour fields, shapes, texture and noise), its sides drawn
// from [min_side, max_side] (1 or more). An OpenCV failure comes back as a
// Status.
Status GenerateImage(uint64_t seed, uint64_t index, int classes, int min_side, int max_side,
                     Image* out, int* label);

// Whether make-dataset corrupts sample `index` for this seed and fraction.
bool IsCorruptSample(uint64_t seed, uint64_t index, double fraction);

}  // namespace ssdfeed
