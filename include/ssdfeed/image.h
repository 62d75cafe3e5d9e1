// Decoding (JPEG via TurboJPEG, PNG via libspng) and the deterministic
// preparation that is cached: resize, centre crop, colour. uint8 HWC out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/status.h"

namespace ssdfeed {

// An owned uint8 image, rows packed, channels interleaved (HWC).
struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;

  size_t bytes() const { return static_cast<size_t>(height) * width * channels; }
  void Reset(int h, int w, int c) {
    height = h;
    width = w;
    channels = c;
    pixels.resize(bytes());
  }
};

// How a cache record stores the prepared pixels (docs/cache-format.md,
// "Codecs"): raw as they are; zstd lossless (served bytes equal raw's);
// jpeg re-encoded at PrepareSpec::quality (served pixels are its decode);
// yuv420 BT.601 YCbCr with half-resolution chroma, 0.5x raw's bytes (lossy
// in chroma only: served pixels are its decode).
enum class RecordCodec : uint8_t { kRaw = 0, kZstd = 1, kJpeg = 2, kYuv420 = 3 };

// The deterministic preparation. Every field's default is "off".
struct PrepareSpec {
  // Resize so the shorter side is this many pixels, aspect kept. 0: off.
  int resize_short = 0;
  // With resize_short: cap the longer side (shorter then ends smaller). 0: no cap.
  int max_long = 0;
  // Resize to exactly resize_h x resize_w (both > 0), aspect not kept. 0: off.
  int resize_h = 0;
  int resize_w = 0;
  // Centre crop to crop_h x crop_w after resizing (both > 0). 0: off. An image
  // smaller than the crop is an error naming both sizes.
  int crop_h = 0;
  int crop_w = 0;
  // Decode to one gray channel instead of RGB. Default false.
  bool gray = false;
  // How records store the pixels. Default kRaw (the spec's Canonical() text
  // is then what it was before codecs, so raw entries keep their names).
  RecordCodec codec = RecordCodec::kRaw;
  // kJpeg's quality, 1-100. Ignored by the other codecs. Default 90.
  int quality = 90;

  int channels() const { return gray ? 1 : 3; }
  Status Validate() const;
  // Canonical text, e.g. "prep2;rgb;short=256;long=0;exact=0x0;crop=224x224;
  // resample=gauss-aa/linear;jpeg=tj-dct248-islow". Goes into cache
  // fingerprints: change it whenever the output bytes of preparation change.
  std::string Canonical() const;
  // The fields above as one JSON object, e.g. {"crop_h":224,"crop_w":224,
  // "gray":false,...}: what cache manifests record so that a tool can
  // rebuild the preparation of an entry.
  std::string ToJson() const;
  // Reads ToJson's object back. A missing field keeps its default; fields
  // other than the spec's are ignored (a manifest's object also holds source
  // keys). Not JSON, a field of the wrong type or a spec that fails Validate
  // is InvalidArgument saying which.
  static Result<PrepareSpec> FromJson(std::string_view json);
};

// Where a prepared image's pixels come from in its origin image: the resize
// to resized_h x resized_w, then the centre crop at (crop_top, crop_left)
// of out_h x out_w. Masks and boxes of the sample follow the same geometry
// (image/field_prepare.h).
struct PrepareGeometry {
  int origin_h = 0, origin_w = 0;    // the decoded image at full size
  int resized_h = 0, resized_w = 0;  // after the resize (the origin size without one)
  int crop_top = 0, crop_left = 0;   // 0 without a centre crop
  int out_h = 0, out_w = 0;          // the prepared image
};

// The geometry spec gives an origin_h x origin_w image (an image smaller
// than the centre crop is refused by the preparation, not here).
PrepareGeometry PlanPrepare(const PrepareSpec& spec, int origin_h, int origin_w);

struct DecodeLimits {
  // Decoded pixels (width * height) above this are refused before any pixel
  // is decoded, so a crafted header cannot exhaust memory. Default 100 MP.
  uint64_t max_pixels = 100ull * 1000 * 1000;
};

enum class ImageFormat { kUnknown, kJpeg, kPng };
ImageFormat SniffFormat(std::string_view bytes);

// Per-thread decoding state (a TurboJPEG handle and scratch buffers). Not
// thread-safe: use one per thread.
class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes to RGB (or gray). min_h/min_w: the smallest size the caller will
  // use; JPEG decoding then scales in the DCT domain by the largest factor
  // that keeps both sides at least that large. 0: full size.
  Status Decode(std::string_view bytes, bool gray, int min_h, int min_w, Image* out);

  // Decode + prepare (the cached step). EXIF orientation is ignored (as by
  // torchvision's and TensorFlow's decoders); see docs/ARCHITECTURE.md.
  // geometry (may be null): where the output came from, for the sample's
  // other spatial fields.
  Status DecodeAndPrepare(std::string_view bytes, const PrepareSpec& spec, Image* out,
                          PrepareGeometry* geometry = nullptr);

  DecodeLimits limits;

 private:
  void* tj_ = nullptr;  // tjhandle
  Image scratch_;
};

// Applies the resize / crop of spec to an already decoded image.
Status PrepareDecoded(const Image& in, const PrepareSpec& spec, Image* out);

// Output size of resize_short/max_long for an h x w input.
void ShortSideSize(int h, int w, int short_side, int max_long, int* out_h, int* out_w);

// Encodes RGB or gray pixels as a baseline JPEG (used by make-dataset, tests).
Status EncodeJpeg(const Image& img, int quality, std::string* out);

}  // namespace ssdfeed
