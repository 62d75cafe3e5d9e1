#include "cli/printable.h"

#include <cstdint>

namespace ssdfeed::cli {

namespace {

// The length of the valid UTF-8 sequence at s[i] of a code point from
// U+00A0 up, else 0 (an invalid or overlong sequence, a surrogate, a C1
// control).
size_t PrintableUtf8Length(std::string_view s, size_t i) {
  auto c = static_cast<uint8_t>(s[i]);
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0xA0, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool PrintableAscii(char c) { return c >= 0x20 && c < 0x7F; }

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (PrintableAscii(text[i])) {
      out += text[i++];
      continue;
    }
    if (size_t n = PrintableUtf8Length(text, i); n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    constexpr char kHex[] = "0123456789abcdef";
    auto b = static_cast<uint8_t>(text[i++]);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

}  // namespace ssdfeed::cli
