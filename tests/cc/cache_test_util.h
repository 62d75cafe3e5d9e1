// Helpers for cache tests: deterministic fake prepared samples.
#pragma once

#include <string>
#include <vector>

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

}  // namespace ssdfeed::test
