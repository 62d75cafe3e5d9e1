// Image-less sources (a Python dataset's items): samples that are fields
// only go through the fetcher, the cache record, the renderer and the
// Loader without any image being decoded, stored or served.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "pipeline/sample_renderer.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/cached_fields.h"
#include "ssdfeed/loader.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// A .npy (version 1) of float32 (3,) as numpy.lib.format writes it.
std::string NpyF32(const float v[3]) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(reinterpret_cast<const char*>(v), 12);
}

// Item id: "vec" = [id, id+0.5, -id] (float32, fixed shape) and "txt" =
// "item<id>" (bytes of varying length). Counts its reads.
class ItemsSource : public Source {
 public:
  explicit ItemsSource(size_t n) : n_(n) {}
  size_t size() const override { return n_; }
  Status Read(size_t id, EncodedSample* out) const override {
    reads.fetch_add(1);
    if (id == bad) return Status::InvalidArgument(Describe(id) + ": bad item");
    float v[3] = {static_cast<float>(id), static_cast<float>(id) + 0.5f, -static_cast<float>(id)};
    out->bytes.clear();
    out->label = -1;
    out->fields = {{"vec", FieldKind::kArray, NpyF32(v), false, ""},
                   {"txt", FieldKind::kBytes, "item" + std::to_string(id), false, ""}};
    return Status::OK();
  }
  std::string Describe(size_t id) const override { return "test:items item " + std::to_string(id); }
  const std::string& identity() const override { return uri_; }
  const std::string& uri() const override { return uri_; }
  std::vector<FieldSpec> fields() const override {
    return {{"vec", FieldKind::kArray, ""}, {"txt", FieldKind::kBytes, ""}};
  }
  std::string record_spec() const override { return "items-test"; }

  mutable std::atomic<int> reads{0};
  size_t bad = SIZE_MAX;

 private:
  size_t n_;
  std::string uri_ = "test:items";
};

CacheOptions Opts(const std::string& root) {
  CacheOptions o;
  o.root = root;
  o.capacity_bytes = 1ull << 30;
  o.warm_read = WarmRead::kBuffered;
  o.fill_write = FillWrite::kBuffered;
  return o;
}

void ExpectItem(const CachedSample& s, uint64_t id) {
  EXPECT_EQ(s.bytes(), 0u) << "no pixels";
  std::vector<FieldView> views;
  ASSERT_TRUE(ParseFields(s, &views).ok());
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "vec");
  EXPECT_EQ(views[0].dtype, "<f4");
  EXPECT_EQ(views[0].shape, (std::vector<uint64_t>{3}));
  float v[3];
  ASSERT_EQ(views[0].size, sizeof v);
  std::memcpy(v, views[0].data, sizeof v);
  EXPECT_EQ(v[1], static_cast<float>(id) + 0.5f);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(views[1].data), views[1].size),
            "item" + std::to_string(id));
}

