// The cached, deterministic preparation: resize (antialiased when shrinking),
// centre crop. Also the decode front that picks a DCT scale for the target.
#include <turbojpeg.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "image/cv_call.h"
#include "image/jpeg_planes.h"
#include "image/resample.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "util/stage_clock.h"

namespace ssdfeed {

Status PrepareSpec::Validate() const {
  if (resize_short < 0 || max_long < 0 || resize_h < 0 || resize_w < 0 || crop_h < 0 || crop_w < 0)
    return Status::InvalidArgument("prepare: sizes must not be negative");
  // A record's sides are 16-bit: a larger target could never be cached, and
  // a manifest (perhaps imported) naming one would make every prepare
  // allocate a huge image first.
  if (resize_short > 65535 || max_long > 65535 || resize_h > 65535 || resize_w > 65535 ||
      crop_h > 65535 || crop_w > 65535)
    return Status::InvalidArgument("prepare: sizes must be at most 65535");
  if ((resize_h > 0) != (resize_w > 0))
    return Status::InvalidArgument("prepare: resize needs both height and width");
  if ((crop_h > 0) != (crop_w > 0))
    return Status::InvalidArgument("prepare: center crop needs both height and width");
  if (resize_short > 0 && resize_h > 0)
    return Status::InvalidArgument("prepare: give resize_short or resize, not both");
  if (max_long > 0 && resize_short == 0)
    return Status::InvalidArgument("prepare: max_long only applies with resize_short");
  if (max_long > 0 && max_long < resize_short)
    return Status::InvalidArgument("prepare: max_long must be >= resize_short");
  if (codec != RecordCodec::kRaw && codec != RecordCodec::kZstd && codec != RecordCodec::kJpeg &&
      codec != RecordCodec::kYuv420)
    return Status::InvalidArgument("prepare: codec must be " +
                                   QuotedChoices(EnumNames<RecordCodec>()) + ", not " +
                                   std::to_string(static_cast<int>(codec)));
  if (quality < 1 || quality > 100)
    return Status::InvalidArgument("prepare: quality must be 1-100, not " +
                                   std::to_string(quality));
  return Status::OK();
}

namespace {

// The codec's part of the canonical text: every parameter that changes the
// stored bytes (docs/cache-format.md, "Codecs"). Change it with the codec's
// stream (pixel_codec.cc), so no entry serves records of another.
std::string CodecCanonical(const PrepareSpec& s) {
  switch (s.codec) {
    case RecordCodec::kRaw:
      return "";  // raw entries keep the names they had before codecs
    case RecordCodec::kZstd:
      return ";codec=zstd-up-l1";
    case RecordCodec::kJpeg:
      return ";codec=jpeg-q" + std::to_string(s.quality) + (s.gray ? "-gray" : "-420");
    case RecordCodec::kYuv420:
      return ";codec=yuv420-bt601f-box2";
  }
  return ";codec=" + std::to_string(static_cast<int>(s.codec));
}

}  // namespace

std::string PrepareSpec::Canonical() const {
  // Bump "prepN" whenever the bytes produced for the same spec change.
  return "prep3;" + std::string(gray ? "gray" : "rgb") + ";short=" + std::to_string(resize_short) +
         ";long=" + std::to_string(max_long) + ";exact=" + std::to_string(resize_h) + "x" +
         std::to_string(resize_w) + ";crop=" + std::to_string(crop_h) + "x" +
         std::to_string(crop_w) + ";resample=gauss-aa/linear;jpeg=tj-dct248-islow-planes" +
         CodecCanonical(*this);
}

std::string PrepareSpec::ToJson() const {
  nlohmann::json j{{"resize_short", resize_short},
                   {"max_long", max_long},
                   {"resize_h", resize_h},
                   {"resize_w", resize_w},
                   {"crop_h", crop_h},
                   {"crop_w", crop_w},
                   {"gray", gray}};
  // Only for another codec, so raw entries' manifests stay what they were.
  if (codec != RecordCodec::kRaw) {
    j["codec"] = EnumName(codec);
    j["quality"] = quality;
  }
  return j.dump();
}

Result<PrepareSpec> PrepareSpec::FromJson(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Status::InvalidArgument("prepare spec: not a JSON object");
  PrepareSpec s;
  // A size that is not an integer in int's range is refused by name, not
  // converted (a float out of range would be undefined behaviour).
  const std::pair<const char*, int*> sizes[] = {{"resize_short", &s.resize_short},
                                                {"max_long", &s.max_long},
                                                {"resize_h", &s.resize_h},
                                                {"resize_w", &s.resize_w},
                                                {"crop_h", &s.crop_h},
                                                {"crop_w", &s.crop_w},
                                                {"quality", &s.quality}};
  for (auto [key, field] : sizes) {
    if (!j.contains(key)) continue;
    const auto& v = j.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) ||
        (!v.is_number_unsigned() && (v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)))
      return Status::InvalidArgument(std::string("prepare spec: ") + key +
                                     " is not a size: " + v.dump());
    *field = static_cast<int>(v.get<int64_t>());
  }
  try {  // nlohmann throws on a field of the wrong type
    s.gray = j.value("gray", false);
    if (j.contains("codec")) {
      Result<RecordCodec> codec = ParseEnum<RecordCodec>(j.at("codec").get<std::string>());
      if (!codec.ok()) return Status::InvalidArgument("prepare spec: " + codec.status().message());
      s.codec = *codec;
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("prepare spec: ") + e.what());
  }
  SSDFEED_RETURN_IF_ERROR(s.Validate());
  return s;
}

