// Records of the zstd and jpeg codecs (docs/cache-format.md, "Codecs"):
// every read serves raw pixels, a record that does not decode is damage
// (counted, dropped, repaired from the origin), and the loader's batches do
// not depend on the codec's losslessness, the cache's state or the workers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/record_format.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using test::CodecKey;
using test::DamageStoredBytes;
using test::FakeFields;
using test::FakeKey;
using test::PutFakeCoded;

constexpr uint64_t kN = 12;

CacheOptions Opts(const std::string& root, WarmRead read = WarmRead::kBuffered) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.warm_read = read;
  o.fill_write = FillWrite::kBuffered;
  return o;
}

std::vector<std::string> Dats(const std::string& dir) {
  std::vector<std::string> names, out;
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  for (const auto& n : names)
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".dat") == 0) out.push_back(JoinPath(dir, n));
  return out;
}

uint64_t DatBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& p : Dats(dir)) {
    std::string data;
    EXPECT_TRUE(Env::Default()->ReadFileToString(p, &data).ok());
    total += data.size();
  }
  return total;
}

// Damages the first record of the entry's only .dat (sample 0, put first).
void DamageFirstRecord(const std::string& dir) {
  auto dats = Dats(dir);
  ASSERT_EQ(dats.size(), 1u);
  std::string data;
  ASSERT_TRUE(Env::Default()->ReadFileToString(dats[0], &data).ok());
  DamageStoredBytes(data.data());
  std::fstream f(dats[0], std::ios::in | std::ios::out | std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

bool Served(const CachedSample& s, uint64_t id, RecordCodec codec, bool fields,
            const std::vector<uint8_t>& want) {
  return s.codec == codec && s.label == int64_t(id % 7) && s.channels == 3 &&
         s.bytes() == want.size() && std::equal(want.begin(), want.end(), s.pixels) &&
         s.fields == (fields ? FakeFields(id) : std::string());
}

class CodecRecords : public testing::TestWithParam<std::tuple<RecordCodec, bool>> {};

// Get, GetMany buffered and GetMany direct (where the filesystem takes
// O_DIRECT) all serve the pixels decoded, with the fields, reusing their
// buffers from one read to the next.
TEST_P(CodecRecords, EveryReadServesRawPixels) {
  auto [codec, fields] = GetParam();
  test::TempDir root;
  std::vector<std::vector<uint8_t>> want(kN);
  {
    // Records with fields are written with O_DIRECT where the filesystem
    // takes it, the others through the page cache: both writers store the
    // stored bytes.
    CacheOptions o = Opts(root.path());
    if (fields && test::DirectIoWorks(root.path())) o.fill_write = FillWrite::kDirect;
    auto e = CacheEntry::Open(o, CodecKey(kN, codec));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < kN; ++id)
      ASSERT_TRUE(PutFakeCoded(e->get(), id, codec, fields, &want[id]).ok());
    if (codec == RecordCodec::kZstd) {  // lossless
      for (uint64_t id = 0; id < kN; ++id) {
        int h, w;
        EXPECT_EQ(want[id], test::FakePixels(id, &h, &w));
      }
    }
  }
  std::vector<WarmRead> modes = {WarmRead::kBuffered};
  if (test::DirectIoWorks(root.path())) modes.push_back(WarmRead::kDirect);
  for (WarmRead mode : modes) {
    auto e = CacheEntry::Open(Opts(root.path(), mode), CodecKey(kN, codec));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::string buf;
    for (uint64_t id = 0; id < kN; ++id) {
      CachedSample s;
      ASSERT_TRUE((*e)->Get(id, &buf, &s).ok()) << id;
      EXPECT_TRUE(Served(s, id, codec, fields, want[id])) << id;
    }
    ReadBuffers bufs;
    for (int round = 0; round < 2; ++round) {
      std::vector<CacheRead> reads(kN);
      for (uint64_t id = 0; id < kN; ++id) reads[id].id = (id + round * 5) % kN;
      (*e)->GetMany(reads.data(), kN, &bufs);
      for (const CacheRead& r : reads) {
        ASSERT_TRUE(r.status.ok()) << r.id << ": " << r.status.ToString();
        EXPECT_TRUE(Served(r.sample, r.id, codec, fields, want[r.id])) << r.id;
      }
    }
    EXPECT_EQ((*e)->direct_reads(), mode == WarmRead::kDirect);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CodecRecords,
                         testing::Combine(testing::Values(RecordCodec::kZstd, RecordCodec::kJpeg,
                                                          RecordCodec::kYuv420),
                                          testing::Bool()));

class CodecEntry : public testing::TestWithParam<RecordCodec> {};

// The checksum matches (it is written again after the flip): only decoding
// finds the damage, and it is treated as any damaged record.
TEST_P(CodecEntry, UndecodableRecordIsCorruptionCountedAndDropped) {
  // yuv420's planes carry no check of their own: any bytes of their
  // length decode, so only the record's checksum (or a length other than
  // the planes', CraftedRecords) tells damage.
  if (GetParam() == RecordCodec::kYuv420) GTEST_SKIP() << "no stream to find damage in";
  RecordCodec codec = GetParam();
  for (bool many : {false, true}) {
    test::TempDir root;
    std::string dir;
    {
      auto e = CacheEntry::Open(Opts(root.path()), CodecKey(kN, codec));
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      for (uint64_t id = 0; id < 2; ++id) ASSERT_TRUE(PutFakeCoded(e->get(), id, codec).ok());
      dir = (*e)->dir();
    }
    DamageFirstRecord(dir);
    auto e = CacheEntry::Open(Opts(root.path()), CodecKey(kN, codec));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    Status st;
    if (many) {
      std::vector<CacheRead> reads(2);
      reads[1].id = 1;
      ReadBuffers bufs;
      (*e)->GetMany(reads.data(), 2, &bufs);
      st = reads[0].status;
      EXPECT_TRUE(reads[1].status.ok()) << reads[1].status.ToString();
    } else {
      std::string buf;
      CachedSample s;
      st = (*e)->Get(0, &buf, &s);
    }
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_NE(st.message().find("sample 0"), std::string::npos) << st.message();
    EXPECT_EQ((*e)->counters().corrupt_records.load(), 1u);
    EXPECT_FALSE((*e)->Contains(0));
    std::string buf;
    CachedSample s1;
    EXPECT_TRUE((*e)->Get(1, &buf, &s1).ok());
  }
}

TEST_P(CodecEntry, VerifyCountsAnUndecodableRecord) {
  // yuv420's planes carry no check of their own: any bytes of their
  // length decode, so only the record's checksum (or a length other than
  // the planes', CraftedRecords) tells damage.
  if (GetParam() == RecordCodec::kYuv420) GTEST_SKIP() << "no stream to find damage in";
  RecordCodec codec = GetParam();
  test::TempDir root;
  std::string dir;
  {
    auto e = CacheEntry::Open(Opts(root.path()), CodecKey(kN, codec));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < 3; ++id) ASSERT_TRUE(PutFakeCoded(e->get(), id, codec).ok());
    dir = (*e)->dir();
  }
  DamageFirstRecord(dir);
  auto e = CacheEntry::Open(Opts(root.path()), CodecKey(kN, codec));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
  EXPECT_EQ(r.good, 2u);
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.corrupt_ids, std::vector<uint64_t>{0});
}

