// The one spelling table of each option enum. The CLI's option checks, the
// Python enums and their parse(), the loader state dict and every "must be
// 'a' or 'b'" message come from here, so a new mode is added once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/status.h"

namespace ssdfeed {

// The enums spelled here, declared only (each as its definition, underlying
// type included): a file that spells one includes this header without the
// loader's, the cache's or the image's. Each table is defined beside its
// enum (SSDFEED_ENUM_TABLE in that room's .cc).
enum class OnError;                // ssdfeed/source.h, src/source/source.cc
enum class ShardMode;              // ssdfeed/loader.h, src/pipeline/loader.cc
enum class WarmRead;               // ssdfeed/cache.h, src/cache/cache_entry.cc
enum class FillWrite;              // ssdfeed/cache.h, src/cache/cache_entry.cc
enum class DType;                  // ssdfeed/augment.h, src/image/augment.cc
enum class Layout;                 // ssdfeed/augment.h, src/image/augment.cc
enum class AugmentKind;            // ssdfeed/augment.h, src/image/augment.cc
enum class RecordCodec : uint8_t;  // ssdfeed/image.h, src/image/pixel_codec.cc
enum class FieldKind : uint8_t;    // ssdfeed/sample.h, src/source/sample.cc

template <typename E>
struct Spelling {
  E value;
  const char* name;
};

// Each enum's spellings, in declaration order, and its `option` (the
// Python keyword; the CLI flag is its --dashed form).
template <typename E>
std::span<const Spelling<E>> Spellings();
template <typename E>
const char* EnumOption();

#define SSDFEED_DECLARE_ENUM_TABLE(E)          \
  template <>                                  \
  std::span<const Spelling<E>> Spellings<E>(); \
  template <>                                  \
  const char* EnumOption<E>();
SSDFEED_DECLARE_ENUM_TABLE(OnError)
SSDFEED_DECLARE_ENUM_TABLE(ShardMode)
SSDFEED_DECLARE_ENUM_TABLE(WarmRead)
SSDFEED_DECLARE_ENUM_TABLE(FillWrite)
SSDFEED_DECLARE_ENUM_TABLE(DType)
SSDFEED_DECLARE_ENUM_TABLE(Layout)
SSDFEED_DECLARE_ENUM_TABLE(AugmentKind)
SSDFEED_DECLARE_ENUM_TABLE(RecordCodec)
SSDFEED_DECLARE_ENUM_TABLE(FieldKind)
#undef SSDFEED_DECLARE_ENUM_TABLE

// Defines enum E's table, in a .cc that includes E's header:
// SSDFEED_ENUM_TABLE(OnError, "on_error", {OnError::kRaise, "raise"}, ...).
#define SSDFEED_ENUM_TABLE(E, OPTION, ...)                 \
  template <>                                              \
  std::span<const Spelling<E>> Spellings<E>() {            \
    static constexpr Spelling<E> kNames[] = {__VA_ARGS__}; \
    return kNames;                                         \
  }                                                        \
  template <>                                              \
  const char* EnumOption<E>() {                            \
    return OPTION;                                         \
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
Result<E> ParseEnum(std::string_view text, std::string_view option = EnumOption<E>()) {
  for (const auto& s : Spellings<E>())
    if (text == s.name) return s.value;
  return Status::InvalidArgument(std::string(option) + " must be " + QuotedChoices(EnumNames<E>()) +
                                 ", not '" + std::string(text) + "'");
}

}  // namespace ssdfeed
