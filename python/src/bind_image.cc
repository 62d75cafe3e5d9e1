#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "python/src/bindings.h"
#include "ssdfeed/augment.h"
#include "ssdfeed/dataset.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

nb::object DecodeOrThrow(nb::bytes data, const PrepareSpec& spec, uint64_t max_pixels) {
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
}

}  // namespace

void BindImage(nb::module_& m) {
  BindEnum<DType>(m, "DType", "OutputSpec.dtype");
  BindEnum<Layout>(m, "Layout", "OutputSpec.layout");

  nb::class_<PrepareSpec>(m, "PrepareSpec", "The cached preparation (C++ PrepareSpec).")
      .def(nb::init<>())
      .def_rw("resize_short", &PrepareSpec::resize_short)
      .def_rw("max_long", &PrepareSpec::max_long)
      .def_rw("resize_h", &PrepareSpec::resize_h)
      .def_rw("resize_w", &PrepareSpec::resize_w)
      .def_rw("crop_h", &PrepareSpec::crop_h)
      .def_rw("crop_w", &PrepareSpec::crop_w)
      .def_rw("gray", &PrepareSpec::gray)
      .def_prop_ro("channels", &PrepareSpec::channels)
      .def(
          "validate", [](const PrepareSpec& s) { ThrowIfError(s.Validate()); },
          "Raises ValueError naming what is wrong with the combination.")
      .def("canonical", &PrepareSpec::Canonical, "The text that goes into cache fingerprints.")
      .def("to_json", &PrepareSpec::ToJson, "The JSON object cache manifests record.")
      .def_static(
          "from_json",
          [](const std::string& text) { return ValueOrThrow(PrepareSpec::FromJson(text)); },
          nb::arg("json"), "Reads to_json's object back (validated).");

  m.def("_decode_with", &DecodeOrThrow, nb::arg("data"), nb::arg("spec"),
        nb::arg("max_pixels") = DecodeLimits{}.max_pixels,
        "Decodes JPEG/PNG bytes and prepares them with a PrepareSpec.");

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
