// Bytes of the cache's segment (.dat) and index (.idx) files; see
// docs/cache-format.md. Little endian.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "ssdfeed/status.h"

namespace ssdfeed {
struct CachedSample;
class PixelCodecScratch;
}  // namespace ssdfeed

// Fields are memcpy'd in native byte order; the format is little endian.
static_assert(std::endian::native == std::endian::little,
              "the cache format is written in native byte order: little-endian hosts only");

namespace ssdfeed::cache_format {

constexpr uint32_t kRecordMagic = 0x52464453;  // "SDFR"
// 3: records carry a field section after the pixels (header byte 21 says
// how many fields). Byte 22 (the codec) came later without a new version:
// a raw record is byte for byte what version 3 wrote, and an entry of
// another codec has another fingerprint (the codec is in the spec). A version is part of every
// entry's fingerprint, so entries of another version are never opened, let alone served.
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
  // Byte 22: how the pixels are stored (a RecordCodec). For raw they are
  // the payload's first pixel_bytes(); otherwise a u32 length, then that
  // many stored bytes (docs/cache-format.md, "Codecs").
  uint8_t codec = 0;
  int64_t label = -1;
  uint64_t checksum = 0;  // XXH3-64 of header bytes [0, 32) and the payload

  uint64_t pixel_bytes() const { return uint64_t{height} * width * channels; }

  // Set by CheckRecord: where the stored pixels are in the payload.
  uint32_t stored_at = 0, stored_len = 0;
};

// What every record of one entry may be, from the entry's key (RulesOf in
// entry_files.h): a header is checked against them before anything is
// sized from it, so a crafted header (any member of a group-shared root can
// write one, any export stream can carry one) cannot make a reader allocate
// or decode what no record of the entry holds. See docs/cache-format.md,
// "What a reader checks before allocating".
struct RecordRules {
  // Every record's codec (a RecordCodec): the entry's prepare spec's. A
  // raw entry never decodes.
  uint8_t codec = 0;
  // The image's channels; an image-less record (0 x 0 x 0) is always
  // allowed. 0: any channels and shape (an entry without a recorded
  // prepare spec, whose records are raw: nothing is sized from the shape
  // but what the record itself holds).
  uint8_t channels = 0;
  uint16_t height = 0, width = 0;  // both > 0: exactly this size
  // Otherwise: the shorter and the longer side at most these, and
  // height * width at most max_pixels.
  uint32_t max_short = 65535, max_long = 65535;
  uint64_t max_pixels = UINT64_MAX;
};
// "" when h (its shape and codec) obeys r, else what is wrong.
std::string CheckRules(const RecordHeader& h, const RecordRules& r);

// "" when stored bytes of a record of h's codec and shape can be its
// pixels, else what is wrong: a yuv420 record's are exactly its planes
// (checked before anything is decoded or sized from them); the other
// codecs' lengths are checked by their decoders.
std::string CheckStoredLength(const RecordHeader& h, uint64_t stored);

// Writes the 40 header bytes for payload into out (computes the checksum).
void EncodeRecordHeader(RecordHeader* h, const uint8_t* payload, char* out);
// Parses and checks a whole record (header + payload). Returns an empty
// string when intact, else what is wrong. The header must obey rules
// (checked first, before its lengths are used).
// The field section, when present, must parse (ParseFields) and hold
// num_fields fields.
std::string CheckRecord(const char* rec, size_t len, uint64_t want_id, const RecordRules& rules,
                        RecordHeader* h);
// The sample a record CheckRecord passed holds: its stored pixels and
// fields point into rec; so do its pixels for a raw record (null for
// another codec: DecodeSample gives them).
void SampleOf(const char* rec, const RecordHeader& h, CachedSample* out);
// Decodes out->stored (a SampleOf of a record of any codec) into dst, which
// holds out->bytes(), and points out->pixels there. A raw record's pixels
// are served where they are (dst unused). Corruption when the stored bytes
// do not decode to the record's shape.
Status DecodeSample(CachedSample* out, uint8_t* dst, PixelCodecScratch* scratch);

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
