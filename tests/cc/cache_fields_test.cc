// Records with fields (format version 3): a sample's mask, boxes, classes and
// raw bytes travel in the record's field section, under its checksum, through
// every way a record is written (buffered, direct) and read (Get, GetMany
// buffered and direct, compaction, verify).
#include <gtest/gtest.h>
#include <spng.h>

#include <cstdlib>
#include <fstream>

#include "cache/record_format.h"
#include "cache_test_util.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "pipeline/origin_check.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/warm.h"
#include "test_util.h"
#include "util/hash.h"

namespace ssdfeed {
namespace {

namespace cf = cache_format;
using test::FakeFields;
using test::FakeKey;
using test::FakePixels;
using test::PutFakeWithFields;
using test::ReadsBackFakeWithFields;
using test::SameAsFakeWithFields;

CacheOptions Opts(const std::string& root) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.sync_bytes = 4096;
  o.reserve_chunk = 16384;
  o.warm_read = WarmRead::kBuffered;
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

void FlipByte(const std::string& path, uint64_t off) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(off));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(&c, 1);
}

// Where sample 0's field section starts in a .dat it was put first into.
uint64_t FirstRecordSectionOffset() {
  int h, w;
  FakePixels(0, &h, &w);
  return cf::kRecordHeaderSize + static_cast<uint64_t>(h) * w * 3;
}

// Puts ids [0, n) with fields and reads them back, one by one and in one
// GetMany, on the entry as opened with o.
void RoundTrip(const CacheOptions& o, uint64_t n) {
  auto e = CacheEntry::Open(o, FakeKey(n));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = 0; id < n; ++id) ASSERT_TRUE(PutFakeWithFields(e->get(), id).ok()) << id;
  for (uint64_t id = 0; id < n; ++id) {
    Status st;
    EXPECT_TRUE(ReadsBackFakeWithFields(e->get(), id, &st)) << id << ": " << st.ToString();
  }
  std::vector<CacheRead> reads(n);
  for (uint64_t id = 0; id < n; ++id) reads[id].id = id;
  ReadBuffers bufs;
  (*e)->GetMany(reads.data(), reads.size(), &bufs);
  for (uint64_t id = 0; id < n; ++id)
    EXPECT_TRUE(reads[id].status.ok() && SameAsFakeWithFields(id, reads[id].sample))
        << id << ": " << reads[id].status.ToString();
}

TEST(CacheFields, RoundTripBuffered) {
  test::TempDir root;
  RoundTrip(Opts(root.path()), 24);
  // And from a fresh reader of the files.
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(24));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 24; ++id) EXPECT_TRUE(ReadsBackFakeWithFields(e->get(), id)) << id;
}

// Direct writes (records copied into O_DIRECT chunks) and direct reads
// (io_uring windows, the record at a skew inside its window).
TEST(CacheFields, RoundTripDirect) {
  test::TempDir root;
  if (!test::DirectIoWorks(root.path())) GTEST_SKIP() << root.path() << " refuses O_DIRECT";
  CacheOptions o = Opts(root.path());
  o.warm_read = WarmRead::kDirect;
  o.fill_write = FillWrite::kDirect;
  RoundTrip(o, 40);
  auto e = CacheEntry::Open(o, FakeKey(40));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE((*e)->direct_reads());
  std::vector<CacheRead> reads(40);
  for (uint64_t id = 0; id < 40; ++id) reads[id].id = id;
  ReadBuffers bufs;
  (*e)->GetMany(reads.data(), reads.size(), &bufs);
  for (uint64_t id = 0; id < 40; ++id)
    EXPECT_TRUE(reads[id].status.ok() && SameAsFakeWithFields(id, reads[id].sample)) << id;
  EXPECT_EQ((*e)->counters().direct_reads.load(), 40u);
}

// An image-only sample's record is as before: no section, fields empty; a
// section of no fields is stored as none.
TEST(CacheFields, ImageOnlyRecordsHaveNoSection) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(4));
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(test::PutFake(e->get(), 0).ok());
  std::string empty;
  ASSERT_TRUE(cf::EncodeFields({}, &empty).ok());
  ASSERT_EQ(empty.size(), 8u);
  int h, w;
  auto p = FakePixels(1, &h, &w);
  CachedSample s;
  s.pixels = p.data();
  s.height = h;
  s.width = w;
  s.channels = 3;
  s.label = 1;
  s.fields = empty;
  ASSERT_TRUE((*e)->Put(1, s).ok());
  for (uint64_t id : {0, 1}) {
    std::string buf;
    CachedSample got;
    ASSERT_TRUE((*e)->Get(id, &buf, &got).ok());
    EXPECT_TRUE(got.fields.empty()) << id;
    EXPECT_EQ(buf.size(), cf::kRecordHeaderSize + got.bytes()) << id;
    EXPECT_EQ(buf[21], 0) << id;
  }
}

