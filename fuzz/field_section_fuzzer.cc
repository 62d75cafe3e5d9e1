// The record's field section (format version 3) and a record carrying it:
// never a crash or a read outside the bytes given; a section that parses
// has views inside it, run-length masks that decode to their shape, and
// encodes back to the very same bytes; CheckRecord
// accepts a well-checksummed record exactly when its section parses with
// the header's count; Put refuses a bad section, and stores a good one that
// Get gives back byte for byte.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/field_section.h"
#include "cache/record_format.h"
#include "ssdfeed/cache.h"

namespace {

using namespace ssdfeed;
namespace cf = cache_format;

// Checks views lie inside the section, that a run-length field decodes to
// exactly its shape's bytes, and that re-encoding (each field with the codec
// it was read with) gives the section's bytes.
void CheckParsed(std::string_view section, const std::vector<FieldView>& views) {
  std::vector<Field> fields;
  std::vector<FieldCodec> codecs;
  for (const FieldView& v : views) {
    const char* p = reinterpret_cast<const char*>(v.data);
    if (p < section.data() || v.size > section.size() ||
        p - section.data() > static_cast<std::ptrdiff_t>(section.size() - v.size))
      __builtin_trap();  // a view outside the section
    fields.push_back(cf::ToField(v));
    codecs.push_back(v.codec);
    uint64_t want = DTypeItemSize(v.dtype);
    for (uint64_t d : v.shape) want *= d;
    if (fields.back().data.size() != want) __builtin_trap();  // runs that miss their shape
  }
  std::string again;
  if (!cf::EncodeFields(fields, &again, &codecs).ok() || (!section.empty() && again != section))
    __builtin_trap();  // a section parsed that is not the encoding of its fields
}

// The record a writer would make of 1x1x1 pixel + section; its verdict must
// be the section's.
void CheckAsRecord(std::string_view section, bool parses, uint32_t count, uint8_t num_fields) {
  std::string payload = "\x7f" + std::string(section);
  cf::RecordHeader h;
  h.payload_len = static_cast<uint32_t>(payload.size());
  h.sample_id = 3;
  h.height = h.width = h.channels = 1;
  h.num_fields = num_fields;
  std::string rec(cf::kRecordHeaderSize, '\0');
  cf::EncodeRecordHeader(&h, reinterpret_cast<const uint8_t*>(payload.data()), rec.data());
  rec += payload;
  cf::RecordHeader out;
  bool ok = cf::CheckRecord(rec.data(), rec.size(), 3, {}, &out).empty();
  bool want = num_fields == 0 ? section.empty() : parses && count == num_fields;
  if (ok != want) __builtin_trap();
  if (ok) {
    CachedSample s;
    cf::SampleOf(rec.data(), out, &s);
    if (s.fields != section) __builtin_trap();
  }
}

// Put and Get through a real entry, made again every 256 puts so that a
// long run does not fill the disk with sample 0's records.
std::unique_ptr<CacheEntry> OpenEntry() {
  static const std::string root = "/tmp/ssdfeed-fields-fuzz-" + std::to_string(getpid());
  std::filesystem::remove_all(root);
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.reserve_chunk = 1 << 20;
  EntryKey key;
  key.source_uri = key.source_identity = key.spec = "fields-fuzz";
  key.samples_total = 1;
  auto e = CacheEntry::Open(o, key);
  if (!e.ok()) __builtin_trap();
  return std::move(*e);
}

void CheckThroughEntry(std::string_view section, bool parses, uint32_t count) {
  static std::unique_ptr<CacheEntry> entry;
  static int puts = 0;
  if (puts++ % 256 == 0) {
    entry.reset();
    entry = OpenEntry();
  }
  const uint8_t pixel = 0x7f;
  CachedSample s;
  s.pixels = &pixel;
  s.height = s.width = s.channels = 1;
  s.fields = section;
  Status put = entry->Put(0, s);
  if (put.ok() != parses) __builtin_trap();
  if (!put.ok()) return;
  std::string buf;
  CachedSample got;
  if (!entry->Get(0, &buf, &got).ok()) __builtin_trap();
  if (got.fields != (count > 0 ? section : std::string_view())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the header's field count; the rest is the section.
  uint8_t num_fields = data[0];
  std::string_view section(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<FieldView> views;
  bool parses = cf::ParseFields(section, &views).empty();
  uint32_t count = 0;
  if (cf::CheckFields(section, &count).empty() != parses) __builtin_trap();
  if (parses && (count != views.size())) __builtin_trap();
  if (parses) CheckParsed(section, views);
  CheckAsRecord(section, parses, count, num_fields);
  // Entry I/O is slow: a quarter of the inputs.
  if ((num_fields & 3) == 0) CheckThroughEntry(section, parses, count);
  return 0;
}
