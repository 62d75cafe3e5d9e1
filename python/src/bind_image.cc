#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "image/augment.h"
#include "image/field_augment.h"
#include "image/field_prepare.h"
#include "image/pixel_codec.h"
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
    // jpeg and yuv420 are lossy: what a cache of this spec serves is the
    // decode of the prepared image re-encoded (zstd serves the prepared
    // pixels as they are).
    if (s.ok() && IsLossy(spec.codec)) {
      thread_local PixelCodecScratch codec;
      std::string stored;
      s = EncodePixels(spec.codec, spec.quality, img.pixels.data(), img.height, img.width,
                       img.channels, &stored, &codec);
      if (s.ok())
        s = DecodePixels(spec.codec, stored, img.height, img.width, img.channels, img.pixels.data(),
                         &codec);
    }
  }
  ThrowIfError(s);
  return ImageToArray(std::move(img));
}

// A field as the test-only bindings hand it to Python: (name, kind,
// dtype, shape, data).
using PyField = std::tuple<std::string, int, std::string, std::vector<uint64_t>, nb::bytes>;

std::vector<PyField> ToPy(const std::vector<Field>& fields) {
  std::vector<PyField> out;
  for (const Field& f : fields)
    out.emplace_back(f.name, static_cast<int>(f.kind), f.dtype, f.shape,
                     nb::bytes(f.data.data(), f.data.size()));
  return out;
}

// (name, kind, bytes, normalized, origin) as a source gives them.
using PyEncoded = std::tuple<std::string, int, nb::bytes, bool, std::string>;

std::vector<PyField> PrepareFieldsPy(const std::vector<PyEncoded>& in, const PrepareSpec& spec,
                                     int origin_h, int origin_w) {
  std::vector<EncodedField> enc;
  for (const auto& [name, kind, data, normalized, origin] : in)
    enc.push_back({name, static_cast<FieldKind>(kind), std::string(data.c_str(), data.size()),
                   normalized, origin});
  std::vector<Field> out;
  ThrowIfError(PrepareFields(enc, PlanPrepare(spec, origin_h, origin_w), {}, &out));
  return ToPy(out);
}

std::vector<PyField> RenderFieldsPy(const std::vector<PyField>& in,
                                    std::tuple<int, int, int, int, bool> crop, int in_h, int in_w,
                                    int out_h, int out_w, double min_box_visible,
                                    std::tuple<int, int> resize, uint16_t mask_fill) {
  std::vector<FieldView> views;
  for (const auto& [name, kind, dtype, shape, data] : in)
    views.push_back({name, static_cast<FieldKind>(kind), dtype, shape,
                     reinterpret_cast<const uint8_t*>(data.c_str()), data.size()});
  auto [top, left, h, w, flip] = crop;
  CropBox box{top, left, h, w, flip, std::get<0>(resize), std::get<1>(resize), 0, mask_fill};
  if (!box.windowed() &&
      (h <= 0 || w <= 0 || top < 0 || left < 0 || top + h > in_h || left + w > in_w))
    ThrowIfError(Status::InvalidArgument("crop outside the image"));
  std::vector<Field> out;
  ThrowIfError(RenderFields(views, box, in_h, in_w, out_h, out_w, min_box_visible, &out));
  return ToPy(out);
}

