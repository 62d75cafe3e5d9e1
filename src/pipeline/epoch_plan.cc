// Which ids a rank reads in an epoch.
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <random>

#include "ssdfeed/loader.h"
#include "util/hash.h"

namespace ssdfeed {

namespace {

// Fisher-Yates with our own bounded draws: std::shuffle's use of the engine
// is implementation-defined, and orders must match everywhere.
void Permute(std::vector<uint64_t>* v, uint64_t key) {
  std::mt19937_64 rng(key);
  for (uint64_t i = v->size(); i > 1; --i) {
    uint64_t j = rng() % i;
    std::swap((*v)[i - 1], (*v)[j]);
  }
}

uint64_t EpochKey(uint64_t seed, uint64_t epoch) { return Mix64(seed ^ Mix64(epoch + 0x5eed)); }

// Truncates (drop_last) or pads by repeating from the start, as torch's
// DistributedSampler does, to a multiple of ws; then deals position i to
// shard i % ws and returns shard `shard`.
std::vector<uint64_t> Deal(std::vector<uint64_t> perm, uint64_t ws, uint64_t shard,
                           bool drop_last) {
  uint64_t n = perm.size();
  uint64_t per = drop_last ? n / ws : (n + ws - 1) / ws;
  uint64_t total = per * ws;
  if (total < n) perm.resize(total);
  for (uint64_t i = n; perm.size() < total; ++i) perm.push_back(perm[(i - n) % n]);
  std::vector<uint64_t> out;
  out.reserve(per);
  for (uint64_t i = shard; i < total; i += ws) out.push_back(perm[i]);
  return out;
}

}  // namespace

std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last) {
  return EpochOrder(n, shuffle, seed, epoch, rank, world_size, drop_last, ShardMode::kGlobal);
}

std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last, ShardMode shard,
                                 int rotate_every) {
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t ws = static_cast<uint64_t>(std::max(1, world_size));
  uint64_t r = static_cast<uint64_t>(rank);
  if (shard == ShardMode::kGlobal) {
    if (shuffle) Permute(&perm, EpochKey(seed, epoch));
    return Deal(std::move(perm), ws, r, drop_last);
  }
  // The partition depends on the seed only, so shards stay put across
  // epochs; permuting before dealing keeps class-sorted sources (folders)
  // balanced over shards.
  if (shuffle) Permute(&perm, Mix64(seed ^ 0x57c4f5a4d5ull));
  uint64_t k = static_cast<uint64_t>(std::max(1, rotate_every));
  uint64_t s = shard == ShardMode::kRotate ? (r + epoch / k) % ws : r;
  std::vector<uint64_t> out = Deal(std::move(perm), ws, s, drop_last);
  if (shuffle) Permute(&out, EpochKey(seed, epoch) ^ Mix64(s + 1));
  return out;
}

std::vector<uint64_t> SplitIds(uint64_t begin, uint64_t end, double validation_split, uint64_t seed,
                               bool validation) {
  std::vector<uint64_t> ids(end - begin);
  std::iota(ids.begin(), ids.end(), begin);
  // Folder ids are sorted by class: a random split keeps every class in
  // both parts, where a range split would not.
  Permute(&ids, Mix64(seed ^ 0x5b117a11dull));
  auto nval = static_cast<uint64_t>(validation_split * static_cast<double>(ids.size()));
  nval = std::min<uint64_t>(nval, ids.size());
  if (validation)
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(nval));
  else
    ids.resize(ids.size() - nval);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace ssdfeed
