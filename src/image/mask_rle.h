// The run-length form of a "|u1" mask field in a record's field section
// (field codec 1, docs/cache-format.md "Run-length masks"): a segmentation
// mask or instance masks are flat regions, so their runs are a small
// fraction of their bytes, and fewer bytes are read, checksummed and
// copied per sample. Rendering decodes only the rows it samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ssdfeed {

// Appends the runs of rows x width bytes at data (rows of width bytes,
// C order).
void EncodeMaskRle(const uint8_t* data, uint64_t rows, uint64_t width, std::string* out);

// "" when rle is exactly the runs of a rows x width mask in its one
// encoding (every row's runs cover it exactly, adjacent runs of a row differ
// in value, lengths are minimal LEB128 of at most 5 bytes), else what is
// wrong. Reads only inside rle and allocates nothing: a stream that claims a
// huge mask is refused by its size before anyone allocates for it (the
// caller checks rows x width against the record's limits first).
std::string CheckMaskRle(std::string_view rle, uint64_t rows, uint64_t width);

// Decodes the rows of a stream CheckMaskRle accepted, forward only.
class MaskRleRows {
 public:
  MaskRleRows(std::string_view rle, uint64_t width) : p_(rle.data()), width_(width) {}
  // Skips rows up to (not including) row `to`; no-op if already there.
  void SkipTo(uint64_t to);
  // Decodes the next row into out (width bytes).
  void Read(uint8_t* out);
  // Calls fn(value, first column, length) for each run of the next row.
  template <typename Fn>
  void ReadRuns(Fn&& fn) {
    for (uint64_t x = 0; x < width_;) {
      auto value = static_cast<uint8_t>(*p_++);
      uint64_t len = LoadLength();
      fn(value, x, len);
      x += len;
    }
    ++row_;
  }
  uint64_t row() const { return row_; }

 private:
  uint64_t LoadLength();  // the LEB128 length at p_ (a checked stream)
  const char* p_;
  uint64_t width_;
  uint64_t row_ = 0;  // the next row in the stream
};

// Decodes a checked stream of rows x width into out (rows x width bytes).
void DecodeMaskRle(std::string_view rle, uint64_t rows, uint64_t width, uint8_t* out);

}  // namespace ssdfeed
