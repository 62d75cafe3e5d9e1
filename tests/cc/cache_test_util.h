// Helpers for cache tests: deterministic fake prepared samples.
#pragma once

#include <cstdlib>
#include <cstring>
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
