// The public helpers of ssdfeed/sample.h.
#include "ssdfeed/sample.h"

#include <cctype>

#include "ssdfeed/enum_names.h"

namespace ssdfeed {

// The spellings of FieldKind (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(FieldKind, "field kind", {FieldKind::kImage, "image"},
                   {FieldKind::kMask, "mask"}, {FieldKind::kBoxes, "boxes"},
                   {FieldKind::kClasses, "classes"}, {FieldKind::kLabel, "label"},
                   {FieldKind::kArray, "array"}, {FieldKind::kBytes, "bytes"},
                   {FieldKind::kBoxFloats, "box_floats"},
                   {FieldKind::kInstanceMasks, "instance_masks"}, {FieldKind::kAuto, "auto"})

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

FieldKind KindFromName(std::string_view name) {
  if (name == "image") return FieldKind::kImage;
  if (name == "mask" || name.substr(0, 3) == "seg") return FieldKind::kMask;
  if (name == "label" || name == "cls") return FieldKind::kLabel;
  if (name == "boxes") return FieldKind::kBoxes;
  if (name == "classes") return FieldKind::kClasses;
  if (EndsWith(name, "npy")) return FieldKind::kArray;
  return FieldKind::kAuto;
}

FieldKind KindFromKey(std::string_view key) {
  if (!key.empty() && key.front() == '.') key.remove_prefix(1);
  if (key == "cls") return FieldKind::kLabel;
  if (key.substr(0, 4) == "seg." || key.find("segmentation") != std::string_view::npos)
    return FieldKind::kMask;
  if (key.substr(0, 18) == "image/object/bbox/") return FieldKind::kBoxes;
  if (key == "image/object/class/label") return FieldKind::kClasses;
  if (EndsWith(key, "npy")) return FieldKind::kArray;
  return FieldKind::kBytes;
}

}  // namespace

FieldKind ResolveFieldKind(const FieldSpec& spec) {
  if (spec.kind != FieldKind::kAuto) return spec.kind;
  FieldKind k = KindFromName(spec.name);
  return k != FieldKind::kAuto ? k : KindFromKey(spec.key);
}

Result<FieldSpec> ParseFieldSpec(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Status::InvalidArgument("field '" + std::string(text) +
                                   "': expected NAME=KEY or NAME:KIND=KEY");
  FieldSpec spec{std::string(text.substr(0, eq)), FieldKind::kAuto,
                 std::string(text.substr(eq + 1))};
  size_t colon = spec.name.find(':');
  if (colon == std::string::npos) return spec;
  auto kind = ParseEnum<FieldKind>(std::string_view(spec.name).substr(colon + 1));
  if (!kind.ok())
    return Status::InvalidArgument("field '" + std::string(text) + "': " + kind.status().message());
  spec.kind = *kind;
  spec.name.erase(colon);
  if (spec.name.empty())
    return Status::InvalidArgument("field '" + std::string(text) + "' has no name");
  return spec;
}

size_t DTypeItemSize(std::string_view dtype) {
  // numpy's dtype.str: byte order, type character, size in bytes (characters
  // for U), then a unit in brackets for datetimes ("<M8[ns]").
  if (dtype.size() < 3 || std::string_view("<>|=").find(dtype[0]) == std::string_view::npos)
    return 0;
  char type = dtype[1];
  if (std::string_view("biufcSUVmM").find(type) == std::string_view::npos) return 0;
  size_t i = 2, n = 0;
  for (; i < dtype.size() && std::isdigit(static_cast<unsigned char>(dtype[i])); ++i) {
    n = n * 10 + static_cast<size_t>(dtype[i] - '0');
    if (n > (1u << 30)) return 0;
  }
  if (i == 2) return 0;
  std::string_view rest = dtype.substr(i);
  if (!rest.empty() && !((type == 'm' || type == 'M') && rest.front() == '[' && rest.back() == ']'))
    return 0;
  return type == 'U' ? n * 4 : n;
}

}  // namespace ssdfeed
