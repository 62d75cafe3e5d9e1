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
std::vector<uint64_t> Deal(const std::vector<uint64_t>& perm, uint64_t ws, uint64_t shard,
                           bool drop_last) {
  uint64_t n = perm.size();
  uint64_t per = drop_last ? n / ws : (n + ws - 1) / ws;
  std::vector<uint64_t> out;
  out.reserve(per);
  for (uint64_t i = shard; i < per * ws; i += ws) out.push_back(perm[i < n ? i : (i - n) % n]);
  return out;
}

struct PlanArgs {
  uint64_t n;
  bool shuffle;
  uint64_t seed, epoch;
  bool drop_last;
  ShardMode shard;
  int rotate_every;
};

// The order dealt over ranks: the epoch's permutation (global), or the
// seed's partition order (sticky, rotate), which depends on the seed only
// so shards stay put across epochs; permuting before dealing keeps
// class-sorted sources (folders) balanced over shards.
std::vector<uint64_t> BaseOrder(const PlanArgs& a) {
  std::vector<uint64_t> perm(a.n);
  std::iota(perm.begin(), perm.end(), 0);
  if (!a.shuffle) return perm;
  Permute(&perm, a.shard == ShardMode::kGlobal ? EpochKey(a.seed, a.epoch)
                                               : Mix64(a.seed ^ 0x57c4f5a4d5ull));
  return perm;
}

// The sticky shard rank r reads this epoch.
uint64_t ShardOf(const PlanArgs& a, uint64_t r, uint64_t ws) {
  uint64_t k = static_cast<uint64_t>(std::max(1, a.rotate_every));
  return a.shard == ShardMode::kRotate ? (r + a.epoch / k) % ws : r;
}

std::vector<uint64_t> RankPlan(const PlanArgs& a, const std::vector<uint64_t>& base, uint64_t r,
                               uint64_t ws) {
  if (a.shard == ShardMode::kGlobal) return Deal(base, ws, r, a.drop_last);
  uint64_t s = ShardOf(a, r, ws);
  std::vector<uint64_t> out = Deal(base, ws, s, a.drop_last);
  if (a.shuffle) Permute(&out, EpochKey(a.seed, a.epoch) ^ Mix64(s + 1));
  return out;
}

// Under sticky and rotate, the rank of world ws whose shard holds each id
// this epoch (a padded repeat counts for its first shard).
std::vector<uint64_t> Owners(const PlanArgs& a, uint64_t ws) {
  std::vector<uint64_t> part = BaseOrder(a), owner(a.n);
  uint64_t k = static_cast<uint64_t>(std::max(1, a.rotate_every));
  uint64_t turn = a.shard == ShardMode::kRotate ? (a.epoch / k) % ws : 0;
  for (uint64_t i = 0; i < a.n; ++i) owner[part[i]] = (i % ws + ws - turn) % ws;
  return owner;
}

// Deals the rest of an epoch over ws ranks in equal counts. Under sticky
// and rotate each rank first takes the rest of its own shard (what its node
// caches) and the surplus fills the ranks that are short. Padding repeats
// the rest's first ids (at most ws - 1); drop_last drops the uneven tail.
std::vector<std::vector<uint64_t>> DealRest(const PlanArgs& a, const std::vector<uint64_t>& rest,
                                            uint64_t ws) {
  std::vector<std::vector<uint64_t>> plans(ws);
  if (a.shard == ShardMode::kGlobal) {
    for (uint64_t r = 0; r < ws; ++r) plans[r] = Deal(rest, ws, r, a.drop_last);
    return plans;
  }
  uint64_t n = rest.size(), per = a.drop_last ? n / ws : (n + ws - 1) / ws;
  std::vector<uint64_t> owner = Owners(a, ws), spill;
  for (uint64_t id : rest) {
    auto& mine = plans[owner[id]];
    (mine.size() < per ? mine : spill).push_back(id);
  }
  uint64_t next = 0, pad = 0;
  for (auto& mine : plans) {
    while (mine.size() < per && next < spill.size()) mine.push_back(spill[next++]);
    while (mine.size() < per) mine.push_back(rest[pad++ % n]);
  }
  return plans;
}

// Every rank's plan of the epoch in a world of ws ranks, after the
// consumption `layers` records (each layer's plans follow from the ones
// before it).
std::vector<std::vector<uint64_t>> AllPlans(const PlanArgs& a, const ResumeLayers& layers,
                                            uint64_t ws) {
  std::vector<uint64_t> base = BaseOrder(a);
  auto first = [&](uint64_t w) {
    std::vector<std::vector<uint64_t>> plans(w);
    for (uint64_t r = 0; r < w; ++r) plans[r] = RankPlan(a, base, r, w);
    return plans;
  };
  if (layers.empty()) return first(ws);
  PlanArgs global = a;
  global.shard = ShardMode::kGlobal;  // the rest keeps the epoch's global order
  std::vector<uint64_t> order = BaseOrder(global);
  std::vector<bool> consumed(a.n, false);
  auto rest = [&] {
    std::vector<uint64_t> out;
    for (uint64_t id : order)
      if (!consumed[id]) out.push_back(id);
    return out;
  };
  for (size_t d = 0; d < layers.size(); ++d) {
    const std::vector<uint64_t>& pos = layers[d];
    if (pos.empty()) continue;  // no world of zero ranks
    auto plans = d == 0 ? first(pos.size()) : DealRest(a, rest(), pos.size());
    for (size_t r = 0; r < pos.size(); ++r) {
      uint64_t upto = std::min<uint64_t>(pos[r], plans[r].size());
      for (uint64_t k = 0; k < upto; ++k) consumed[plans[r][k]] = true;
    }
  }
  return DealRest(a, rest(), ws);
}

}  // namespace

std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last) {
  return EpochOrder(n, shuffle, seed, epoch, rank, world_size, drop_last, ShardMode::kGlobal);
}

std::vector<uint64_t> EpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank,
                                 int world_size, bool drop_last, ShardMode shard,
                                 int rotate_every) {
  PlanArgs a{n, shuffle, seed, epoch, drop_last, shard, rotate_every};
  uint64_t ws = static_cast<uint64_t>(std::max(1, world_size));
  return RankPlan(a, BaseOrder(a), static_cast<uint64_t>(rank), ws);
}

std::vector<uint64_t> ResumedEpochOrder(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch,
                                        int rank, int world_size, bool drop_last, ShardMode shard,
                                        int rotate_every, const ResumeLayers& layers) {
  PlanArgs a{n, shuffle, seed, epoch, drop_last, shard, rotate_every};
  uint64_t ws = static_cast<uint64_t>(std::max(1, world_size));
  return AllPlans(a, layers, ws)[static_cast<uint64_t>(rank)];
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
