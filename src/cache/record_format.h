// Bytes of the cache's segment (.dat) and index (.idx) files; see
// docs/cache-format.md. Little endian.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace ssdfeed {
struct CachedSample;
}

// Fields are memcpy'd in native byte order; the format is little endian.
static_assert(std::endian::native == std::endian::little,
              "the cache format is written in native byte order: little-endian hosts only");

namespace ssdfeed::cache_format {

constexpr uint32_t kRecordMagic = 0x52464453;  // "SDFR"
// 3: records carry a field section after the pixels (header byte 21 says
// how many fields). A version is part of every entry's fingerprint, so
// entries of another version are never opened, let alone served.
constexpr uint32_t kFormatVersion = 3;
constexpr size_t kRecordHeaderSize = 40;
constexpr size_t kIndexEntrySize = 48;
// A record's payload (pixels and fields) above this is refused when stored,
// and is damage in an import stream: no prepared sample is that large.
constexpr uint32_t kMaxPayload = 1u << 30;

struct RecordHeader {
  uint32_t payload_len = 0;
  uint64_t sample_id = 0;
  uint16_t height = 0, width = 0;
  uint8_t channels = 0;
  // Fields in the section after the pixels (0: none, and no section).
  uint8_t num_fields = 0;
  int64_t label = -1;
  uint64_t checksum = 0;  // XXH3-64 of header bytes [0, 32) and the payload

  uint64_t pixel_bytes() const { return uint64_t{height} * width * channels; }
};

// Writes the 40 header bytes for payload into out (computes the checksum).
void EncodeRecordHeader(RecordHeader* h, const uint8_t* payload, char* out);
// Parses and checks a whole record (header + payload). Returns an empty
// string when intact, else what is wrong.
// The field section, when present, must parse (ParseFields) and hold
// num_fields fields.
std::string CheckRecord(const char* rec, size_t len, uint64_t want_id, RecordHeader* h);
// The sample a record CheckRecord passed holds: pixels and fields point
// into rec.
void SampleOf(const char* rec, const RecordHeader& h, CachedSample* out);

struct IndexEntry {
  uint64_t sample_id = 0;
  uint64_t offset = 0;      // of the record in the .dat file
  uint32_t record_len = 0;  // header + payload
  uint16_t height = 0, width = 0;
  uint8_t channels = 0;
  uint64_t stamp = 0;  // sequence number (claims); the highest of an id wins
  // The record's checksum, its low 7 bytes only: the entry's own hash
  // overwrites the eighth (docs/cache-format.md). Nothing checks it.
  uint64_t record_checksum = 0;
};

void EncodeIndexEntry(const IndexEntry& e, char* out);  // kIndexEntrySize bytes
// False when the entry's own hash does not match (torn or flipped).
bool DecodeIndexEntry(const char* in, IndexEntry* e);

}  // namespace ssdfeed::cache_format
