// Shard modes of the epoch plan, and the loader serving one id range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using Ids = std::vector<uint64_t>;

Ids Shard(ShardMode m, int rank, uint64_t epoch, int ws = 4, uint64_t n = 103, int k = 1) {
  return EpochOrder(n, true, 7, epoch, rank, ws, false, m, k);
}

std::set<uint64_t> AsSet(const Ids& v) { return {v.begin(), v.end()}; }

TEST(StickyShards, DisjointCoveringAndTheSameSetEveryEpoch) {
  for (uint64_t epoch : {0, 1, 5}) {
    std::multiset<uint64_t> all;
    for (int r = 0; r < 4; ++r) {
      Ids o = Shard(ShardMode::kSticky, r, epoch);
      EXPECT_EQ(o.size(), 26u);  // ceil(103 / 4), padded as DistributedSampler
      all.insert(o.begin(), o.end());
      EXPECT_EQ(AsSet(o), AsSet(Shard(ShardMode::kSticky, r, 0))) << "rank " << r;
    }
    for (uint64_t id = 0; id < 103; ++id) EXPECT_GE(all.count(id), 1u) << id;
    EXPECT_EQ(all.size(), 104u);  // one padded repeat only
  }
}

TEST(StickyShards, OrderWithinTheShardChangesEveryEpoch) {
  EXPECT_NE(Shard(ShardMode::kSticky, 1, 0), Shard(ShardMode::kSticky, 1, 1));
  EXPECT_EQ(Shard(ShardMode::kSticky, 1, 3), Shard(ShardMode::kSticky, 1, 3));
}

TEST(StickyShards, ShardsAreNotContiguousIdRuns) {
  // Folder sources are class-sorted: a shard of consecutive ids would hold a
  // few classes only. The partition is a permutation of the seed.
  Ids o = Shard(ShardMode::kSticky, 0, 0, 2, 100);
  std::set<uint64_t> s = AsSet(o);
  size_t low = 0;
  for (uint64_t id : s) low += id < 50;
  EXPECT_GT(low, 10u);
  EXPECT_LT(low, 40u);
}

TEST(StickyShards, DropLastKeepsShardsDisjoint) {
  std::set<uint64_t> all;
  for (int r = 0; r < 4; ++r) {
    Ids o = EpochOrder(103, true, 7, 2, r, 4, true, ShardMode::kSticky);
    EXPECT_EQ(o.size(), 25u);
    for (uint64_t id : o) EXPECT_TRUE(all.insert(id).second) << id;
  }
}

TEST(StickyShards, UnshuffledShardsAreStrided) {
  EXPECT_EQ(EpochOrder(10, false, 0, 3, 1, 3, false, ShardMode::kSticky),
            (Ids{1, 4, 7, 0}));  // padded
}

TEST(RotateShards, ShardMovesToTheNextRankEveryKEpochs) {
  for (uint64_t e = 0; e < 12; ++e) {
    for (int r = 0; r < 4; ++r) {
      int owner = static_cast<int>((r + e / 3) % 4);
      EXPECT_EQ(AsSet(Shard(ShardMode::kRotate, r, e, 4, 103, 3)),
                AsSet(Shard(ShardMode::kSticky, owner, 0)))
          << "epoch " << e << " rank " << r;
    }
  }
}

TEST(GlobalShards, UnchangedByTheNewOverload) {
  EXPECT_EQ(EpochOrder(50, true, 2, 4, 1, 3, false),
            EpochOrder(50, true, 2, 4, 1, 3, false, ShardMode::kGlobal));
  // A global shard is a different set next epoch (what sticky avoids).
  EXPECT_NE(AsSet(Shard(ShardMode::kGlobal, 0, 0)), AsSet(Shard(ShardMode::kGlobal, 0, 1)));
}

struct Data {
  test::TempDir dir;
  std::string uri;
  Data() {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .format = "tfrecord",
                                 .count = 40,
                                 .classes = 4,
                                 .shard_size = 20,
                                 .min_side = 40,
                                 .max_side = 60});
  }
};

std::multiset<int64_t> LabelsOfEpoch(Loader* l, LoaderStats* stats) {
  std::multiset<int64_t> labels;
  Batch b;
  while (true) {
    auto r = l->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    labels.insert(b.labels(), b.labels() + b.size);
  }
  *stats = l->stats();
  return labels;
}

TEST(Loader, StickyRankHitsItsCacheEveryLaterEpoch) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  o.cache.root = d.dir.Sub("cache");
  o.batch_size = 4;
  o.shuffle = true;
  o.workers = 2;
  o.rank = 1;
  o.world_size = 2;
  o.shard = ShardMode::kSticky;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  LoaderStats s;
  LabelsOfEpoch(l->get(), &s);
  EXPECT_EQ(s.cache_misses, 20u);
  for (uint64_t e = 1; e < 4; ++e) {
    (*l)->SetEpoch(e);
    LabelsOfEpoch(l->get(), &s);
  }
  EXPECT_EQ(s.cache_misses, 20u) << "a sticky shard is prepared once";
  EXPECT_EQ(s.cache_hits, 60u);
}

