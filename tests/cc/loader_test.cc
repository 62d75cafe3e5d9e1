#include "ssdfeed/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "cache_test_util.h"
#include "pipeline/entry_key.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

TEST(EpochOrder, DistributedSamplerSemantics) {
  for (bool drop : {false, true}) {
    std::multiset<uint64_t> all;
    size_t per = 0;
    for (int r = 0; r < 3; ++r) {
      auto o = EpochOrder(10, true, 5, 2, r, 3, drop);
      if (r == 0) per = o.size();
      EXPECT_EQ(o.size(), per);
      all.insert(o.begin(), o.end());
    }
    EXPECT_EQ(per, drop ? 3u : 4u);
    for (uint64_t id = 0; id < 10; ++id) {
      if (drop)
        EXPECT_LE(all.count(id), 1u);
      else
        EXPECT_GE(all.count(id), 1u);  // every sample at least once, 2 padded
    }
    EXPECT_EQ(all.size(), drop ? 9u : 12u);
  }
  EXPECT_EQ(EpochOrder(100, true, 1, 0, 0, 1, false), EpochOrder(100, true, 1, 0, 0, 1, false));
  EXPECT_NE(EpochOrder(100, true, 1, 0, 0, 1, false), EpochOrder(100, true, 1, 1, 0, 1, false));
  auto plain = EpochOrder(5, false, 1, 0, 0, 1, false);
  EXPECT_EQ(plain, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

struct Data {
  test::TempDir dir;
  std::string uri;
  explicit Data(size_t n = 60, double corrupt = 0) {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .format = "tfrecord",
                                 .count = n,
                                 .classes = 5,
                                 .corrupt = corrupt,
                                 .shard_size = 25,
                                 .min_side = 60,
                                 .max_side = 100});
  }
  LoaderOptions Opts() const {
    LoaderOptions o;
    o.source = uri;
    o.prepare.resize_short = 48;
    o.augment.enabled = true;
    o.augment.height = o.augment.width = 32;
    o.batch_size = 8;
    o.shuffle = true;
    o.seed = 3;
    o.workers = 2;
    return o;
  }
};

std::vector<std::string> Epoch(Loader* l, size_t* samples = nullptr) {
  std::vector<std::string> out;
  Batch b;
  size_t n = 0;
  while (true) {
    auto r = l->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    size_t bytes = b.shape[0] * b.shape[1] * b.shape[2] * b.shape[3];
    if (b.dtype != DType::kUint8) bytes *= b.dtype == DType::kFloat32 ? 4 : 2;
    out.push_back(std::string(static_cast<const char*>(b.images()), bytes) +
                  std::string(reinterpret_cast<const char*>(b.labels()), b.size * 8));
    n += b.size;
  }
  if (samples) *samples = n;
  return out;
}

// A source that counts its reads as a bucket's does (Source::traffic), over
// an opened one: what loaders sharing it must not count twice.
class CountingSource final : public Source {
 public:
  explicit CountingSource(std::unique_ptr<Source> inner) : inner_(std::move(inner)) {}
  size_t size() const override { return inner_->size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    Status s = inner_->Read(id, out);
    bytes_ += out->bytes.size();
    ++requests_;
    return s;
  }
  std::string Describe(size_t id) const override { return inner_->Describe(id); }
  const std::string& identity() const override { return inner_->identity(); }
  const std::string& uri() const override { return inner_->uri(); }
  OriginTraffic traffic() const override { return {bytes_.load(), requests_.load()}; }

 private:
  std::unique_ptr<Source> inner_;
  mutable std::atomic<uint64_t> bytes_{0}, requests_{0};
};

