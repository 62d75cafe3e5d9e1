// Sample fields: what a sample holds besides its image and class label
// (segmentation masks, detection boxes, arrays, raw bytes). The image and
// the label keep their own fast path (Image, CachedSample::pixels / label);
// every other field travels as a Field from the source, through preparation
// and the cache record, to the batch. docs/python.md lists the kinds and
// layouts; docs/cache-format.md how a record holds them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/status.h"

namespace ssdfeed {

// What a field is, which decides how preparation and augmentation treat it.
// The values are stored in cache records: append only.
enum class FieldKind : uint8_t {
  kImage = 0,          // the sample's image: decoded, prepared, augmented (never a Field)
  kMask = 1,           // class ids from a PNG (8/16-bit grey or palette indices):
                       // "|u1" or "<u2" (H,W), resized nearest, cropped and flipped
                       // with the image
  kBoxes = 2,          // "<f4" (K,4) xyxy in pixels of the (prepared / served) image
  kClasses = 3,        // "<i8" (K,): one class per box, dropped with its box
  kLabel = 4,          // "<i8" (): a class label (the classic one is EncodedSample::label)
  kArray = 5,          // a .npy file: any dtype and shape, passed through bit-exact
  kBytes = 6,          // passed through untouched ("|u1" (n,)): .json, .txt, ...
  kBoxFloats = 7,      // "<f4" (K,): one number per box (COCO's area), dropped
                       // with its box as classes are; kept as the origin gives it
  kInstanceMasks = 8,  // "|u1" (K,H,W) 0/1: one mask per box (COCO's
                       // segmentation), each plane resized nearest,
                       // cropped and flipped with the image, and dropped
                       // with its box as classes are
  // FieldSpec only, never stored: the kind its name implies, else its key's
  // (ResolveFieldKind).
  kAuto = 255,
};

// One field of a sample as the layouts name it: `name` is what the batch
// calls it, `key` where the layout finds it (a WebDataset extension such as
// "seg.png", a TFRecord feature key, a files: pattern). An empty key takes
// the layout's default for the name.
struct FieldSpec {
  std::string name;
  FieldKind kind = FieldKind::kAuto;  // Default: from the name, then the key.
  std::string key;
};

// The kind of spec: its own unless kAuto; then the name's ("image", "mask"
// or "seg*", "label" or "cls", "boxes", "classes"); then the key's ("cls" a
// label, "seg.png" or "...segmentation..." a mask, "image/object/bbox/*"
// boxes, "image/object/class/label" classes, "*npy" an array); else bytes.
FieldKind ResolveFieldKind(const FieldSpec& spec);

// "NAME=KEY" or "NAME:KIND=KEY" (KIND spelled as in Spellings<FieldKind>),
// as the CLI's --field and URI queries take it. Malformed text, or a kind
// said to be bytes for a name or key that implies another, is
// InvalidArgument saying so.
Result<FieldSpec> ParseFieldSpec(std::string_view text);

// A field as read from the origin, before preparation.
struct EncodedField {
  std::string name;
  FieldKind kind = FieldKind::kBytes;
  // mask: the PNG file; array: the .npy file; bytes: as stored;
  // boxes: float32 K*4 xyxy, little endian; classes: int64 K; label: int64;
  // box_floats: float32 K; instance_masks: uint32 H, uint32 W, then K
  // planes of H*W bytes (0/1, row-major), H x W being the origin image's.
  std::string bytes;
  // boxes only: coordinates are fractions of the image's width and height
  // (TFRecord object detection), not pixels of the origin image.
  bool normalized = false;
  // Where it came from, for errors ("/voc/SegmentationClass/2007_0001.png").
  std::string origin;
};

// A prepared (or rendered) field: elements of a numpy dtype in C order.
struct Field {
  std::string name;
  FieldKind kind = FieldKind::kBytes;
  std::string dtype;            // numpy's dtype.str: "|u1", "<u2", "<f4", "<i8", ...
  std::vector<uint64_t> shape;  // C order; () for a scalar
  std::string data;             // product(shape) * itemsize bytes
};

// How a field's bytes are stored in a cache record (docs/cache-format.md,
// "Fields"). Whatever a batch or an API hands out is raw.
enum class FieldCodec : uint8_t {
  kRaw = 0,  // the elements, C order
  kRle = 1,  // a "|u1" mask's runs ("Run-length masks")
};

// A Field read in place from a cache record (points into the read buffer).
struct FieldView {
  std::string_view name;
  FieldKind kind = FieldKind::kBytes;
  std::string_view dtype;
  std::vector<uint64_t> shape;  // the elements' shape, whatever the codec
  const uint8_t* data = nullptr;
  size_t size = 0;                      // bytes at data (stored: the runs for kRle)
  FieldCodec codec = FieldCodec::kRaw;  // default: data is the elements
};

// Bytes of one element of a numpy dtype string ("<f4" -> 4, "<U5" -> 20);
// 0 when it is not one numpy would give (".npy" parsing refuses it).
size_t DTypeItemSize(std::string_view dtype);

}  // namespace ssdfeed
