// The public helpers of ssdfeed/sample.h.
#include "ssdfeed/sample.h"

#include <cctype>

namespace ssdfeed {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

FieldKind DefaultFieldKind(std::string_view name, std::string_view key) {
  if (name == "image") return FieldKind::kImage;
  if (name == "mask" || name.substr(0, 3) == "seg") return FieldKind::kMask;
  if (name == "label" || name == "cls") return FieldKind::kLabel;
  if (name == "boxes") return FieldKind::kBoxes;
  if (name == "classes") return FieldKind::kClasses;
  if (EndsWith(key, "npy") || EndsWith(name, "npy")) return FieldKind::kArray;
  return FieldKind::kBytes;
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
