#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "python/src/bindings.h"
#include "ssdfeed/dataset.h"

namespace nb = nanobind;

namespace ssdfeed::py {

void BindImage(nb::module_& m) {
  m.def(
      "decode",
      [](nb::bytes data, int resize_short, int max_long, std::pair<int, int> resize,
         std::pair<int, int> center_crop, bool gray, uint64_t max_pixels) {
        PrepareSpec spec = MakeSpec(resize_short, max_long, resize, center_crop, gray);
        Image img;
        Status s;
        {
          nb::gil_scoped_release nogil;
          thread_local Decoder dec;
          dec.limits.max_pixels = max_pixels;
          s = dec.DecodeAndPrepare(std::string_view(data.c_str(), data.size()), spec, &img);
        }
        ThrowIfError(s);
        return ImageToArray(std::move(img));
      },
      nb::arg("data"), nb::arg("resize_short") = 0, nb::arg("max_long") = 0,
      nb::arg("resize") = std::pair<int, int>{0, 0},
      nb::arg("center_crop") = std::pair<int, int>{0, 0}, nb::arg("gray") = false,
      nb::arg("max_pixels") = DecodeLimits{}.max_pixels,
      "Decodes JPEG/PNG bytes and prepares them (uint8 HWC numpy array).");

  m.def(
      "prepare_canonical",
      [](int resize_short, int max_long, std::pair<int, int> resize,
         std::pair<int, int> center_crop, bool gray) {
        return MakeSpec(resize_short, max_long, resize, center_crop, gray).Canonical();
      },
      nb::arg("resize_short") = 0, nb::arg("max_long") = 0,
      nb::arg("resize") = std::pair<int, int>{0, 0},
      nb::arg("center_crop") = std::pair<int, int>{0, 0}, nb::arg("gray") = false);

  m.def(
      "make_dataset",
      [](std::string dir, std::string format, size_t count, int classes, uint64_t seed,
         double corrupt, size_t shard_size, int min_side, int max_side) {
        MakeDatasetOptions o;
        o.dir = std::move(dir);
        o.format = std::move(format);
        o.count = count;
        o.classes = classes;
        o.seed = seed;
        o.corrupt = corrupt;
        o.shard_size = shard_size;
        o.min_side = min_side;
        o.max_side = max_side;
        MakeDatasetReport r;
        Status s;
        {
          nb::gil_scoped_release nogil;
          s = MakeDataset(o, &r);
        }
        ThrowIfError(s);
        nb::dict d;
        d["uri"] = r.uri;
        d["samples"] = r.samples;
        d["corrupt"] = r.corrupt;
        d["bytes"] = r.bytes;
        return d;
      },
      nb::arg("dir"), nb::arg("format") = "folder", nb::arg("count") = 1000,
      nb::arg("classes") = 10, nb::arg("seed") = 0, nb::arg("corrupt") = 0.0,
      nb::arg("shard_size") = 500, nb::arg("min_side") = 300, nb::arg("max_side") = 500,
      "Writes a deterministic ImageNet-like dataset; returns {uri, samples, corrupt, bytes}.");
}

}  // namespace ssdfeed::py
