// Cache record and index-entry parsing, and a whole entry opened over
// arbitrary segment/index bytes: never a crash, never an unchecked record,
// never a record of another codec or shape than its entry's rules allow
// (so never a decode sized by a crafted header: fuzz/corpus/cache holds
// zstd records claiming 12 MiB in a few hundred bytes).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/record_format.h"
#include "image/pixel_codec.h"
#include "ssdfeed/cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  namespace cf = cache_format;
  const char* p = reinterpret_cast<const char*>(data);
  cf::RecordHeader h;
  // A raw entry's rules, and a zstd entry's of 16 x 16 RGB images: what a
  // record passes obeys them, and decoding it fits the rules' bound.
  cf::RecordRules zstd16;
  zstd16.codec = static_cast<uint8_t>(RecordCodec::kZstd);
  zstd16.channels = 3;
  zstd16.height = zstd16.width = 16;
  // A yuv420 entry's of the same images: a record that passes holds
  // exactly their planes.
  cf::RecordRules yuv16 = zstd16;
  yuv16.codec = static_cast<uint8_t>(RecordCodec::kYuv420);
  for (const cf::RecordRules& rules : {cf::RecordRules{}, zstd16, yuv16}) {
    if (!cf::CheckRecord(p, size, size > 8 ? data[8] : 0, rules, &h).empty()) continue;
    if (!cf::CheckRules(h, rules).empty() || h.codec != rules.codec) __builtin_trap();
    if (h.codec == 0) continue;
    if (h.codec == yuv16.codec && h.pixel_bytes() > 0 && h.stored_len != 16 * 16 + 2 * 8 * 8)
      __builtin_trap();  // yuv420 bytes other than the planes passed
    if (h.pixel_bytes() > 16 * 16 * 3) __builtin_trap();  // a decode sized past the rules
    static PixelCodecScratch scratch;
    uint8_t pixels[16 * 16 * 3];
    CachedSample s;
    cf::SampleOf(p, h, &s);
    (void)cf::DecodeSample(&s, pixels, &scratch);
  }
  for (size_t off = 0; off + cf::kIndexEntrySize <= size; off += cf::kIndexEntrySize) {
    cf::IndexEntry e;
    (void)cf::DecodeIndexEntry(p + off, &e);
  }
  // Split the input into an .idx and a .dat of one writer and open the entry.
  static std::string root = "/tmp/ssdfeed-cache-fuzz-" + std::to_string(getpid());
  EntryKey key;
  key.source_uri = key.source_identity = key.spec = "fuzz";
  key.samples_total = 64;
  std::string dir = root + "/entries/" + key.fingerprint();
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(dir);
  size_t split = size ? data[0] * cf::kIndexEntrySize % (size + 1) : 0;
  std::ofstream(dir + "/seg-fuzz-0000.idx", std::ios::binary).write(p, static_cast<long>(split));
  std::ofstream(dir + "/seg-fuzz-0000.dat", std::ios::binary)
      .write(p + split, static_cast<long>(size - split));
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1 << 20;
  auto entry = CacheEntry::Open(o, key);
  if (entry.ok()) {
    std::string buf;
    for (uint64_t id = 0; id < 64; ++id) {
      CachedSample s;
      if (!(*entry)->Get(id, &buf, &s).ok()) continue;
      // The key records no prepare spec: raw records only (RulesOf).
      if (s.codec != RecordCodec::kRaw) __builtin_trap();
      // Pixels then fields fill the record after its header, exactly.
      if (s.bytes() + s.fields.size() + cf::kRecordHeaderSize != buf.size() ||
          s.fields.data() != buf.data() + cf::kRecordHeaderSize + s.bytes())
        __builtin_trap();  // a record passed its checks with the wrong size
    }
  }
  return 0;
}
