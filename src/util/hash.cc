#include "util/hash.h"

#include <xxhash.h>

#include <cstdio>

namespace ssdfeed {

Fingerprinter::Fingerprinter() : state_(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
Fingerprinter::~Fingerprinter() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Fingerprinter::Add(std::string_view s) {
  // Length-prefixed so ("ab","c") and ("a","bc") differ.
  uint64_t n = s.size();
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), &n, sizeof(n));
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), s.data(), s.size());
}

std::string Fingerprinter::HexDigest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

}  // namespace ssdfeed