TEST(Loader, LoadersSharingASourceCountOnlyTheirOwnOriginReads) {
  // ssdfeed.ray keeps one source per worker process for the loaders of its
  // read tasks; each loader's origin counters must say what it read, not
  // what the source read for the loaders before it.
  Data d;
  auto opened = OpenSource(d.uri, SourceOptions{});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto shared = std::make_shared<CountingSource>(std::move(*opened));
  LoaderOptions o = d.Opts();
  o.source_object = shared;
  for (const char* root : {"cache-a", "cache-b"}) {  // each fills its own root: 60 reads
    o.cache.root = d.dir.Sub(root);
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Epoch(l->get());
    auto s = (*l)->stats();
    EXPECT_EQ(s.cache_misses, 60u);
    EXPECT_EQ(s.origin_requests, 60u) << root;
  }
  EXPECT_EQ(shared->traffic().requests, 120u);
}

TEST(Loader, FirstEpochFillsCacheSecondIsServedFromIt) {
  Data d;
  LoaderOptions o = d.Opts();
  o.cache.root = d.dir.Sub("cache");
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  size_t n = 0;
  auto e0 = Epoch(l->get(), &n);
  EXPECT_EQ(n, 60u);
  EXPECT_EQ(e0.size(), 8u);
  auto s0 = (*l)->stats();
  EXPECT_EQ(s0.cache_misses, 60u);
  EXPECT_GT(s0.origin_bytes, 0u);
  (*l)->SetEpoch(1);
  auto e1 = Epoch(l->get(), &n);
  auto s1 = (*l)->stats();
  EXPECT_EQ(s1.origin_bytes, s0.origin_bytes) << "second epoch touched the origin";
  EXPECT_EQ(s1.cache_hits, 60u);
  EXPECT_NE(e0, e1) << "a new epoch must reshuffle and re-augment";
  // Another loader (another job) on the same cache: no origin reads at all.
  auto l2 = Loader::Open(o);
  (*l2)->SetEpoch(1);
  EXPECT_EQ(Epoch(l2->get()), e1);
  EXPECT_EQ((*l2)->stats().origin_bytes, 0u);
}

TEST(Loader, SameBatchesWhateverTheWorkerCount) {
  Data d;
  LoaderOptions o = d.Opts();
  std::vector<std::string> ref;
  for (int workers : {1, 3, 5}) {
    o.workers = workers;
    o.prefetch = workers;
    auto l = Loader::Open(o);
    (*l)->SetEpoch(4);
    auto e = Epoch(l->get());
    if (ref.empty()) ref = e;
    EXPECT_EQ(e, ref) << workers << " workers";
  }
}

TEST(Loader, ExactMidEpochResume) {
  Data d;
  LoaderOptions o = d.Opts();
  auto full = Loader::Open(o);
  (*full)->SetEpoch(2);
  auto all = Epoch(full->get());
  auto l = Loader::Open(o);
  (*l)->SetEpoch(2);
  Batch b;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(*(*l)->Next(&b));
  LoaderState st = (*l)->state();
  EXPECT_EQ(st.batches_consumed, 3u);
  EXPECT_EQ(st.epoch, 2u);
  auto resumed = Loader::Open(o);
  ASSERT_TRUE((*resumed)->LoadState(st).ok());
  auto rest = Epoch(resumed->get());
  ASSERT_EQ(rest.size(), all.size() - 3);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], all[i + 3]) << i;
  LoaderState other = st;
  other.seed = 99;
  EXPECT_FALSE((*resumed)->LoadState(other).ok());
}

// tf.data runs the generator (Next) on its own thread while the user calls
// state_dict(): every state seen must be a batch boundary, never a position
// ahead of the batches it counts.
TEST(Loader, StateTakenFromAnotherThreadIsABatchBoundary) {
  Data d;
  LoaderOptions o = d.Opts();
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok());
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    Batch b;
    for (int e = 0; e < 3; ++e)
      while (*(*l)->Next(&b)) {
      }
    done = true;
  });
  uint64_t seen = 0, bad = 0;
  while (!done) {
    LoaderState s = (*l)->state();
    uint64_t expect = std::min<uint64_t>(s.batches_consumed * o.batch_size, 60);
    if (s.position != expect) ++bad;
    ++seen;
  }
  consumer.join();
  EXPECT_EQ(bad, 0u) << "of " << seen << " states";
  EXPECT_GT(seen, 0u);
}

