// The one spelling table of each option enum. The CLI's option checks, the
// Python enums and their parse(), the loader state dict and every "must be
// 'a' or 'b'" message come from here, so a new mode is added once.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/augment.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

template <typename E>
struct Spelling {
  E value;
  const char* name;
};

// Specialised per enum: `option` (the Python keyword; the CLI flag is its
// --dashed form) and `names`, in declaration order.
template <typename E>
struct EnumTable;

template <>
struct EnumTable<OnError> {
  static constexpr const char* option = "on_error";
  static constexpr Spelling<OnError> names[] = {{OnError::kRaise, "raise"},
                                                {OnError::kSkip, "skip"}};
};
template <>
struct EnumTable<ShardMode> {
  static constexpr const char* option = "shard";
  static constexpr Spelling<ShardMode> names[] = {{ShardMode::kGlobal, "global"},
                                                  {ShardMode::kSticky, "sticky"},
                                                  {ShardMode::kRotate, "rotate"}};
};
template <>
struct EnumTable<WarmRead> {
  static constexpr const char* option = "warm_read";
  static constexpr Spelling<WarmRead> names[] = {
      {WarmRead::kAuto, "auto"}, {WarmRead::kBuffered, "buffered"}, {WarmRead::kDirect, "direct"}};
};
template <>
struct EnumTable<FillWrite> {
  static constexpr const char* option = "fill_write";
  static constexpr Spelling<FillWrite> names[] = {{FillWrite::kAuto, "auto"},
                                                  {FillWrite::kBuffered, "buffered"},
                                                  {FillWrite::kDirect, "direct"}};
};
template <>
struct EnumTable<DType> {
  static constexpr const char* option = "dtype";
  static constexpr Spelling<DType> names[] = {
      {DType::kUint8, "uint8"}, {DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}};
};
template <>
struct EnumTable<Layout> {
  static constexpr const char* option = "layout";
  static constexpr Spelling<Layout> names[] = {{Layout::kNHWC, "NHWC"}, {Layout::kNCHW, "NCHW"}};
};
template <>
struct EnumTable<AugmentKind> {
  static constexpr const char* option = "augment kind";
  static constexpr Spelling<AugmentKind> names[] = {
      {AugmentKind::kResizedCrop, "resized_crop"},
      {AugmentKind::kFlip, "flip"},
      {AugmentKind::kScaleJitterCrop, "scale_jitter_crop"}};
};
template <>
struct EnumTable<RecordCodec> {
  static constexpr const char* option = "codec";
  static constexpr Spelling<RecordCodec> names[] = {{RecordCodec::kRaw, "raw"},
                                                    {RecordCodec::kZstd, "zstd"},
                                                    {RecordCodec::kJpeg, "jpeg"},
                                                    {RecordCodec::kYuv420, "yuv420"}};
};

template <>
struct EnumTable<FieldKind> {
  static constexpr const char* option = "field kind";
  static constexpr Spelling<FieldKind> names[] = {{FieldKind::kImage, "image"},
                                                  {FieldKind::kMask, "mask"},
                                                  {FieldKind::kBoxes, "boxes"},
                                                  {FieldKind::kClasses, "classes"},
                                                  {FieldKind::kLabel, "label"},
                                                  {FieldKind::kArray, "array"},
                                                  {FieldKind::kBytes, "bytes"},
                                                  {FieldKind::kBoxFloats, "box_floats"},
                                                  {FieldKind::kInstanceMasks, "instance_masks"},
                                                  {FieldKind::kAuto, "auto"}};
};

template <typename E>
constexpr std::span<const Spelling<E>> Spellings() {
  return EnumTable<E>::names;
}

template <typename E>
const char* EnumName(E v) {
  for (const auto& s : Spellings<E>())
    if (s.value == v) return s.name;
  return "?";
}

template <typename E>
std::vector<std::string> EnumNames() {
  std::vector<std::string> out;
  for (const auto& s : Spellings<E>()) out.emplace_back(s.name);
  return out;
}

// "'a', 'b' or 'c'".
inline std::string QuotedChoices(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

// The value spelled `text`; otherwise InvalidArgument "OPTION must be 'a',
// 'b' or 'c', not 'TEXT'" (OPTION: `option`, default the table's).
template <typename E>
Result<E> ParseEnum(std::string_view text, std::string_view option = EnumTable<E>::option) {
  for (const auto& s : Spellings<E>())
    if (text == s.name) return s.value;
  return Status::InvalidArgument(std::string(option) + " must be " + QuotedChoices(EnumNames<E>()) +
                                 ", not '" + std::string(text) + "'");
}

}  // namespace ssdfeed
