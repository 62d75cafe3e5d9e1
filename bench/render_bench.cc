// Rendering one served sample on one core: RandomResizedCrop's resize to
// out x out from a prepared image, plain and flipped, into each output
// kind (uint8 / float32 / float16, NHWC / NCHW). Medians of --rounds.
//   render_bench [--height 256] [--width 300] [--out 224] [--calls 3000] [--rounds 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "image/augment.h"

using namespace ssdfeed;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int IntFlag(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  int h = IntFlag(argc, argv, "--height", 256), w = IntFlag(argc, argv, "--width", 300);
  int out = IntFlag(argc, argv, "--out", 224), calls = IntFlag(argc, argv, "--calls", 3000);
  int rounds = IntFlag(argc, argv, "--rounds", 5);
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * 3);
  std::mt19937 rng(1);
  for (auto& v : img) v = static_cast<uint8_t>(rng());
  PixelsView px{img.data(), h, w, 3};
  // A crop of about 60% of the image: RandomResizedCrop's mean area.
  CropBox box{h / 10, w / 10, h * 8 / 10, w * 3 / 4, false};
  std::vector<uint8_t> dst(static_cast<size_t>(out) * out * 3 * 4), scratch;
  std::printf("%dx%d -> %dx%d, 1 thread, us per sample, median of %d rounds of %d\n", w, h, out,
              out, rounds, calls);
  std::printf("%-8s %-5s %10s %10s\n", "dtype", "layout", "plain", "flipped");
  const char* names[] = {"uint8", "float32", "float16"};
  for (DType dt : {DType::kUint8, DType::kFloat32, DType::kFloat16})
    for (Layout lay : {Layout::kNHWC, Layout::kNCHW}) {
      OutputSpec o;
      o.dtype = dt;
      o.layout = lay;
      double us[2];
      for (int flip = 0; flip < 2; ++flip) {
        box.flip = flip == 1;
        std::vector<double> t;
        for (int r = 0; r < rounds; ++r) {
          double t0 = Now();
          for (int i = 0; i < calls; ++i)
            if (!RenderSample(px, box, out, out, o, dst.data(), &scratch).ok()) return 1;
          t.push_back((Now() - t0) / calls * 1e6);
        }
        std::sort(t.begin(), t.end());
        us[flip] = t[t.size() / 2];
      }
      std::printf("%-8s %-5s %10.1f %10.1f\n", names[static_cast<int>(dt)],
                  lay == Layout::kNHWC ? "NHWC" : "NCHW", us[0], us[1]);
    }
  return 0;
}
