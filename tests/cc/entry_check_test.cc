// CheckEntry and ImportEntryFromOrigin (ssdfeed/entry_check.h): `cache verify
// --repair` and `cache import --check-origin` as library calls.
#include "ssdfeed/entry_check.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// A folder dataset of n images, every sample prepared into an entry of
// root `cache`; returns the source's URI.
std::string FillEntry(const test::TempDir& dir, size_t n, PrepareSpec* spec) {
  const std::string uri = test::MakeTestDataset(
      {.dir = dir.Sub("ds"), .format = "folder", .count = n, .min_side = 40, .max_side = 80});
  auto src = OpenSource(uri).value();
  spec->resize_short = 16;
  CacheOptions co;
  co.root = dir.Sub("cache");
  auto entry = CacheEntry::Open(co, MakeEntryKey(*src, {}, *spec)).value();
  SampleFetcher fetcher(src.get(), *spec, entry.get(), 0);
  FetchScratch scratch;
  for (uint64_t id = 0; id < n; ++id) {
    CachedSample s;
    EXPECT_TRUE(fetcher.Fetch(id, &scratch, &s).ok());
  }
  EXPECT_TRUE(entry->Sync().ok());
  return uri;
}

EntryInfo OnlyEntry(const std::string& root) {
  CacheOptions co;
  co.root = root;
  auto list = ListEntries(co).value();
  EXPECT_EQ(list.size(), 1u);
  return list.at(0);
}

// Flips one pixel byte of the first record (sample 0) in the entry's files.
void CorruptFirstRecord(const EntryInfo& e) {
  for (const auto& f : std::filesystem::directory_iterator(e.dir)) {
    if (f.path().extension() != ".dat") continue;
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(45);
    char c = 0;
    io.get(c);
    io.seekp(45);
    io.put(static_cast<char>(c ^ 0x5a));
    return;
  }
  ADD_FAILURE() << "no segment file in " << e.dir;
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(EntryCheck, RepairPreparesTheCorruptRecordAgain) {
  test::TempDir dir;
  PrepareSpec spec;
  FillEntry(dir, 6, &spec);
  CacheOptions co;
  co.root = dir.Sub("cache");
  EntryInfo e = OnlyEntry(co.root);
  CorruptFirstRecord(e);

  CheckEntryReport r;
  ASSERT_TRUE(CheckEntry(co, e, {}, &r).ok());
  EXPECT_EQ(r.records.corrupt, 1u);
  EXPECT_EQ(r.source, "unchanged");
  EXPECT_FALSE(r.repaired.has_value());  // not asked
  EXPECT_FALSE(r.items || r.content.has_value());

  ASSERT_TRUE(CheckEntry(co, e, {.repair = true, .compare_content = true}, &r).ok());
  ASSERT_TRUE(r.repaired.has_value());
  EXPECT_EQ(*r.repaired, 1u);
  ASSERT_TRUE(r.content.has_value());
  EXPECT_EQ(r.content->mismatched, 0u);

  ASSERT_TRUE(CheckEntry(co, e, {}, &r).ok());
  EXPECT_EQ(r.records.corrupt, 0u);
  EXPECT_EQ(r.records.good, 6u);
}

TEST(EntryCheck, RepairRefusesAChangedSource) {
  test::TempDir dir;
  PrepareSpec spec;
  std::string uri = FillEntry(dir, 6, &spec);
  CacheOptions co;
  co.root = dir.Sub("cache");
  EntryInfo e = OnlyEntry(co.root);
  CorruptFirstRecord(e);
  auto src = OpenSource(uri).value();
  std::ofstream(src->Describe(2), std::ios::binary | std::ios::app) << "more";

  CheckEntryReport r;
  Status s = CheckEntry(co, e, {.repair = true}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot repair, source changed (entry is stale)"), std::string::npos)
      << s.ToString();
  ASSERT_TRUE(CheckEntry(co, e, {}, &r).ok());
  EXPECT_TRUE(r.stale());
}

TEST(EntryCheck, ImportComparesRecordsWithThisNodesOrigin) {
  test::TempDir dir;
  PrepareSpec spec;
  std::string uri = FillEntry(dir, 6, &spec);
  CacheOptions co;
  co.root = dir.Sub("cache");
  EntryInfo e = OnlyEntry(co.root);
  const std::string stream = dir.Sub("entry.tar");
  int fd = ::open(stream.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  TransferReport er;
  ASSERT_TRUE(ExportEntry(co, e.name, fd, {}, &er).ok());
  ::close(fd);

  // The dataset copied to another path: --source-root finds it, every
  // record is compared, and they agree.
  std::filesystem::copy(dir.Sub("ds"), dir.Sub("moved"), std::filesystem::copy_options::recursive);
  CacheOptions other;
  other.root = dir.Sub("other");
  OriginImportOptions io{.source_roots = {{dir.Sub("ds"), dir.Sub("moved")}}, .check_origin = 1000};
  fd = ::open(stream.c_str(), O_RDONLY | O_CLOEXEC);
  TransferReport ir;
  Status s = ImportEntryFromOrigin(other, fd, io, &ir);
  ::close(fd);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ir.added, 6u);
  EXPECT_NE(ir.source_uri.find(dir.Sub("moved")), std::string::npos) << ir.source_uri;

  // Another image in sample 3's place: not the same dataset, nothing kept.
  auto src = OpenSource(RewriteSourceUri(uri, io.source_roots)).value();
  std::ofstream(src->Describe(3), std::ios::binary | std::ios::trunc) << ReadAll(src->Describe(4));
  CacheOptions third;
  third.root = dir.Sub("third");
  fd = ::open(stream.c_str(), O_RDONLY | O_CLOEXEC);
  s = ImportEntryFromOrigin(third, fd, io, &ir);
  ::close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sample 3 prepares differently here"), std::string::npos)
      << s.ToString();
}

TEST(EntryCheck, SourceRootsRewriteWholePathComponents) {
  std::vector<std::pair<std::string, std::string>> roots = {{"/data", "/mnt/d"}};
  EXPECT_EQ(RewriteSourceUri("folder:/data/train", roots), "folder:/mnt/d/train");
  EXPECT_EQ(RewriteSourceUri("folder:/database/train", roots), "folder:/database/train");
  EXPECT_EQ(RewriteSourceUri("/data", roots), "/mnt/d");
}

}  // namespace
}  // namespace ssdfeed
