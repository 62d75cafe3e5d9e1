#include "image/mask_rle.h"

#include <cstring>

namespace ssdfeed {

namespace {

// Run lengths are LEB128: 7 bits a byte, low bits first, at most 5 bytes.
constexpr int kMaxVarint = 5;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// A varint of a checked stream.
uint64_t LoadVarint(const char** p) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    auto b = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) return v;
  }
}

// One run of an unchecked stream: false when it is cut short, overlong or
// not minimal.
bool CheckRun(const char** p, const char* end, uint8_t* value, uint64_t* len) {
  if (end - *p < 2) return false;
  *value = static_cast<uint8_t>(*(*p)++);
  uint64_t v = 0;
  for (int i = 0; i < kMaxVarint; ++i) {
    if (*p == end) return false;
    auto b = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      if (i > 0 && b == 0) return false;  // not minimal: one encoding only
      *len = v;
      return true;
    }
  }
  return false;
}

}  // namespace

void EncodeMaskRle(const uint8_t* data, uint64_t rows, uint64_t width, std::string* out) {
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = data + r * width;
    uint64_t x = 0;
    while (x < width) {
      uint64_t end = x + 1;
      while (end < width && row[end] == row[x]) ++end;
      out->push_back(static_cast<char>(row[x]));
      AppendVarint(end - x, out);
      x = end;
    }
  }
}

std::string CheckMaskRle(std::string_view rle, uint64_t rows, uint64_t width) {
  const char* p = rle.data();
  const char* end = p + rle.size();
  if (width == 0 || rows == 0) return rle.empty() ? "" : "run-length mask of no pixels holds runs";
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t x = 0;
    int last = -1;
    while (x < width) {
      uint8_t value = 0;
      uint64_t len = 0;
      if (!CheckRun(&p, end, &value, &len))
        return "run-length mask cut short or a bad run length in row " + std::to_string(r);
      if (len == 0 || len > width - x)
        return "run-length mask: a run crosses the end of row " + std::to_string(r);
      if (value == last)
        return "run-length mask: two runs of one value side by side in row " + std::to_string(r);
      last = value;
      x += len;
    }
  }
  if (p != end) return "run-length mask: bytes after the last row";
  return "";
}

uint64_t MaskRleRows::LoadLength() { return LoadVarint(&p_); }

void MaskRleRows::SkipTo(uint64_t to) {
  for (; row_ < to; ++row_) {
    for (uint64_t x = 0; x < width_;) {
      ++p_;  // the value
      x += LoadVarint(&p_);
    }
  }
}

void MaskRleRows::Read(uint8_t* out) {
  for (uint64_t x = 0; x < width_;) {
    auto value = static_cast<uint8_t>(*p_++);
    uint64_t len = LoadVarint(&p_);
    std::memset(out + x, value, len);
    x += len;
  }
  ++row_;
}

void DecodeMaskRle(std::string_view rle, uint64_t rows, uint64_t width, uint8_t* out) {
  MaskRleRows r(rle, width);
  for (uint64_t i = 0; i < rows; ++i) r.Read(out + i * width);
}

}  // namespace ssdfeed
