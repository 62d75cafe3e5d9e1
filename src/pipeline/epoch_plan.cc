// Which ids a rank reads in an epoch.
#include <algorithm>
#include <numeric>
#include <random>

#include "ssdfeed/loader.h"
#include "util/hash.h"

namespace ssdfeed {

std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last) {
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(Mix64(seed ^ Mix64(epoch + 0x5eed)));
    // Fisher-Yates with our own bounded draws: std::shuffle's use of the
    // engine is implementation-defined, and orders must match everywhere.
    for (uint64_t i = n; i > 1; --i) {
      uint64_t j = rng() % i;
      std::swap(perm[i - 1], perm[j]);
    }
  }
  uint64_t ws = static_cast<uint64_t>(std::max(1, world_size));
  uint64_t per = drop_last ? n / ws : (n + ws - 1) / ws;
  uint64_t total = per * ws;
  if (total < n) perm.resize(total);
  // Pad by repeating from the start, as torch's DistributedSampler does.
  for (uint64_t i = n; perm.size() < total; ++i) perm.push_back(perm[(i - n) % n]);
  std::vector<uint64_t> out;
  out.reserve(per);
  for (uint64_t i = static_cast<uint64_t>(rank); i < total; i += ws) out.push_back(perm[i]);
  return out;
}

}  // namespace ssdfeed
