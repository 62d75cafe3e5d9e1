// Hashing helpers: XXH3-128 hex fingerprints and a keyed mixer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ssdfeed {

// Streams text into an XXH3-128 digest, printed as 32 hex characters.
class Fingerprinter {
 public:
  Fingerprinter();
  ~Fingerprinter();
  Fingerprinter(const Fingerprinter&) = delete;
  Fingerprinter& operator=(const Fingerprinter&) = delete;
  void Add(std::string_view s);
  std::string HexDigest() const;

 private:
  void* state_;
};

// splitmix64: a counter-based mixer for keyed randomness.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace ssdfeed