TEST(ImageLess, FetcherStoresAndServesFieldsOnly) {
  test::TempDir root;
  ItemsSource src(5);
  EntryKey key = MakeEntryKey(src, {}, PrepareSpec{});
  EXPECT_EQ(key.spec, "items-test") << "the source's record spec keys the entry";
  auto e = CacheEntry::Open(Opts(root.path()), key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  SampleFetcher fetcher(&src, PrepareSpec{}, e->get(), 0);
  FetchScratch scratch;
  for (uint64_t id = 0; id < src.size(); ++id) {
    CachedSample s;
    Status st = fetcher.Fetch(id, &scratch, &s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectItem(s, id);
  }
  ASSERT_EQ((*e)->samples_present(), src.size());
  for (uint64_t id = 0; id < src.size(); ++id) {  // read back: the record checks pass
    std::string buf;
    CachedSample s;
    ASSERT_TRUE((*e)->Get(id, &buf, &s).ok());
    ExpectItem(s, id);
  }
  VerifyReport r;
  ASSERT_TRUE(VerifyEntry(e->get(), &r).ok());
  EXPECT_EQ(r.good, src.size());
  EXPECT_EQ(r.corrupt, 0u);
}

LoaderOptions ItemLoaderOptions(std::shared_ptr<const Source> src, const std::string& root) {
  LoaderOptions o;
  o.source = src->uri();
  o.source_object = std::move(src);
  o.cache = Opts(root);
  o.batch_size = 4;
  o.workers = 2;
  o.metrics = false;
  return o;
}

// Batches of a source without images: no pixels, fixed-shape arrays
// stacked, bytes listed; a second loader serves them all from the cache.
TEST(ImageLess, LoaderServesFieldBatchesFromTheSourceObject) {
  test::TempDir root;
  auto src = std::make_shared<ItemsSource>(10);
  for (int pass = 0; pass < 2; ++pass) {
    auto l = Loader::Open(ItemLoaderOptions(src, root.path()));
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ((*l)->fields().size(), 2u);
    uint64_t next = 0;
    Batch b;
    while (true) {
      auto got = (*l)->Next(&b);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      if (!*got) break;
      EXPECT_EQ(b.shape[1] * b.shape[2] * b.shape[3], 0u) << "no pixels";
      EXPECT_TRUE(b.buffer->images.empty());
      const auto& f = b.buffer->fields;
      ASSERT_EQ(f.size(), 2u);
      EXPECT_EQ(f[0].name, "vec");
      ASSERT_TRUE(f[0].stacked);
      EXPECT_EQ(f[0].shape, (std::vector<uint64_t>{b.size, 3}));
      EXPECT_EQ(f[1].name, "txt");
      EXPECT_FALSE(f[1].stacked) << "bytes are listed";
      for (size_t i = 0; i < b.size; ++i, ++next) {
        float v[3];
        std::memcpy(v, f[0].data.data() + i * 12, 12);
        EXPECT_EQ(v[0], static_cast<float>(next));
        EXPECT_EQ(f[1].items[i].data, "item" + std::to_string(next));
      }
    }
    EXPECT_EQ(next, 10u);
    LoaderStats s = (*l)->stats();
    EXPECT_EQ(pass == 0 ? s.cache_misses : s.cache_hits, 10u);
  }
  EXPECT_EQ(src->reads.load(), 10) << "the second loader read nothing from the source";
}

TEST(ImageLess, LoaderRefusesAugmentAndSkipsBadItems) {
  test::TempDir root;
  auto src = std::make_shared<ItemsSource>(8);
  LoaderOptions o = ItemLoaderOptions(src, root.path());
  o.augment.enabled = true;
  o.augment.height = o.augment.width = 8;
  auto refused = Loader::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("test:items has none"), std::string::npos)
      << refused.status().message();

  src->bad = 3;
  o = ItemLoaderOptions(src, root.path());
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok());
  Batch b;
  auto got = (*l)->Next(&b);
  ASSERT_FALSE(got.ok()) << "on_error=raise: the bad item's error";
  EXPECT_NE(got.status().message().find("test:items item 3: bad item"), std::string::npos)
      << got.status().message();

  o.source_options.on_error = OnError::kSkip;
  l = Loader::Open(o);
  ASSERT_TRUE(l.ok());
  uint64_t served = 0;
  while (true) {
    auto g = (*l)->Next(&b);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    if (!*g) break;
    served += b.size;
  }
  EXPECT_EQ(served, 8u) << "the bad item is replaced in its batch";
  EXPECT_EQ((*l)->stats().skipped, 1u);
}

// A renderer for a source without images serves fields only, and takes a
// record with pixels (another entry's, or damage) for corruption.
TEST(ImageLess, RendererServesFieldsAndRefusesPixels) {
  SampleRenderer r(PrepareSpec{}, AugmentSpec{}, OutputSpec{}, 0, /*image_less=*/true);
  EXPECT_TRUE(r.fixed());
  EXPECT_EQ(r.sample_bytes(), 0u);
  auto buf = std::make_shared<BatchBuffer>();
  buf->labels.resize(1);
  std::vector<uint8_t> scratch;
  StagedFields staged;
  std::vector<Field> fields = {{"txt", FieldKind::kBytes, "|u1", {2}, "ab"}};
  std::string section;
  ASSERT_TRUE(EncodeFields(fields, &section).ok());
  CachedSample cs;
  cs.fields = section;
  ASSERT_TRUE(r.Render(cs, 0, 7, buf.get(), 0, nullptr, &scratch, &staged).ok());
  ASSERT_EQ(staged.fields.size(), 1u);
  EXPECT_EQ(staged.fields[0].data, "ab");
  EXPECT_EQ(staged.id, 7u);
  uint8_t px[12] = {};
  cs.pixels = px;
  cs.height = cs.width = 2;
  cs.channels = 3;
  Status st = r.Render(cs, 0, 7, buf.get(), 0, nullptr, &scratch, &staged);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
}

// A cached sample hands out its fields parsed (ssdfeed/cache.h): a reader
// outside src/cache needs no header but the public ones, and a section that
// does not parse is corruption, never a read past it.
TEST(ImageLess, CachedSampleGivesItsFieldsParsed) {
  std::vector<Field> fields = {{"txt", FieldKind::kBytes, "|u1", {2}, "ab"},
                               {"n", FieldKind::kArray, "<i8", {}, std::string(8, '\x01')}};
  std::string section;
  ASSERT_TRUE(EncodeFields(fields, &section).ok());
  CachedSample cs;
  std::vector<FieldView> views = {FieldView{}};
  ASSERT_TRUE(cs.ParsedFields(&views).ok());
  EXPECT_TRUE(views.empty()) << "a sample of only an image and a label has no fields";
  cs.fields = section;
  ASSERT_TRUE(cs.ParsedFields(&views).ok());
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "txt");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(views[0].data), views[0].size), "ab");
  EXPECT_EQ(views[1].dtype, "<i8");
  EXPECT_EQ(views[1].shape, std::vector<uint64_t>{});
  std::string cut = section.substr(0, section.size() - 1);
  cs.fields = cut;
  Status st = cs.ParsedFields(&views);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
}

}  // namespace
}  // namespace ssdfeed
