// `cache verify --verify-source=content`: records against the origin.
#include "pipeline/origin_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "cache/field_section.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

struct Filled {
  std::unique_ptr<Source> source;
  std::unique_ptr<CacheEntry> entry;
  PrepareSpec spec;
};

// A folder dataset of n images, every sample prepared into a fresh entry.
Filled MakeFilled(const test::TempDir& dir, size_t n) {
  const std::string data_uri = test::MakeTestDataset({.dir = dir.Sub("ds"),
                                                      .format = "folder",
                                                      .count = n,
                                                      .classes = 3,
                                                      .min_side = 40,
                                                      .max_side = 80});
  Filled f;
  f.source = std::move(OpenSource(data_uri).value());
  f.spec.resize_short = 16;
  CacheOptions co;
  co.root = dir.Sub("cache");
  f.entry = std::move(CacheEntry::Open(co, MakeEntryKey(*f.source, {}, f.spec)).value());
  SampleFetcher fetcher(f.source.get(), f.spec, f.entry.get(), 0);
  FetchScratch scratch;
  for (uint64_t id = 0; id < n; ++id) {
    CachedSample s;
    EXPECT_TRUE(fetcher.Fetch(id, &scratch, &s).ok());
  }
  return f;
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string OneMask(const std::string& data) {
  std::string sec;
  Field f{"mask", FieldKind::kMask, "|u1", {data.size()}, data};
  EXPECT_TRUE(cache_format::EncodeFields({f}, &sec).ok());
  return sec;
}

TEST(OriginCheck, SampleDifferenceComparesFieldsByteForByte) {
  const uint8_t px[3] = {1, 2, 3};
  CachedSample a;
  a.pixels = px;
  a.height = a.width = 1;
  a.channels = 3;
  std::string m1 = OneMask("ab"), m2 = OneMask("ac");
  a.fields = m1;
  CachedSample b = a;
  EXPECT_EQ(SampleDifference(a, b), "");
  b.fields = m2;
  EXPECT_EQ(SampleDifference(a, b), "cached field mask differs from the origin's");
  b.fields = {};
  EXPECT_EQ(SampleDifference(a, b), "cached field mask differs from the origin's");
  EXPECT_EQ(SampleDifference(b, a), "the origin's field mask is not in the cached record");
  // A section of no fields is stored as none: the same sample.
  std::string none;
  ASSERT_TRUE(cache_format::EncodeFields({}, &none).ok());
  b.fields = none;
  a.fields = {};
  EXPECT_EQ(SampleDifference(a, b), "");
}

// A record whose pixels and label are right but whose fields are not what
// the origin prepares is a mismatch, named.
TEST(OriginCheck, AFieldTheOriginDoesNotPrepareIsAMismatch) {
  test::TempDir dir;
  Filled f = MakeFilled(dir, 4);
  std::string buf, mask = OneMask("xyz");
  CachedSample s;
  ASSERT_TRUE(f.entry->Get(1, &buf, &s).ok());
  s.fields = mask;
  ASSERT_TRUE(f.entry->Put(1, s).ok());  // the newer record wins
  OriginCheckReport r;
  ASSERT_TRUE(CompareWithOrigin(*f.source, f.spec, f.entry.get(), 1, &r).ok());
  EXPECT_EQ(r.compared, 4u);
  EXPECT_EQ(r.mismatched, 1u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("sample 1: cached field mask differs"), std::string::npos)
      << r.problems[0];
}

TEST(OriginCheck, IntactEntryMatches) {
  test::TempDir dir;
  Filled f = MakeFilled(dir, 12);
  OriginCheckReport r;
  ASSERT_TRUE(CompareWithOrigin(*f.source, f.spec, f.entry.get(), 3, &r).ok());
  EXPECT_EQ(r.compared, 12u);
  EXPECT_EQ(r.mismatched, 0u);
  EXPECT_EQ(r.unreadable, 0u);
  EXPECT_TRUE(r.problems.empty());
}

TEST(OriginCheck, RewrittenImageIsNamed) {
  test::TempDir dir;
  Filled f = MakeFilled(dir, 12);
  // Another image's bytes where sample 5 was: what the origin serves now.
  std::string victim = f.source->Describe(5);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << ReadAll(f.source->Describe(6));
  std::ofstream(f.source->Describe(9), std::ios::binary | std::ios::trunc) << "not an image";
  OriginCheckReport r;
  ASSERT_TRUE(CompareWithOrigin(*f.source, f.spec, f.entry.get(), 3, &r).ok());
  EXPECT_EQ(r.compared, 11u);
  EXPECT_EQ(r.mismatched, 1u);
  EXPECT_EQ(r.unreadable, 1u);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0].rfind(victim + ": sample 5: ", 0), 0u) << r.problems[0];
  EXPECT_EQ(r.problems[1].rfind(f.source->Describe(9) + ": sample 9: ", 0), 0u) << r.problems[1];
}

TEST(OriginCheck, OtherSampleCountIsRefused) {
  test::TempDir dir;
  Filled f = MakeFilled(dir, 6);
  const std::string data_uri = test::MakeTestDataset(
      {.dir = dir.Sub("other"), .format = "folder", .count = 4, .min_side = 40, .max_side = 80});
  ASSERT_FALSE(data_uri.empty());
  auto other = OpenSource(data_uri);
  ASSERT_TRUE(other.ok());
  OriginCheckReport r;
  Status s = CompareWithOrigin(**other, f.spec, f.entry.get(), 2, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("has 4 samples, the entry 6"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace ssdfeed