void ShortSideSize(int h, int w, int short_side, int max_long, int* out_h, int* out_w) {
  double scale = static_cast<double>(short_side) / std::min(h, w);
  if (max_long > 0 && std::max(h, w) * scale > max_long)
    scale = static_cast<double>(max_long) / std::max(h, w);
  *out_h = std::max(1, static_cast<int>(std::lround(h * scale)));
  *out_w = std::max(1, static_cast<int>(std::lround(w * scale)));
}

namespace {

// Target size of the resize step for an h x w original (h, w if none).
void ResizeTarget(const PrepareSpec& s, int h, int w, int* th, int* tw) {
  *th = h;
  *tw = w;
  if (s.resize_h > 0) {
    *th = s.resize_h;
    *tw = s.resize_w;
  } else if (s.resize_short > 0) {
    ShortSideSize(h, w, s.resize_short, s.max_long, th, tw);
  }
}

Status ResizeInto(const Image& in, int th, int tw, Image* out) {
  out->Reset(th, tw, in.channels);
  Status s = CvCall("resize", [&] {
    int type = CV_8UC(in.channels);
    cv::Mat src(in.height, in.width, type, const_cast<uint8_t*>(in.pixels.data()));
    cv::Mat dst(th, tw, type, out->pixels.data());
    ResizeAntialiased(src, dst);
  });
  if (s.ok()) return s;
  return s.WithContext(std::to_string(in.height) + "x" + std::to_string(in.width) + " to " +
                       std::to_string(th) + "x" + std::to_string(tw));
}

// Same rounding as torchvision's center_crop.
int CenterOffset(int size, int crop) { return static_cast<int>(std::lround((size - crop) / 2.0)); }

Status CenterCrop(const Image& in, int ch, int cw, Image* out) {
  if (in.height < ch || in.width < cw)
    return Status::InvalidArgument("center crop " + std::to_string(ch) + "x" + std::to_string(cw) +
                                   " is larger than the resized image " +
                                   std::to_string(in.height) + "x" + std::to_string(in.width));
  int top = CenterOffset(in.height, ch);
  int left = CenterOffset(in.width, cw);
  out->Reset(ch, cw, in.channels);
  size_t row = static_cast<size_t>(cw) * in.channels;
  for (int y = 0; y < ch; ++y) {
    const uint8_t* s =
        in.pixels.data() + (static_cast<size_t>(top + y) * in.width + left) * in.channels;
    std::memcpy(out->pixels.data() + y * row, s, row);
  }
  return Status::OK();
}

Status ResizeAndCrop(const Image& in, int th, int tw, const PrepareSpec& spec, Image* tmp,
                     Image* out) {
  if (spec.crop_h == 0) return ResizeInto(in, th, tw, out);
  SSDFEED_RETURN_IF_ERROR(ResizeInto(in, th, tw, tmp));
  return CenterCrop(*tmp, spec.crop_h, spec.crop_w, out);
}

}  // namespace