TEST(Loader, ServesOnlyItsIdRange) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  o.cache.root = d.dir.Sub("cache");
  o.batch_size = 5;
  o.workers = 2;
  o.id_begin = 10;
  o.id_end = 25;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ((*l)->num_samples(), 15u);
  LoaderStats s;
  auto labels = LabelsOfEpoch(l->get(), &s);
  EXPECT_EQ(labels.size(), 15u);
  EXPECT_EQ(s.cache_misses, 15u);
  // The whole source afterwards: exactly the range is cached already.
  o.id_begin = o.id_end = 0;
  auto all = Loader::Open(o);
  LabelsOfEpoch(all->get(), &s);
  EXPECT_EQ(s.cache_hits, 15u);
  EXPECT_EQ(s.cache_misses, 25u);
}

TEST(CachedIdRanges, ReportsWhatIsCachedAndCreatesNothing) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  o.cache.root = d.dir.Sub("cache");
  o.workers = 2;
  auto none = CachedIdRanges(o);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_NE(access(o.cache.root.c_str(), F_OK), 0) << "a query must not create the root";
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  for (auto [b, e] : Ranges{{3, 9}, {20, 30}}) {
    o.id_begin = b;
    o.id_end = e;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    LoaderStats s;
    LabelsOfEpoch(l->get(), &s);
  }
  auto got = CachedIdRanges(o);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (Ranges{{3, 9}, {20, 30}}));
}

TEST(Loader, ResumeStateCarriesTheShardMode) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  o.world_size = 2;
  o.shard = ShardMode::kSticky;
  auto sticky = Loader::Open(o);
  ASSERT_TRUE(sticky.ok());
  LoaderState st = (*sticky)->state();
  EXPECT_EQ(st.shard, ShardMode::kSticky);
  o.shard = ShardMode::kGlobal;
  auto global = Loader::Open(o);
  EXPECT_FALSE((*global)->LoadState(st).ok()) << "a sticky state resumed a global loader";
  o.shard = ShardMode::kSticky;
  auto again = Loader::Open(o);
  EXPECT_TRUE((*again)->LoadState(st).ok());
}

TEST(Loader, RefusesAnIdRangeOutsideTheSource) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.id_begin = 30;
  o.id_end = 41;
  auto l = Loader::Open(o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("not within the 40 samples"), std::string::npos)
      << l.status().ToString();
  o.id_end = 20;
  EXPECT_FALSE(Loader::Open(o).ok());
  o.id_begin = 0;
  o.rotate_every = 0;
  EXPECT_FALSE(Loader::Open(o).ok());
}

// Elastic resume: ranks of one world stop at different positions of an
// epoch; a world of another size reads the rest.
struct Elastic {
  uint64_t n = 103;
  ShardMode mode = ShardMode::kGlobal;
  bool drop_last = false;
  Ids Plan(int rank, int ws, const ResumeLayers& layers) const {
    return ResumedEpochOrder(n, true, 7, 3, rank, ws, drop_last, mode, 2, layers);
  }
  // Ids read over every world of `layers` (to their positions) and then
  // the whole rest by a world of `final_ws`.
  std::multiset<uint64_t> Read(const ResumeLayers& layers, int final_ws) const {
    std::multiset<uint64_t> all;
    for (size_t d = 0; d <= layers.size(); ++d) {
      ResumeLayers before(layers.begin(), layers.begin() + static_cast<long>(d));
      int ws = d < layers.size() ? static_cast<int>(layers[d].size()) : final_ws;
      for (int r = 0; r < ws; ++r) {
        Ids p = Plan(r, ws, before);
        size_t upto = d < layers.size() ? std::min<size_t>(layers[d][r], p.size()) : p.size();
        all.insert(p.begin(), p.begin() + static_cast<long>(upto));
      }
    }
    return all;
  }
};

TEST(ElasticResume, EverySampleOnceOverOldAndNewRanks) {
  for (ShardMode m : {ShardMode::kGlobal, ShardMode::kSticky, ShardMode::kRotate}) {
    Elastic e;
    e.mode = m;
    for (auto [layers, ws] : std::vector<std::pair<ResumeLayers, int>>{
             {{{8, 4, 12, 0}}, 2},         // 4 -> 2, ranks at different batches
             {{{20, 8}}, 3},               // 2 -> 3
             {{{4, 16, 8}}, 4},            // 3 -> 4
             {{{8, 4, 12, 0}, {4, 8}}, 3}  // 4 -> 2 -> 3 within one epoch
         }) {
      std::multiset<uint64_t> all = e.Read(layers, ws);
      for (uint64_t id = 0; id < e.n; ++id) EXPECT_GE(all.count(id), 1u) << id;
      EXPECT_LE(all.size(), e.n + static_cast<uint64_t>(ws) - 1) << "only padding repeats";
      // Equal counts for the new ranks, as DistributedSampler deals them.
      for (int r = 1; r < ws; ++r)
        EXPECT_EQ(e.Plan(r, ws, layers).size(), e.Plan(0, ws, layers).size());
    }
  }
}

