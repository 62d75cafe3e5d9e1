// CRC-32C (Castagnoli), as TFRecord framing uses it, and TFRecord's mask.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ssdfeed::crc32c {

uint32_t Value(const void* data, size_t n);

inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace ssdfeed::crc32c