TEST(Loader, CorruptSampleRaisesNamingItOrIsSkipped) {
  Data d(60, 0.15);
  LoaderOptions o = d.Opts();
  auto l = Loader::Open(o);
  Batch b;
  Status err;
  while (true) {
    auto r = (*l)->Next(&b);
    if (!r.ok()) {
      err = r.status();
      break;
    }
    ASSERT_TRUE(*r) << "a corrupt sample went unnoticed";
  }
  EXPECT_NE(err.message().find(".tfrecord record "), std::string::npos) << err.message();
  o.source_options.on_error = OnError::kSkip;
  auto s = Loader::Open(o);
  size_t n = 0;
  Epoch(s->get(), &n);
  auto st = (*s)->stats();
  EXPECT_GT(st.skipped, 0u);
  EXPECT_EQ(n, 60u) << "skipped samples are replaced, the epoch keeps its size";
  EXPECT_GE(st.decode_errors, st.skipped);  // a bad substitute candidate counts too
}

TEST(Loader, ANewPassWithoutSetEpochTakesTheNextEpoch) {
  Data d;
  LoaderOptions o = d.Opts();
  auto l = Loader::Open(o);
  auto p0 = Epoch(l->get());
  auto p1 = Epoch(l->get());  // no SetEpoch: epoch 1, reshuffled
  auto p2 = Epoch(l->get());
  EXPECT_NE(p0, p1);
  EXPECT_NE(p1, p2);
  EXPECT_EQ((*l)->state().epoch, 3u);
  // Deterministic: the same as asking for those epochs explicitly.
  auto ref = Loader::Open(o);
  for (uint64_t e : {0u, 1u, 2u}) {
    (*ref)->SetEpoch(e);
    EXPECT_EQ(Epoch(ref->get()), e == 0 ? p0 : e == 1 ? p1 : p2) << "epoch " << e;
  }
  // SetEpoch between passes wins over the automatic advance.
  (*l)->SetEpoch(1);
  EXPECT_EQ(Epoch(l->get()), p1);
}

// Labels of every batch of one epoch, and the batch sizes.
std::vector<std::vector<int64_t>> EpochLabels(Loader* l) {
  std::vector<std::vector<int64_t>> out;
  Batch b;
  while (true) {
    auto r = l->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    out.emplace_back(b.labels(), b.labels() + b.size);
  }
  return out;
}

TEST(Loader, SkippedSamplesAreReplacedSoBatchesStayFull) {
  Data d(60, 0.15);
  LoaderOptions o = d.Opts();
  o.source_options.on_error = OnError::kSkip;
  for (size_t bs : {1u, 8u}) {
    o.batch_size = bs;
    std::vector<std::string> ref;
    for (int workers : {1, 3}) {
      o.workers = workers;
      auto l = Loader::Open(o);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      (*l)->SetEpoch(2);
      auto batches = EpochLabels(l->get());
      ASSERT_GT((*l)->stats().skipped, 0u);
      EXPECT_EQ(batches.size(), (*l)->num_batches());
      for (size_t i = 0; i < batches.size(); ++i)
        EXPECT_EQ(batches[i].size(), i + 1 < batches.size() ? bs : 60 - bs * i) << "batch " << i;
      // Pixels and labels, not only sizes, are the same whatever the workers.
      (*l)->SetEpoch(2);
      auto bytes = Epoch(l->get());
      if (ref.empty()) ref = bytes;
      EXPECT_EQ(bytes, ref) << workers << " workers, batch " << bs;
    }
  }
}