PrepareGeometry PlanPrepare(const PrepareSpec& spec, int h, int w) {
  PrepareGeometry g;
  g.origin_h = h;
  g.origin_w = w;
  ResizeTarget(spec, h, w, &g.resized_h, &g.resized_w);
  g.out_h = g.resized_h;
  g.out_w = g.resized_w;
  if (spec.crop_h > 0) {
    g.crop_top = CenterOffset(g.resized_h, spec.crop_h);
    g.crop_left = CenterOffset(g.resized_w, spec.crop_w);
    g.out_h = spec.crop_h;
    g.out_w = spec.crop_w;
  }
  return g;
}

Status PrepareDecoded(const Image& in, const PrepareSpec& spec, Image* out) {
  int th, tw;
  ResizeTarget(spec, in.height, in.width, &th, &tw);
  Image tmp;
  return ResizeAndCrop(in, th, tw, spec, &tmp, out);
}

Status Decoder::DecodeAndPrepare(std::string_view bytes, const PrepareSpec& spec, Image* out,
                                 PrepareGeometry* geometry) {
  SSDFEED_RETURN_IF_ERROR(spec.Validate());
  // The target is computed from the original size so the output size never
  // depends on the DCT scale picked.
  int h = 0, w = 0, subsamp = -1, cs = -1;
  if (SniffFormat(bytes) == ImageFormat::kJpeg) {
    if (tjDecompressHeader3(static_cast<tjhandle>(tj_),
                            reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), &w,
                            &h, &subsamp, &cs) != 0)
      return Status::Corruption(std::string("bad JPEG header: ") +
                                tjGetErrorStr2(static_cast<tjhandle>(tj_)));
  }
  int th = 0, tw = 0;
  if (h > 0) ResizeTarget(spec, h, w, &th, &tw);
  bool resizes = spec.resize_h > 0 || spec.resize_short > 0;
  // DCT scaling only down to twice the target: the last halving is left to
  // the antialiasing resize, which keeps quality at a full decode's level
  // (image_test.cc) while large images still decode 4-16x fewer pixels.
  int min_h = resizes ? 2 * th : 0, min_w = resizes ? 2 * tw : 0;
  thread_local Image decoded, resized;
  // A JPEG decoded at full size that shrinks is resized in its YCbCr planes
  // (image/jpeg_planes.h). Not after a DCT scaling: there the planes' route
  // measured further from the original than the RGB one (image_test.cc).
  bool full_size = PickDctScale(w, h, min_w, min_h).denom == 1;
  if (h > 0 && static_cast<uint64_t>(w) * h <= limits.max_pixels && full_size &&
      ResizesInPlanes(subsamp, cs, spec.gray, h, w, th, tw)) {
    if (geometry != nullptr) *geometry = PlanPrepare(spec, h, w);
    tjhandle tj = static_cast<tjhandle>(tj_);
    if (spec.crop_h == 0) return DecodeJpegResizedInPlanes(tj, bytes, w, h, subsamp, th, tw, out);
    SSDFEED_RETURN_IF_ERROR(DecodeJpegResizedInPlanes(tj, bytes, w, h, subsamp, th, tw, &resized));
    return CenterCrop(resized, spec.crop_h, spec.crop_w, out);
  }
  SSDFEED_RETURN_IF_ERROR(Decode(bytes, spec.gray, min_h, min_w, &decoded));
  MarkStage(Tmr::kDecode);  // the rest is prepare (resize, crop)
  if (h == 0) {             // not a JPEG: decoded at full size
    h = decoded.height;
    w = decoded.width;
    ResizeTarget(spec, h, w, &th, &tw);
  }
  if (geometry != nullptr) *geometry = PlanPrepare(spec, h, w);
  return ResizeAndCrop(decoded, th, tw, spec, &resized, out);
}

}  // namespace ssdfeed
