// The field section of a cache record: a sample's fields other than its
// image and label, after the image's pixels in the record's payload. Its
// bytes are described in docs/cache-format.md ("Fields"); the record's
// checksum covers them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/sample.h"

namespace ssdfeed::cache_format {

// Most fields one record may hold, and most dimensions of one field.
constexpr size_t kMaxFields = 255;
constexpr size_t kMaxFieldDims = 32;

// The largest field a run-length stream may decode to: a record's payload
// limit (record_format.h), checked before anything is allocated for it.
constexpr uint64_t kMaxDecodedField = uint64_t{1} << 30;

// Appends the section for fields to *out. Fields with inconsistent sizes
// (data not product(shape) * itemsize) or too many are InvalidArgument.
// codecs (default: all raw): field i is stored as (*codecs)[i]; kRle only
// for a "|u1" mask or instance masks of at least one dimension.
Status EncodeFields(const std::vector<Field>& fields, std::string* out,
                    const std::vector<FieldCodec>* codecs = nullptr);

// How a prepared sample's fields are stored: run-length for each "|u1"
// mask and instance masks whose runs are fewer bytes than the mask, raw
// for the rest (so a noisy mask never grows).
std::vector<FieldCodec> PreparedCodecs(const std::vector<Field>& fields);

// Bytes of the section a prepared sample's record stores for fields (with
// PreparedCodecs): what sizes an entry.
size_t PreparedSectionSize(const std::vector<Field>& fields);

// Parses a section; views point into it. Returns an empty string when it is
// well formed, else what is wrong (every length is checked against the
// section's bounds, so a flipped byte can never read outside it; padding
// must be zero, so a section has exactly one encoding). Views hold no
// alignment: read their data with memcpy.
std::string ParseFields(std::string_view section, std::vector<FieldView>* out);

// ParseFields' checks without building views (no allocation: every read of
// a record with fields runs it). *count: the fields the section holds (0 for
// an empty section).
std::string CheckFields(std::string_view section, uint32_t* count);

// An owned copy of a view, its data raw (a run-length field decoded).
Field ToField(const FieldView& v);

// A view's elements: v's own bytes when raw, else decoded into *scratch.
std::string_view RawData(const FieldView& v, std::string* scratch);

}  // namespace ssdfeed::cache_format