// DDP: a rank that serves fewer batches than another hangs the collective.
TEST(Loader, RanksServeTheirFullBatchCountWhateverIsSkipped) {
  Data d(60, 0.15);
  LoaderOptions o = d.Opts();
  o.source_options.on_error = OnError::kSkip;
  o.world_size = 2;
  o.batch_size = 6;  // 30 samples a rank: 5 full batches
  bool uneven = false;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    o.seed = seed;
    uint64_t skipped[2] = {0, 0};
    for (int r = 0; r < 2; ++r) {
      o.rank = r;
      auto l = Loader::Open(o);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      auto batches = EpochLabels(l->get());
      EXPECT_EQ(batches.size(), (*l)->num_batches()) << "seed " << seed << " rank " << r;
      for (const auto& b : batches) EXPECT_EQ(b.size(), o.batch_size);
      skipped[r] = (*l)->stats().skipped;
    }
    uneven = uneven || skipped[0] != skipped[1];
  }
  EXPECT_TRUE(uneven) << "no seed gave the ranks different numbers of bad samples";
}

TEST(Loader, ASkippedSampleIsReplacedByTheNextGoodOneOfThePlan) {
  Data d(60, 0.15);
  LoaderOptions o = d.Opts();
  o.source_options.on_error = OnError::kSkip;
  o.shuffle = false;  // the plan is 0..59
  o.augment.enabled = false;
  o.prepare.resize_short = 0;
  o.prepare.resize_h = o.prepare.resize_w = 16;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<int64_t> got;
  for (const auto& b : EpochLabels(l->get())) got.insert(got.end(), b.begin(), b.end());
  ASSERT_EQ(got.size(), 60u);
  size_t bad = 0;
  for (uint64_t k = 0; k < 60; ++k) {
    uint64_t id = k;
    while (IsCorruptSample(0, id, 0.15)) id = (id + 1) % 60;
    bad += id != k;
    Image im;
    int label = 0;
    ASSERT_TRUE(GenerateImage(0, id, 5, 60, 100, &im, &label).ok());
    EXPECT_EQ(got[k], label) << "position " << k << " (substitute " << id << ")";
  }
  EXPECT_GT(bad, 0u);
}

TEST(Loader, ResumeAfterSkipsContinuesAtThePlanPosition) {
  Data d(60, 0.15);
  LoaderOptions o = d.Opts();
  o.source_options.on_error = OnError::kSkip;
  auto full = Loader::Open(o);
  (*full)->SetEpoch(1);
  auto all = Epoch(full->get());
  auto l = Loader::Open(o);
  (*l)->SetEpoch(1);
  Batch b;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(*(*l)->Next(&b));
  LoaderState st = (*l)->state();
  EXPECT_GE(st.position, 4u * o.batch_size);
  auto r = Loader::Open(o);
  ASSERT_TRUE((*r)->LoadState(st).ok());
  EXPECT_EQ(Epoch(r->get()), std::vector<std::string>(all.begin() + 4, all.end()));
}

TEST(Loader, BadOptionsAreRefusedNamingThem) {
  Data d;
  LoaderOptions o = d.Opts();
  o.workers = -1;
  EXPECT_NE(Loader::Open(o).status().message().find("workers must be >= 0"), std::string::npos);
  o = d.Opts();
  o.prefetch = 0;
  EXPECT_NE(Loader::Open(o).status().message().find("prefetch must be >= 1"), std::string::npos);
  o = d.Opts();
  o.batch_size = 0;
  EXPECT_NE(Loader::Open(o).status().message().find("batch_size must be >= 1"), std::string::npos);
}

TEST(Loader, UnequalShapesAreAClearError) {
  Data d;
  LoaderOptions o = d.Opts();
  o.augment.enabled = false;
  auto l = Loader::Open(o);
  Batch b;
  auto r = (*l)->Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unequal shape"), std::string::npos);
  o.batch_size = 1;
  auto one = Loader::Open(o);
  ASSERT_TRUE(*(*one)->Next(&b));
  EXPECT_EQ(std::min(b.shape[1], b.shape[2]), 48u);
}