TEST(ElasticResume, DropLastNeverRepeats) {
  Elastic e;
  e.drop_last = true;
  std::multiset<uint64_t> all = e.Read({{8, 4, 12, 0}}, 3);
  for (uint64_t id = 0; id < e.n; ++id) EXPECT_LE(all.count(id), 1u) << id;
  EXPECT_GT(all.size(), e.n - 3) << "drop_last drops at most the uneven tail";
}

TEST(ElasticResume, StickyRanksReadTheirOwnShardFirst) {
  Elastic e;
  e.mode = ShardMode::kSticky;
  e.n = 104;                                // even shards, no padding
  Ids rest = e.Plan(1, 2, {{0, 0, 0, 0}});  // nothing consumed: the rest is everything
  EXPECT_EQ(AsSet(rest), AsSet(Shard(ShardMode::kSticky, 1, 0, 2, 104)));
}

TEST(ElasticResume, NoLayersIsTheUsualPlan) {
  Elastic e;
  EXPECT_EQ(e.Plan(1, 3, {}), EpochOrder(103, true, 7, 3, 1, 3, false));
}

LoaderState StateAt(int rank, int ws, uint64_t epoch, uint64_t batches) {
  LoaderState s;
  s.epoch = epoch;
  s.batches_consumed = batches;
  s.position = batches * 4;
  s.seed = 7;
  s.rank = rank;
  s.world_size = ws;
  s.num_samples = 40;
  s.batch_size = 4;
  return s;
}

TEST(MergeStates, RecordsEachRanksPositionAndTakesFinishedRanks) {
  auto m = MergeStates({StateAt(1, 3, 2, 3), StateAt(0, 3, 2, 1), StateAt(2, 3, 3, 0)});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->merged);
  EXPECT_EQ(m->epoch, 2u);
  ASSERT_EQ(m->resumed_from.size(), 1u);
  EXPECT_EQ(m->resumed_from[0][0], 4u);
  EXPECT_EQ(m->resumed_from[0][1], 12u);
  EXPECT_EQ(m->resumed_from[0][2], UINT64_MAX) << "rank 2 finished epoch 2";
}

TEST(MergeStates, RefusesIncompleteOrMixedStates) {
  EXPECT_FALSE(MergeStates({}).ok());
  EXPECT_FALSE(MergeStates({StateAt(0, 2, 0, 1)}).ok()) << "rank 1 missing";
  EXPECT_FALSE(MergeStates({StateAt(0, 2, 0, 1), StateAt(0, 2, 0, 1)}).ok());
  EXPECT_FALSE(MergeStates({StateAt(0, 2, 0, 1), StateAt(1, 2, 2, 1)}).ok()) << "epochs apart";
  LoaderState other = StateAt(1, 2, 0, 1);
  other.seed = 8;
  auto r = MergeStates({StateAt(0, 2, 0, 1), other});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("seed"), std::string::npos) << r.status().ToString();
}

TEST(Loader, MergedStateResumesTheRestOnAnotherWorldSize) {
  Data d;
  LoaderOptions o;
  o.source = d.uri;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 7;
  o.workers = 2;
  o.world_size = 2;
  std::vector<LoaderState> states;
  std::multiset<int64_t> labels;
  LoaderStats s;
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Batch b;
    for (int i = 0; i < 1 + 2 * r; ++i) {
      ASSERT_TRUE(*(*l)->Next(&b));
      labels.insert(b.labels(), b.labels() + b.size);
    }
    states.push_back((*l)->state());
  }
  auto merged = MergeStates(states);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  o.world_size = 3;
  size_t served = 0;
  for (int r = 0; r < 3; ++r) {
    o.rank = r;
    auto l = Loader::Open(o);
    ASSERT_TRUE((*l)->LoadState(*merged).ok());
    auto rest = LabelsOfEpoch(l->get(), &s);
    EXPECT_EQ((*l)->state().epoch, 1u);
    served += rest.size();
    labels.insert(rest.begin(), rest.end());
  }
  EXPECT_EQ(served, 24u) << "16 of 40 read before, the rest over 3 ranks";
  // Labels repeat over samples, so compare with one whole epoch's counts.
  o.world_size = 1;
  o.rank = 0;
  auto whole = Loader::Open(o);
  EXPECT_EQ(labels, LabelsOfEpoch(whole->get(), &s));
}

}  // namespace
}  // namespace ssdfeed