// Compaction copies records as stored: the entry's bytes stay the codec's,
// and every record serves what it served before.
TEST_P(CodecEntry, CompactionKeepsStoredBytes) {
  RecordCodec codec = GetParam();
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  std::vector<std::vector<uint8_t>> want(kN);
  uint64_t before = 0;
  {
    // Two writers at once: two segment files to fold into one.
    auto a = CacheEntry::Open(o, CodecKey(kN, codec));
    auto b = CacheEntry::Open(o, CodecKey(kN, codec));
    ASSERT_TRUE(a.ok() && b.ok());
    for (uint64_t id = 0; id < kN; ++id)
      ASSERT_TRUE(PutFakeCoded(id % 2 ? a->get() : b->get(), id, codec, true, &want[id]).ok());
    before = DatBytes((*a)->dir());
  }
  CompactReport rep;
  ASSERT_TRUE(CompactEntry(o, CodecKey(kN, codec).fingerprint(), &rep).ok());
  EXPECT_EQ(rep.records, kN);
  EXPECT_LT(rep.files_after, rep.files_before);
  auto e = CacheEntry::Open(o, CodecKey(kN, codec));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(DatBytes((*e)->dir()), before);
  std::string buf;
  for (uint64_t id = 0; id < kN; ++id) {
    CachedSample s;
    ASSERT_TRUE((*e)->Get(id, &buf, &s).ok()) << id;
    EXPECT_TRUE(Served(s, id, codec, true, want[id])) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CodecEntry,
                         testing::Values(RecordCodec::kZstd, RecordCodec::kJpeg,
                                         RecordCodec::kYuv420));

// ---------------------------------------------------------------- loader

struct Data {
  test::TempDir dir;
  std::string uri;
  Data() {
    uri = test::MakeTestDataset({.dir = dir.Sub("data"),
                                 .format = "tfrecord",
                                 .count = 40,
                                 .classes = 5,
                                 .shard_size = 20,
                                 .min_side = 60,
                                 .max_side = 100});
  }
  LoaderOptions Opts(RecordCodec codec, int workers, const std::string& cache) const {
    LoaderOptions o;
    o.source = uri;
    o.prepare.resize_short = 48;
    o.prepare.codec = codec;
    o.augment.enabled = true;
    o.augment.height = o.augment.width = 32;
    o.batch_size = 8;
    o.shuffle = true;
    o.seed = 3;
    o.workers = workers;
    o.prefetch = workers;
    o.cache.root = cache;
    return o;
  }
};

std::vector<std::string> Epoch(const LoaderOptions& o, uint64_t epoch, LoaderStats* stats) {
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return {};
  (*l)->SetEpoch(epoch);
  std::vector<std::string> out;
  Batch b;
  while (true) {
    auto r = (*l)->Next(&b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    size_t bytes = b.shape[0] * b.shape[1] * b.shape[2] * b.shape[3];
    out.push_back(std::string(static_cast<const char*>(b.images()), bytes) +
                  std::string(reinterpret_cast<const char*>(b.labels()), b.size * 8));
  }
  if (stats != nullptr) *stats = (*l)->stats();
  return out;
}

double Psnr(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  double se = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    for (size_t k = 0; k < a[i].size() && k < b[i].size(); ++k, ++n)
      se += std::pow(double(uint8_t(a[i][k])) - uint8_t(b[i][k]), 2);
  return se == 0 ? 99 : 10 * std::log10(255.0 * 255.0 * n / se);
}

// The same batches for 1 and 4 workers, cold (filling) and warm: the
// first epoch serves jpeg's decode too. zstd serves raw's very batches.
TEST(CacheCodecLoader, SameBatchesForAnyWorkersColdOrWarm) {
  Data d;
  LoaderOptions raw = d.Opts(RecordCodec::kRaw, 2, "");
  auto ref = Epoch(raw, 4, nullptr);
  ASSERT_EQ(ref.size(), 5u);
  for (RecordCodec codec : {RecordCodec::kZstd, RecordCodec::kJpeg, RecordCodec::kYuv420}) {
    std::string cache = d.dir.Sub(std::string("cache-") + EnumName(codec));
    LoaderStats cold, warm;
    auto e1 = Epoch(d.Opts(codec, 1, cache), 4, &cold);
    EXPECT_EQ(cold.cache_misses, 40u);
    auto e4 = Epoch(d.Opts(codec, 4, cache), 4, &warm);
    EXPECT_EQ(warm.cache_hits, 40u);
    EXPECT_EQ(warm.origin_bytes, 0u);
    EXPECT_EQ(e4, e1) << EnumName(codec) << ": warm with 4 workers differs from cold with 1";
    // Direct reads go through grouped reads (CacheRead), not Get.
    LoaderOptions direct = d.Opts(codec, 2, cache);
    direct.cache.warm_read = WarmRead::kDirect;
    EXPECT_EQ(Epoch(direct, 4, nullptr), e1) << EnumName(codec) << ": direct reads";
    EXPECT_EQ(Epoch(d.Opts(codec, 3, ""), 4, nullptr), e1)
        << EnumName(codec) << ": without a cache";
    if (codec == RecordCodec::kZstd) {
      EXPECT_EQ(e1, ref) << "zstd must serve raw's pixels";
    } else {
      EXPECT_NE(e1, ref);
      EXPECT_GT(Psnr(e1, ref), 28.0);
    }
  }
}

TEST(CacheCodecLoader, AnUndecodableRecordIsRepairedFromTheOrigin) {
  Data d;
  for (RecordCodec codec : {RecordCodec::kZstd, RecordCodec::kJpeg}) {
    std::string cache = d.dir.Sub(std::string("repair-") + EnumName(codec));
    auto clean = Epoch(d.Opts(codec, 2, cache), 1, nullptr);
    std::vector<std::string> names;
    ASSERT_TRUE(Env::Default()->GetChildren(JoinPath(cache, "entries"), &names).ok());
    std::string dir;
    for (const auto& n : names)
      if (n[0] != '.') dir = JoinPath(JoinPath(cache, "entries"), n);
    ASSERT_FALSE(dir.empty());
    ASSERT_EQ(Dats(dir).size(), 1u) << "one filler wrote the entry";
    DamageFirstRecord(dir);
    LoaderStats s;
    EXPECT_EQ(Epoch(d.Opts(codec, 2, cache), 1, &s), clean) << EnumName(codec);
    EXPECT_EQ(s.corrupt_records, 1u) << EnumName(codec);
    EXPECT_EQ(s.corrupt_repaired, 1u) << EnumName(codec);
    EXPECT_EQ(s.cache_misses, 1u) << EnumName(codec);
    // Repaired: the next epoch is all hits.
    EXPECT_EQ(Epoch(d.Opts(codec, 2, cache), 1, &s), clean);
    EXPECT_EQ(s.cache_hits, 40u);
  }
}

TEST(CacheCodecLoader, SmallerFootprint) {
  Data d;
  uint64_t bytes[4] = {};
  for (RecordCodec codec :
       {RecordCodec::kRaw, RecordCodec::kZstd, RecordCodec::kJpeg, RecordCodec::kYuv420}) {
    std::string cache = d.dir.Sub(std::string("size-") + EnumName(codec));
    Epoch(d.Opts(codec, 2, cache), 0, nullptr);
    std::vector<std::string> names;
    ASSERT_TRUE(Env::Default()->GetChildren(JoinPath(cache, "entries"), &names).ok());
    for (const auto& n : names) bytes[int(codec)] += DatBytes(JoinPath(cache, "entries/" + n));
  }
  EXPECT_LT(bytes[1], bytes[0] * 0.9);
  EXPECT_LT(bytes[2], bytes[0] * 0.3);
  EXPECT_LT(bytes[3], bytes[0] * 0.52);  // the planes, plus headers and index
}

// ---------------------------------------------------------------- CLI

std::string Cli(const std::string& args, int* rc) {
  std::string out;
  *rc = test::RunCommand(test::CliPath() + " " + args + " 2>&1", &out);
  return out;
}

std::string OneEntry(const std::string& cache, std::string* codec) {
  int rc = 0;
  std::string out = Cli("cache ls --json --cache " + cache, &rc);
  EXPECT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array() || j.size() != 1) {
    ADD_FAILURE() << out;
    return "";
  }
  *codec = j[0]["codec"];
  return j[0]["entry"];
}

// --codec/--quality key the entry (entry-id), fill it (warm), show in
// cache ls, and the entry verifies, exports and imports (the import's
// origin check prepares jpeg's served pixels, as the records hold them).
TEST(CodecCli, FlagsKeyFillListVerifyAndTravel) {
  test::TempDir d;
  std::string uri = test::MakeTestDataset(
      {.dir = d.Sub("data"), .format = "folder", .count = 12, .min_side = 40, .max_side = 60});
  ASSERT_FALSE(uri.empty());
  std::string src = " --source " + uri + " --resize-short 32";
  int rc = 0;
  auto spec_of = [&](const std::string& flags) {
    std::string out = Cli("entry-id --json" + src + flags, &rc);
    EXPECT_EQ(rc, 0) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() ? j["spec"].get<std::string>() + " " + j["entry"].get<std::string>() : "";
  };
  std::string raw = spec_of(""), zstd = spec_of(" --codec zstd"),
              jpeg = spec_of(" --codec jpeg --quality 80");
  EXPECT_EQ(spec_of(" --codec raw --quality 50"), raw) << "quality is jpeg's only";
  EXPECT_EQ(raw.find("codec"), std::string::npos) << raw;
  EXPECT_NE(zstd.find(";codec=zstd-up-l1 "), std::string::npos) << zstd;
  EXPECT_NE(jpeg.find(";codec=jpeg-q80-420 "), std::string::npos) << jpeg;

  std::string out =
      Cli("warm --quiet --cache " + d.Sub("c") + src + " --codec jpeg --quality 80", &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string codec, entry = OneEntry(d.Sub("c"), &codec);
  EXPECT_EQ(codec, "jpeg");
  EXPECT_NE(jpeg.find(entry), std::string::npos) << "warm and entry-id agree";
  out = Cli("cache ls --cache " + d.Sub("c"), &rc);
  EXPECT_NE(out.find("CODEC"), std::string::npos) << out;
  EXPECT_NE(out.find("jpeg q80"), std::string::npos) << out;
  out = Cli("cache verify --cache " + d.Sub("c"), &rc);
  EXPECT_EQ(rc, 0) << out;
  out = Cli("cache export " + entry + " --to " + d.Sub("e.tar") + " --cache " + d.Sub("c"), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = Cli("cache import " + d.Sub("e.tar") + " --check-origin 12 --cache " + d.Sub("c2"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(OneEntry(d.Sub("c2"), &codec), entry);
  EXPECT_EQ(codec, "jpeg");
  out = Cli("cache verify --verify-source=content --cache " + d.Sub("c2"), &rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST(CodecCli, BadCodecOrQualityIsAUsageErrorNamingIt) {
  test::TempDir d;
  std::string src = " --source folder:" + d.path() + " --cache " + d.Sub("c");
  int rc = 0;
  std::string out = Cli("warm --codec lz4" + src, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--codec"), std::string::npos) << out;
  EXPECT_NE(out.find("lz4"), std::string::npos) << out;
  for (const char* q : {"0", "101"}) {
    out = Cli(std::string("entry-id --codec jpeg --quality ") + q + " --source folder:" + d.path(),
              &rc);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("--quality"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace ssdfeed
