// Helpers for cache tests: deterministic fake prepared samples.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cache/field_section.h"
#include "cache/record_format.h"
#include "image/pixel_codec.h"
#include "ssdfeed/cache.h"

namespace ssdfeed::test {

// Pixels of fake prepared sample id (shape varies with id).
inline std::vector<uint8_t> FakePixels(uint64_t id, int* h, int* w) {
  *h = 8 + static_cast<int>(id % 5);
  *w = 10 + static_cast<int>(id % 3);
  std::vector<uint8_t> p(static_cast<size_t>(*h) * *w * 3);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(id * 31 + i * 7);
  return p;
}

inline EntryKey FakeKey(uint64_t n, const std::string& tag = "a") {
  EntryKey k;
  k.source_uri = "test:" + tag;
  k.source_identity = "identity-" + tag;
  k.spec = "spec";
  k.samples_total = n;
  return k;
}

// FakeKey's entry as a loader makes it: its prepare spec recorded (spec
// and prepare_json), so its records must be of the spec's codec and shape
// (RulesOf). The default spec (no resize) takes every FakePixels size.
inline EntryKey SpecKey(uint64_t n, const PrepareSpec& spec, const std::string& tag = "a") {
  EntryKey k = FakeKey(n, tag);
  k.spec = spec.Canonical();
  k.prepare_json = spec.ToJson();
  return k;
}
inline EntryKey CodecKey(uint64_t n, RecordCodec codec, const std::string& tag = "a") {
  PrepareSpec spec;
  spec.codec = codec;
  return SpecKey(n, spec, tag);
}

// A zstd frame of n zero bytes as RFC 8878 allows one: its size declared,
// its content checksum, and RLE blocks of 128 KiB in 4 bytes each. A few
// KiB claim gigabytes: what a crafted record carries.
inline std::string ZeroFrame(uint64_t n) {
  std::string f("\x28\xb5\x2f\xfd", 4);  // magic
  f += static_cast<char>(0xE4);          // 8-byte content size, single segment, checksum
  for (int i = 0; i < 8; ++i) f += static_cast<char>((n >> (8 * i)) & 0xff);
  static const std::vector<char> zeros(128 << 10, 0);
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  for (uint64_t left = n; left > 0;) {
    uint32_t b = static_cast<uint32_t>(std::min<uint64_t>(left, zeros.size()));
    left -= b;
    uint32_t hdr = (left == 0 ? 1u : 0u) | (1u << 1) | (b << 3);  // last?, RLE, size
    for (int i = 0; i < 3; ++i) f += static_cast<char>((hdr >> (8 * i)) & 0xff);
    f += '\0';
    XXH64_update(st, zeros.data(), b);
  }
  uint32_t sum = static_cast<uint32_t>(XXH64_digest(st));
  XXH64_freeState(st);
  for (int i = 0; i < 4; ++i) f += static_cast<char>((sum >> (8 * i)) & 0xff);
  return f;
}

// A record of sample id as a writer would never make it but a member of a
// group-shared root can: any codec byte and shape over `stored` (the
// pixels for raw; the stored bytes, after their u32 length, otherwise),
// with a checksum that matches.
inline std::string CraftedRecord(uint64_t id, uint8_t codec, int h, int w, int c,
                                 const std::string& stored) {
  std::string payload;
  if (codec != 0) {
    uint32_t n = static_cast<uint32_t>(stored.size());
    payload.assign(reinterpret_cast<const char*>(&n), 4);
  }
  payload += stored;
  cache_format::RecordHeader hdr;
  hdr.payload_len = static_cast<uint32_t>(payload.size());
  hdr.sample_id = id;
  hdr.height = static_cast<uint16_t>(h);
  hdr.width = static_cast<uint16_t>(w);
  hdr.channels = static_cast<uint8_t>(c);
  hdr.codec = codec;
  std::string rec(cache_format::kRecordHeaderSize, '\0');
  cache_format::EncodeRecordHeader(&hdr, reinterpret_cast<const uint8_t*>(payload.data()),
                                   rec.data());
  return rec + payload;
}

// Writes records (CraftedRecord's) into entry dir as a segment of writer
// slot 200 with their index entries, stamped to win over what the entry
// holds for the same ids: what every reader then finds.
inline void PlantRecords(const std::string& dir, const std::vector<std::string>& records) {
  std::string dat, idx;
  for (const std::string& rec : records) {
    cache_format::RecordHeader h;
    std::memcpy(&h.sample_id, rec.data() + 8, 8);
    std::memcpy(&h.height, rec.data() + 16, 2);
    std::memcpy(&h.width, rec.data() + 18, 2);
    cache_format::IndexEntry e{h.sample_id,       dat.size(), static_cast<uint32_t>(rec.size()),
                               h.height,          h.width,    static_cast<uint8_t>(rec[20]),
                               uint64_t{1} << 40, 0};
    char ie[cache_format::kIndexEntrySize];
    cache_format::EncodeIndexEntry(e, ie);
    idx.append(ie, sizeof ie);
    dat += rec;
  }
  std::ofstream(dir + "/seg-200-0000.dat", std::ios::binary) << dat;
  std::ofstream(dir + "/seg-200-0000.idx", std::ios::binary) << idx;
}

inline Status PutFake(CacheEntry* e, uint64_t id) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  return e->Put(id, static_cast<int64_t>(id % 7), p.data(), h, w, 3);
}