TEST(CacheFields, AMalformedSectionIsRefusedNotStored) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(4));
  ASSERT_TRUE(e.ok());
  int h, w;
  auto p = FakePixels(0, &h, &w);
  std::string bad = FakeFields(0);
  bad.pop_back();  // cut short
  CachedSample s;
  s.pixels = p.data();
  s.height = h;
  s.width = w;
  s.channels = 3;
  s.fields = bad;
  Status st = (*e)->Put(0, s);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_NE(st.message().find("field section"), std::string::npos) << st.message();
  EXPECT_FALSE((*e)->Contains(0));
  EXPECT_TRUE((*e)->admitting()) << "one bad sample does not stop admission";
}

// A flipped byte inside the field section fails the record's checksum: the
// read is Corruption, the record is dropped, and a Put repairs it.
TEST(CacheFields, AFlippedFieldByteIsCorruptionAndRepaired) {
  test::TempDir root;
  std::string dir;
  {
    auto e = CacheEntry::Open(Opts(root.path()), FakeKey(4));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < 4; ++id) ASSERT_TRUE(PutFakeWithFields(e->get(), id).ok());
    dir = (*e)->dir();
  }
  auto dats = Dats(dir);
  ASSERT_EQ(dats.size(), 1u);
  // Sample 0's mask data: after the section's count (8), the mask's head
  // (16) and dims (16) and its name and dtype ("mask|u1", padded to 8).
  FlipByte(dats[0], FirstRecordSectionOffset() + 8 + 16 + 16 + 8 + 3);
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(4));
  ASSERT_TRUE(e.ok());
  Status st;
  EXPECT_FALSE(ReadsBackFakeWithFields(e->get(), 0, &st));
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("sample 0: checksum mismatch"), std::string::npos) << st.message();
  EXPECT_FALSE((*e)->Contains(0)) << "dropped from the index";
  EXPECT_EQ((*e)->counters().corrupt_records.load(), 1u);
  for (uint64_t id = 1; id < 4; ++id) EXPECT_TRUE(ReadsBackFakeWithFields(e->get(), id)) << id;
  ASSERT_TRUE(PutFakeWithFields(e->get(), 0).ok());  // repair
  EXPECT_TRUE(ReadsBackFakeWithFields(e->get(), 0));
  auto again = CacheEntry::Open(Opts(root.path()), FakeKey(4));
  EXPECT_TRUE(ReadsBackFakeWithFields(again->get(), 0)) << "the repaired record wins";
}

TEST(CacheFields, VerifyCatchesADamagedField) {
  test::TempDir root;
  auto e = CacheEntry::Open(Opts(root.path()), FakeKey(6));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 6; ++id) ASSERT_TRUE(PutFakeWithFields(e->get(), id).ok());
  ASSERT_TRUE((*e)->Sync().ok());
  // The last byte of sample 0's section: its "meta" bytes' padding.
  FlipByte(Dats((*e)->dir())[0], FirstRecordSectionOffset() + FakeFields(0).size() - 1);
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
  EXPECT_EQ(r.good, 5u);
  EXPECT_EQ(r.corrupt, 1u);
  ASSERT_EQ(r.corrupt_ids, std::vector<uint64_t>{0});
}

TEST(CacheFields, CompactionKeepsFields) {
  test::TempDir root;
  CacheOptions o = Opts(root.path());
  std::string name;
  {
    // Two writers at once: two segment files to fold into one.
    auto a = CacheEntry::Open(o, FakeKey(20));
    auto b = CacheEntry::Open(o, FakeKey(20));
    ASSERT_TRUE(a.ok() && b.ok());
    for (uint64_t id = 0; id < 20; ++id)
      ASSERT_TRUE(PutFakeWithFields(id % 2 ? a->get() : b->get(), id).ok());
    name = FakeKey(20).fingerprint();
  }
  CompactReport rep;
  ASSERT_TRUE(CompactEntry(o, name, &rep).ok());
  EXPECT_EQ(rep.records, 20u);
  EXPECT_LT(rep.files_after, rep.files_before);
  auto e = CacheEntry::Open(o, FakeKey(20));
  ASSERT_TRUE(e.ok());
  for (uint64_t id = 0; id < 20; ++id) EXPECT_TRUE(ReadsBackFakeWithFields(e->get(), id)) << id;
}

// Entries of an older format are never served: the version is the first
// part of every fingerprint, so the same key under version 2 named another
// directory.
TEST(CacheFields, TheFormatVersionIsInTheFingerprint) {
  EXPECT_EQ(cf::kFormatVersion, 3u);
  EntryKey k = FakeKey(10);
  auto with = [&k](const std::string& version) {
    Fingerprinter fp;
    fp.Add(version);
    fp.Add(k.source_identity);
    fp.Add(k.spec);
    fp.Add(std::to_string(k.samples_total));
    return fp.HexDigest();
  };
  EXPECT_EQ(k.fingerprint(), with("ssdfeed-cache-v3"));
  EXPECT_NE(k.fingerprint(), with("ssdfeed-cache-v2"));
}