// An h x w x c uint8 image rendered with an augment's box, as uint8 HWC.
nb::bytes RenderImagePy(nb::bytes pixels, int h, int w, int c, const AugmentSpec& a, uint64_t seed,
                        uint64_t epoch, uint64_t id) {
  if (h <= 0 || w <= 0 || (c != 1 && c != 3) || pixels.size() != static_cast<size_t>(h) * w * c)
    ThrowIfError(Status::InvalidArgument("pixels are not h x w x c (c 1 or 3)"));
  CropBox box = SampleCrop(a, h, w, AugmentKey(seed, epoch, id));
  SampleShape shape = ServedSampleShape(PrepareSpec{}, a);
  int oh = shape.fixed() ? shape.height : h, ow = shape.fixed() ? shape.width : w;
  std::string out(static_cast<size_t>(oh) * ow * c, '\0');
  std::vector<uint8_t> scratch;
  ThrowIfError(RenderSample({reinterpret_cast<const uint8_t*>(pixels.c_str()), h, w, c}, box, oh,
                            ow, OutputSpec{}, out.data(), &scratch));
  return nb::bytes(out.data(), out.size());
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
      .def_prop_rw(
          "codec", [](const PrepareSpec& s) { return std::string(EnumName(s.codec)); },
          [](PrepareSpec& s, const std::string& name) {
            s.codec = ValueOrThrow(ParseEnum<RecordCodec>(name));
          },
          "How records store the pixels: 'raw', 'zstd', 'jpeg' or 'yuv420'.")
      .def_rw("quality", &PrepareSpec::quality, "jpeg's quality, 1-100.")
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
        "Decodes JPEG/PNG bytes and prepares them with a PrepareSpec: the pixels a cache of "
        "that spec serves (for codecs 'jpeg' and 'yuv420', the decode of the prepared image "
        "re-encoded).");

  m.def(
      "crop_params",
      [](const AugmentSpec& a, uint64_t seed, uint64_t epoch, uint64_t id, int height, int width) {
        if (height <= 0 || width <= 0) ThrowIfError(Status::InvalidArgument("empty image"));
        CropBox b = SampleCrop(a, height, width, AugmentKey(seed, epoch, id));
        return std::make_tuple(b.top, b.left, b.height, b.width, b.flip);
      },
      nb::arg("augment"), nb::arg("seed"), nb::arg("epoch"), nb::arg("id"), nb::arg("height"),
      nb::arg("width"),
      "The crop (top, left, height, width, flip) the Loader applies to sample id of epoch, "
      "prepared height x width, under augment and seed: for reference tests. A scale-jitter "
      "crop's box is a window of the image resized first: see _jitter_params.");
  m.def(
      "_jitter_params",
      [](const AugmentSpec& a, uint64_t seed, uint64_t epoch, uint64_t id, int height, int width) {
        if (height <= 0 || width <= 0) ThrowIfError(Status::InvalidArgument("empty image"));
        CropBox b = SampleCrop(a, height, width, AugmentKey(seed, epoch, id));
        int left = b.flip ? b.resize_w - b.left - b.width : b.left;  // before the mirroring
        return std::make_tuple(b.resize_h, b.resize_w, b.top, left, b.flip);
      },
      nb::arg("augment"), nb::arg("seed"), nb::arg("epoch"), nb::arg("id"), nb::arg("height"),
      nb::arg("width"),
      "Test hook: a scale-jitter crop's torchvision parameters (resized_h, resized_w, i, j, "
      "flip): the image resized, flipped when flip, padded bottom and right to the crop size, "
      "then cropped at (i, j).");
  m.def("_render_image", &RenderImagePy, nb::arg("pixels"), nb::arg("h"), nb::arg("w"),
        nb::arg("c"), nb::arg("augment"), nb::arg("seed"), nb::arg("epoch"), nb::arg("id"),
        "Test hook: uint8 HWC pixels rendered as the Loader renders sample id of epoch under "
        "augment and seed (uint8 HWC bytes).");
  m.def("_prepare_fields", &PrepareFieldsPy, nb::arg("fields"), nb::arg("spec"),
        nb::arg("origin_h"), nb::arg("origin_w"),
        "Test hook: fields [(name, kind, bytes, normalized, origin)] of an origin_h x origin_w "
        "image prepared with spec -> [(name, kind, dtype, shape, data)].");
  m.def("_render_fields", &RenderFieldsPy, nb::arg("fields"), nb::arg("crop"), nb::arg("in_h"),
        nb::arg("in_w"), nb::arg("out_h"), nb::arg("out_w"), nb::arg("min_box_visible") = 0.25,
        nb::arg("resize") = std::make_tuple(0, 0), nb::arg("mask_fill") = 255,
        "Test hook: prepared fields [(name, kind, dtype, shape, data)] rendered with crop "
        "(top, left, height, width, flip) to out_h x out_w.");

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