// True when sample id reads back intact: h x w x 3 pixels equal to p, with
// its label.
inline bool ReadsBackAs(CacheEntry* e, uint64_t id, const std::vector<uint8_t>& p, int h, int w,
                        int64_t label, Status* st = nullptr) {
  std::string buf;
  CachedSample s;
  Status r = e->Get(id, &buf, &s);
  if (st) *st = r;
  if (!r.ok()) return false;
  return s.height == h && s.width == w && s.channels == 3 && s.label == label &&
         std::equal(p.begin(), p.end(), s.pixels);
}

// True when sample id reads back intact and equal to FakePixels(id).
inline bool ReadsBackFake(CacheEntry* e, uint64_t id, Status* st = nullptr) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  return ReadsBackAs(e, id, p, h, w, static_cast<int64_t>(id % 7), st);
}

// The field section of fake sample id: a mask as large as its image, K
// boxes with their classes (K varies with id, 0 included) and raw bytes.
inline std::string FakeFields(uint64_t id) {
  int h, w;
  FakePixels(id, &h, &w);
  std::vector<Field> f(4);
  f[0] = {"mask", FieldKind::kMask, "|u1", {uint64_t(h), uint64_t(w)}, {}};
  for (int i = 0; i < h * w; ++i) f[0].data.push_back(static_cast<char>((id + i) % 21));
  uint64_t k = id % 3;
  f[1] = {"boxes", FieldKind::kBoxes, "<f4", {k, 4}, std::string(k * 16, '\0')};
  for (uint64_t i = 0; i < k * 4; ++i) {
    float v = static_cast<float>(id) + 0.25f * static_cast<float>(i);
    std::memcpy(f[1].data.data() + 4 * i, &v, 4);
  }
  f[2] = {"classes", FieldKind::kClasses, "<i8", {k}, std::string(k * 8, '\0')};
  for (uint64_t i = 0; i < k; ++i) {
    int64_t c = static_cast<int64_t>(id * 3 + i);
    std::memcpy(f[2].data.data() + 8 * i, &c, 8);
  }
  std::string meta = "{\"id\": " + std::to_string(id) + "}";
  f[3] = {"meta", FieldKind::kBytes, "|u1", {meta.size()}, meta};
  std::string sec;
  if (!cache_format::EncodeFields(f, &sec).ok()) std::abort();
  return sec;
}

// Fake sample id's record as Put takes it: pixels p (h x w x 3), its label
// and the field section given (views: p and fields must outlive it).
inline CachedSample FakeSample(uint64_t id, const std::vector<uint8_t>& p, int h, int w,
                               std::string_view fields) {
  CachedSample s;
  s.pixels = p.data();
  s.height = h;
  s.width = w;
  s.channels = 3;
  s.label = static_cast<int64_t>(id % 7);
  s.fields = fields;
  return s;
}

// Puts fake sample id with its pixels, label and FakeFields.
inline Status PutFakeWithFields(CacheEntry* e, uint64_t id) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  std::string fields = FakeFields(id);
  return e->Put(id, FakeSample(id, p, h, w, fields));
}

// True when s is fake sample id with its fields, byte for byte.
inline bool SameAsFakeWithFields(uint64_t id, const CachedSample& s) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  return s.height == h && s.width == w && s.channels == 3 && s.label == int64_t(id % 7) &&
         std::equal(p.begin(), p.end(), s.pixels) && s.fields == FakeFields(id);
}

inline bool ReadsBackFakeWithFields(CacheEntry* e, uint64_t id, Status* st = nullptr) {
  std::string buf;
  CachedSample s;
  Status r = e->Get(id, &buf, &s);
  if (st) *st = r;
  return r.ok() && SameAsFakeWithFields(id, s);
}

// Puts fake sample id stored with codec (and FakeFields when fields). The
// pixels its reads must serve go to *served (for jpeg: the decode of what
// was stored) when given.
inline Status PutFakeCoded(CacheEntry* e, uint64_t id, RecordCodec codec, bool fields = false,
                           std::vector<uint8_t>* served = nullptr) {
  int h, w;
  auto p = FakePixels(id, &h, &w);
  PixelCodecScratch scratch;
  std::string stored, section = fields ? FakeFields(id) : std::string();
  SSDFEED_RETURN_IF_ERROR(EncodePixels(codec, 90, p.data(), h, w, 3, &stored, &scratch));
  if (served != nullptr) {
    served->resize(p.size());
    SSDFEED_RETURN_IF_ERROR(DecodePixels(codec, stored, h, w, 3, served->data(), &scratch));
  }
  CachedSample s = FakeSample(id, p, h, w, section);
  s.codec = codec;
  s.stored = stored;
  return e->Put(id, s);
}

// Flips a byte in the middle of the stored pixels of a record of a codec
// other than raw, then writes its checksum again: a record only decoding
// can tell is damaged.
inline void DamageStoredBytes(char* rec) {
  uint32_t payload, stored;
  std::memcpy(&payload, rec + 4, 4);
  std::memcpy(&stored, rec + cache_format::kRecordHeaderSize, 4);
  rec[cache_format::kRecordHeaderSize + 4 + stored / 2] ^= 0x21;
  cache_format::RecordHeader h;
  h.payload_len = payload;
  std::memcpy(&h.sample_id, rec + 8, 8);
  std::memcpy(&h.height, rec + 16, 2);
  std::memcpy(&h.width, rec + 18, 2);
  h.channels = static_cast<uint8_t>(rec[20]);
  h.num_fields = static_cast<uint8_t>(rec[21]);
  h.codec = static_cast<uint8_t>(rec[22]);
  std::memcpy(&h.label, rec + 24, 8);
  cache_format::EncodeRecordHeader(
      &h, reinterpret_cast<const uint8_t*>(rec + cache_format::kRecordHeaderSize), rec);
}

}  // namespace ssdfeed::test