// A grey 8-bit PNG of w x h class ids.
std::string GreyPng(int w, int h, const std::vector<uint8_t>& ids) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{
      static_cast<uint32_t>(w), static_cast<uint32_t>(h), 8, SPNG_COLOR_TYPE_GRAYSCALE, 0, 0, 0};
  spng_set_ihdr(ctx, &ihdr);
  int e = spng_encode_image(ctx, ids.data(), ids.size(), SPNG_FMT_RAW, SPNG_ENCODE_FINALIZE);
  EXPECT_EQ(e, 0) << spng_strerror(e);
  size_t len = 0;
  void* buf = spng_get_png_buffer(ctx, &len, &e);
  std::string out(static_cast<char*>(buf), len);
  std::free(buf);
  spng_ctx_free(ctx);
  return out;
}

// n segmentation samples: a 64 x 64 JPEG, its mask and one box each.
class SegSource : public Source {
 public:
  explicit SegSource(size_t n) : n_(n) {}
  size_t size() const override { return n_; }
  Status Read(size_t id, EncodedSample* out) const override {
    Image img;
    img.Reset(64, 64, 3);
    std::vector<uint8_t> ids(64 * 64);
    for (size_t i = 0; i < img.bytes(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 3 + id);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint8_t>((i / 64 + id) % 5);
    SSDFEED_RETURN_IF_ERROR(EncodeJpeg(img, 90, &out->bytes));
    out->label = static_cast<int64_t>(id);
    float box[4] = {1, 2, 30.5f, 40};
    int64_t cls = static_cast<int64_t>(id % 3);
    out->fields = {
        {"mask", FieldKind::kMask, GreyPng(64, 64, ids), false, Describe(id) + ".png"},
        {"boxes", FieldKind::kBoxes, std::string(reinterpret_cast<char*>(box), 16), false, ""},
        {"classes", FieldKind::kClasses, std::string(reinterpret_cast<char*>(&cls), 8), false, ""}};
    return Status::OK();
  }
  std::string Describe(size_t id) const override { return "/seg/" + std::to_string(id); }
  const std::string& identity() const override { return uri_; }
  const std::string& uri() const override { return uri_; }

 private:
  size_t n_;
  std::string uri_ = "test:seg";
};

// The whole way a segmentation sample goes: prepared from the origin with
// its fields, stored by the fetcher's Put, served with them, compared with
// the origin by the content check, and counted by the size estimate.
TEST(CacheFields, PreparedFieldsAreStoredServedAndComparedWithTheOrigin) {
  test::TempDir root;
  SegSource src(6);
  PrepareSpec spec;
  auto e = CacheEntry::Open(Opts(root.path()), MakeEntryKey(src, {}, spec));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  SampleFetcher fetcher(&src, spec, e->get(), 0);
  FetchScratch scratch;
  for (uint64_t id = 0; id < src.size(); ++id) {
    CachedSample s;
    ASSERT_TRUE(fetcher.Fetch(id, &scratch, &s).ok());
    EXPECT_FALSE(s.fields.empty());
  }
  ASSERT_EQ((*e)->samples_present(), src.size()) << "the fetcher stored every sample";
  std::string buf;
  CachedSample got;
  ASSERT_TRUE((*e)->Get(2, &buf, &got).ok());
  std::vector<FieldView> views;
  ASSERT_EQ(cf::ParseFields(got.fields, &views), "");
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].name, "mask");
  EXPECT_EQ(views[0].shape, (std::vector<uint64_t>{64, 64}));
  OriginCheckReport r;
  ASSERT_TRUE(CompareWithOrigin(src, spec, e->get(), 2, &r).ok());
  EXPECT_EQ(r.compared, src.size());
  EXPECT_EQ(r.mismatched, 0u) << (r.problems.empty() ? "" : r.problems[0]);

  // The estimate counts the fields: it covers the records written.
  EntryEstimate est = EstimateEntry(src, spec);
  EXPECT_EQ(est.field_bytes, got.fields.size() * src.size());
  uint64_t records = src.size() * (buf.size() + cf::kIndexEntrySize);
  EXPECT_GE(est.entry_bytes(), records);

  // A record whose mask is not what the origin prepares (checksum intact).
  std::string mask_changed;
  std::vector<Field> owned;
  for (const FieldView& v : views) owned.push_back(cf::ToField(v));
  owned[0].data[100] = static_cast<char>(owned[0].data[100] + 1);
  ASSERT_TRUE(cf::EncodeFields(owned, &mask_changed).ok());
  got.fields = mask_changed;
  ASSERT_TRUE((*e)->Put(2, got).ok());
  ASSERT_TRUE(CompareWithOrigin(src, spec, e->get(), 2, &r).ok());
  EXPECT_EQ(r.mismatched, 1u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("sample 2: cached field mask differs from the origin's"),
            std::string::npos)
      << r.problems[0];
}

}  // namespace
}  // namespace ssdfeed