// Records this entry's prepare spec never makes (a crafted one checksums
// fine): one of 1 channel in an RGB entry, which a render would have read
// past the end of its batch slot, and zstd pixels (48 MiB from a 1.6 KiB
// frame) in a raw entry. Each is damage found on its header, before
// anything is rendered or decoded: counted, and the sample is prepared
// again from the origin.
TEST(Loader, CachedRecordsTheSpecNeverMakesAreRepairedFromTheOrigin) {
  Data d(16);
  LoaderOptions o = d.Opts();
  o.cache.root = d.dir.Sub("cache");
  o.shuffle = false;
  {
    auto src = OpenSource(o.source);
    ASSERT_TRUE(src.ok());
    auto e = CacheEntry::Open(o.cache, MakeEntryKey(**src, o.source_options, o.prepare));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<uint8_t> gray(48 * 60, 7);
    Status put = (*e)->Put(0, 0, gray.data(), 48, 60, 1);
    EXPECT_TRUE(put.IsInvalidArgument()) << "a writer refuses it: " << put.ToString();
    test::PlantRecords(
        (*e)->dir(),
        {test::CraftedRecord(0, 0, 48, 60, 1, std::string(gray.begin(), gray.end())),
         test::CraftedRecord(1, 1, 4096, 4096, 3, test::ZeroFrame(uint64_t{4096} * 4096 * 3))});
  }
  for (bool augment : {true, false}) {  // rendered into a batch, and served as prepared
    o.augment.enabled = augment;
    o.batch_size = augment ? 8 : 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Batch b;
    for (int i = 0; i < (augment ? 1 : 2); ++i) {
      auto more = (*l)->Next(&b);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      EXPECT_EQ(b.size, augment ? 8u : 1u);
    }
    if (augment) {  // the second loader finds them repaired
      EXPECT_EQ((*l)->stats().corrupt_records, 2u);
      EXPECT_EQ((*l)->stats().corrupt_repaired, 2u);
    } else {
      EXPECT_EQ((*l)->stats().corrupt_records, 0u);
      EXPECT_GE((*l)->stats().cache_hits, 2u);
    }
  }
}

TEST(Loader, NormalizedFloatNchwMatchesUint8) {
  Data d;
  LoaderOptions o = d.Opts();
  auto u8 = Loader::Open(o);
  Batch a;
  ASSERT_TRUE(*(*u8)->Next(&a));
  o.output.dtype = DType::kFloat32;
  o.output.layout = Layout::kNCHW;
  o.output.mean = {0.5f, 0.4f, 0.3f};
  o.output.std = {0.2f, 0.25f, 0.3f};
  auto f32 = Loader::Open(o);
  Batch b;
  ASSERT_TRUE(*(*f32)->Next(&b));
  EXPECT_EQ(b.shape, (std::array<size_t, 4>{8, 3, 32, 32}));
  auto* px = static_cast<const uint8_t*>(a.images());
  auto* fl = static_cast<const float*>(b.images());
  for (size_t n = 0; n < 8; n += 3)
    for (size_t c = 0; c < 3; ++c)
      for (size_t p = 0; p < 32 * 32; p += 97) {
        float want = (px[(n * 1024 + p) * 3 + c] / 255.f - o.output.mean[c]) / o.output.std[c];
        EXPECT_NEAR(fl[(n * 3 + c) * 1024 + p], want, 1e-5);
      }
}

TEST(Loader, StopsCleanlyMidEpochAndRecyclesBuffers) {
  Data d(120);
  LoaderOptions o = d.Opts();
  o.prefetch = 4;
  for (int i = 0; i < 5; ++i) {
    auto l = Loader::Open(o);
    Batch b;
    ASSERT_TRUE(*(*l)->Next(&b));
    // Destroyed with workers blocked on a full ring: must not hang or crash.
  }
  auto l = Loader::Open(o);
  Batch keep;
  ASSERT_TRUE(*(*l)->Next(&keep));
  std::string before(static_cast<const char*>(keep.images()), 8 * 32 * 32 * 3);
  Epoch(l->get());
  // The held batch was not overwritten by later ones.
  EXPECT_EQ(before, std::string(static_cast<const char*>(keep.images()), 8 * 32 * 32 * 3));
}

}  // namespace
}  // namespace ssdfeed
