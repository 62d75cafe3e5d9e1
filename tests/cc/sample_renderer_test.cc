// The loader's sample renderer on its own: a cached sample into its batch
// slot, with the crop keyed by (seed, epoch, id), and the checks that keep
// a wrong sample out of a batch.
#include "pipeline/sample_renderer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cache/field_section.h"
#include "image/augment.h"
#include "pipeline/batch_fields.h"

namespace ssdfeed {
namespace {

struct Pixels {
  Image im;
  CachedSample cs;
};

Pixels MakeSample(int h, int w, int c, int64_t label, int salt) {
  Pixels p;
  p.im.Reset(h, w, c);
  for (size_t i = 0; i < p.im.pixels.size(); ++i)
    p.im.pixels[i] = static_cast<uint8_t>(i * 37 + salt * 11 + i / 7);
  p.cs = {p.im.pixels.data(), h, w, c, label, {}, RecordCodec::kRaw, {}};
  return p;
}

AugmentSpec Augment() {
  AugmentSpec a;
  a.enabled = true;
  a.height = 8;
  a.width = 6;
  return a;
}

// What one sample must render to: RenderSample of the crop keyed by
// (seed, epoch, id), wherever in the batch it goes.
std::vector<uint8_t> Expected(const Pixels& p, uint64_t seed, uint64_t epoch, uint64_t id) {
  AugmentSpec a = Augment();
  CropBox box = SampleCrop(a, p.cs.height, p.cs.width, AugmentKey(seed, epoch, id));
  std::vector<uint8_t> out(static_cast<size_t>(a.height) * a.width * 3), scratch;
  EXPECT_TRUE(RenderSample({p.cs.pixels, p.cs.height, p.cs.width, p.cs.channels}, box, a.height,
                           a.width, OutputSpec{}, out.data(), &scratch)
                  .ok());
  return out;
}

TEST(SampleRenderer, AugmentIsKeyedBySeedEpochAndId) {
  SampleRenderer r(PrepareSpec{}, Augment(), OutputSpec{}, /*seed=*/7);
  ASSERT_TRUE(r.fixed());
  EXPECT_EQ(r.sample_bytes(), 8u * 6 * 3);
  Pixels p = MakeSample(30, 40, 3, 5, 1);
  BatchBuffer buf;
  buf.images.assign(3 * r.sample_bytes(), 0);
  buf.labels.assign(3, -1);
  std::vector<uint8_t> scratch;
  ASSERT_TRUE(r.Render(p.cs, 3, 11, &buf, 2, nullptr, &scratch).ok());
  ASSERT_TRUE(r.Render(p.cs, 4, 11, &buf, 0, nullptr, &scratch).ok());
  auto at = [&](size_t pos) {
    auto* b = buf.images.data() + pos * r.sample_bytes();
    return std::vector<uint8_t>(b, b + r.sample_bytes());
  };
  EXPECT_EQ(at(2), Expected(p, 7, 3, 11));
  EXPECT_EQ(at(0), Expected(p, 7, 4, 11));
  EXPECT_NE(at(0), at(2)) << "another epoch, another crop";
  EXPECT_EQ(at(1), std::vector<uint8_t>(r.sample_bytes(), 0)) << "untouched";
  EXPECT_EQ(buf.labels, (std::vector<int64_t>{5, -1, 5}));
}

TEST(SampleRenderer, RefusesASampleOfAnotherSizeOrChannelCount) {
  PrepareSpec prep;
  prep.resize_h = 4;
  prep.resize_w = 5;
  SampleRenderer r(prep, AugmentSpec{}, OutputSpec{}, 0);
  ASSERT_TRUE(r.fixed());
  BatchBuffer buf;
  buf.images.assign(2 * r.sample_bytes(), 0);
  buf.labels.assign(2, -1);
  std::vector<uint8_t> scratch;
  Pixels ok = MakeSample(4, 5, 3, 1, 0), big = MakeSample(5, 5, 3, 2, 0),
         gray = MakeSample(4, 5, 1, 3, 0);
  ASSERT_TRUE(r.Render(ok.cs, 0, 0, &buf, 0, nullptr, &scratch).ok());
  EXPECT_EQ(std::memcmp(buf.images.data(), ok.im.pixels.data(), r.sample_bytes()), 0);
  Status s = r.Render(big.cs, 0, 1, &buf, 1, nullptr, &scratch);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), "prepared size 5x5 differs from the batch's");
  s = r.Render(gray.cs, 0, 2, &buf, 1, nullptr, &scratch);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message(), "prepared sample has 1 channels, the batch 3");
}

// Without a fixed shape, samples are staged as prepared and a batch is
// rendered whole once they are known to agree.
TEST(SampleRenderer, StagedSamplesMustAgreeInShape) {
  OutputSpec out;
  out.layout = Layout::kNCHW;
  SampleRenderer r(PrepareSpec{}, AugmentSpec{}, out, 0);
  ASSERT_FALSE(r.fixed());
  BatchBuffer buf;
  buf.labels.assign(3, -1);
  std::vector<Image> staging(3);
  std::vector<uint8_t> scratch;
  Pixels a = MakeSample(2, 3, 3, 0, 1), b = MakeSample(2, 3, 3, 1, 2),
         c = MakeSample(3, 2, 3, 2, 3);
  ASSERT_TRUE(r.Render(a.cs, 0, 0, &buf, 0, &staging[0], &scratch).ok());
  ASSERT_TRUE(r.Render(b.cs, 0, 1, &buf, 1, &staging[1], &scratch).ok());
  EXPECT_EQ(staging[1].pixels, b.im.pixels);
  int h = 0, w = 0;
  ASSERT_TRUE(r.RenderStaged({&staging[0], &staging[1]}, &buf, &h, &w).ok());
  EXPECT_EQ(h, 2);
  EXPECT_EQ(w, 3);
  ASSERT_EQ(buf.images.size(), 2u * r.sample_bytes(2, 3));
  // NCHW: the second sample's first plane is its red channel.
  EXPECT_EQ(buf.images[r.sample_bytes(2, 3) + 1], b.im.pixels[3]);
  Batch batch;
  r.Fill(std::make_shared<BatchBuffer>(buf), 2, h, w, &batch);
  EXPECT_EQ(batch.shape, (std::array<size_t, 4>{2, 3, 2, 3}));
  ASSERT_TRUE(r.Render(c.cs, 0, 2, &buf, 2, &staging[2], &scratch).ok());
  Status s = r.RenderStaged({&staging[0], &staging[2]}, &buf, &h, &w);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("unequal shape in one batch (2x3 and 3x2)"), std::string::npos)
      << s.message();
}

// ---- Fields: rendered per sample, collated per batch ----

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

Field MakeField(const std::string& name, FieldKind kind, const std::string& dtype,
                std::vector<uint64_t> shape, std::string data) {
  return Field{name, kind, dtype, std::move(shape), std::move(data)};
}

Field Mask(int h, int w, uint8_t v) {
  return MakeField("mask", FieldKind::kMask, "|u1", {uint64_t(h), uint64_t(w)},
                   std::string(size_t(h) * w, char(v)));
}

Field Boxes(std::vector<float> xyxy) {
  uint64_t k = xyxy.size() / 4;
  return MakeField("boxes", FieldKind::kBoxes, "<f4", {k, 4}, Bytes(xyxy));
}

Field Classes(std::vector<int64_t> c) {
  return MakeField("classes", FieldKind::kClasses, "<i8", {c.size()}, Bytes(c));
}

StagedFields Staged(uint64_t id, std::vector<Field> f) {
  StagedFields s;
  s.id = id;
  s.fields = std::move(f);
  return s;
}

std::vector<const StagedFields*> Ptrs(const std::vector<StagedFields>& v) {
  std::vector<const StagedFields*> p;
  for (const auto& s : v) p.push_back(&s);
  return p;
}

template <typename T>
std::vector<T> As(const BatchField& f) {
  std::vector<T> v(f.data.size() / sizeof(T));
  std::memcpy(v.data(), f.data.data(), f.data.size());
  return v;
}

const BatchField* Get(const BatchBuffer& b, const std::string& name) {
  for (const auto& f : b.fields)
    if (f.name == name) return &f;
  return nullptr;
}

// A sample whose record holds a field section: the renderer hands its
// fields to the slot's staging, and collation sees what the record held.
TEST(SampleRendererFields, RecordFieldsReachTheSlotServedAsCached) {
  PrepareSpec prep;
  prep.resize_h = 4;
  prep.resize_w = 5;
  SampleRenderer r(prep, AugmentSpec{}, OutputSpec{}, 0);
  Pixels p = MakeSample(4, 5, 3, 9, 0);
  std::string section;
  std::vector<Field> in = {Mask(4, 5, 3), Boxes({0, 1, 2, 3}), Classes({7})};
  ASSERT_TRUE(cache_format::EncodeFields(in, &section).ok());
  p.cs.fields = section;
  BatchBuffer buf;
  buf.images.assign(r.sample_bytes(), 0);
  buf.labels.assign(1, -1);
  std::vector<uint8_t> scratch;
  StagedFields staged;
  staged.fields.resize(5);  // a slot's leftovers from an earlier chunk
  ASSERT_TRUE(r.Render(p.cs, 0, 42, &buf, 0, nullptr, &scratch, &staged).ok());
  EXPECT_EQ(staged.id, 42u);
  ASSERT_EQ(staged.fields.size(), 3u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(staged.fields[i].name, in[i].name);
    EXPECT_EQ(staged.fields[i].kind, in[i].kind);
    EXPECT_EQ(staged.fields[i].dtype, in[i].dtype);
    EXPECT_EQ(staged.fields[i].shape, in[i].shape);
    EXPECT_EQ(staged.fields[i].data, in[i].data);
  }
  // A sample without fields leaves none behind from the last one.
  Pixels plain = MakeSample(4, 5, 3, 1, 1);
  ASSERT_TRUE(r.Render(plain.cs, 0, 43, &buf, 0, nullptr, &scratch, &staged).ok());
  EXPECT_TRUE(staged.fields.empty());
}

TEST(SampleRendererFields, ADamagedFieldSectionIsCorruption) {
  SampleRenderer r(PrepareSpec{}, Augment(), OutputSpec{}, 0);
  Pixels p = MakeSample(30, 40, 3, 0, 0);
  std::string section;
  ASSERT_TRUE(cache_format::EncodeFields({Mask(30, 40, 1)}, &section).ok());
  section.resize(section.size() - 100);
  p.cs.fields = section;
  BatchBuffer buf;
  buf.images.assign(r.sample_bytes(), 0);
  buf.labels.assign(1, -1);
  std::vector<uint8_t> scratch;
  StagedFields staged;
  Status s = r.Render(p.cs, 0, 0, &buf, 0, nullptr, &scratch, &staged);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("cached fields: "), std::string::npos) << s.message();
}

TEST(CollateFields, StacksMasksAndLabelsOfOneShape) {
  Field lab = MakeField("label", FieldKind::kLabel, "<i8", {}, Bytes(std::vector<int64_t>{5}));
  Field lab2 = lab;
  lab2.data = Bytes(std::vector<int64_t>{-2});
  std::vector<StagedFields> s = {Staged(0, {Mask(2, 3, 1), lab}), Staged(1, {Mask(2, 3, 7), lab2})};
  BatchBuffer buf;
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  ASSERT_EQ(buf.fields.size(), 2u);
  const BatchField& m = buf.fields[0];
  EXPECT_EQ(m.name, "mask");
  EXPECT_TRUE(m.stacked);
  EXPECT_EQ(m.dtype, "|u1");
  EXPECT_EQ(m.shape, (std::vector<uint64_t>{2, 2, 3}));
  EXPECT_EQ(m.data, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 7, 7, 7, 7, 7, 7}));
  const BatchField& l = buf.fields[1];
  EXPECT_TRUE(l.stacked);
  EXPECT_EQ(l.shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(As<int64_t>(l), (std::vector<int64_t>{5, -2}));
}

TEST(CollateFields, PadsBoxesWithZeroAndClassesWithMinusOne) {
  std::vector<StagedFields> s = {
      Staged(0, {Boxes({1, 2, 3, 4}), Classes({3})}),
      Staged(1, {Boxes({}), Classes({})}),
      Staged(2, {Boxes({5, 6, 7, 8, 9, 10, 11, 12}), Classes({0, 2})}),
  };
  BatchBuffer buf;
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  ASSERT_EQ(buf.fields.size(), 3u);
  EXPECT_EQ(buf.fields[0].name, "boxes");
  EXPECT_EQ(buf.fields[1].name, "num_boxes") << "the count follows its boxes";
  EXPECT_EQ(buf.fields[2].name, "classes");
  const BatchField* b = Get(buf, "boxes");
  EXPECT_EQ(b->shape, (std::vector<uint64_t>{3, 2, 4}));
  EXPECT_EQ(b->dtype, "<f4");
  EXPECT_EQ(As<float>(*b), (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0,  0,  0,
                                               0, 0, 0, 0, 5, 6, 7, 8, 9, 10, 11, 12}));
  const BatchField* c = Get(buf, "classes");
  EXPECT_EQ(c->shape, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(c->dtype, "<i8");
  EXPECT_EQ(As<int64_t>(*c), (std::vector<int64_t>{3, -1, -1, -1, 0, 2}));
  const BatchField* n = Get(buf, "num_boxes");
  EXPECT_EQ(n->shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(As<int64_t>(*n), (std::vector<int64_t>{1, 0, 2}));

  // A batch without any box: (N, 0, 4), every count 0.
  std::vector<StagedFields> none = {Staged(0, {Boxes({}), Classes({})})};
  ASSERT_TRUE(CollateFields(Ptrs(none), &buf, nullptr).ok());
  EXPECT_EQ(Get(buf, "boxes")->shape, (std::vector<uint64_t>{1, 0, 4}));
  EXPECT_EQ(Get(buf, "classes")->shape, (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(As<int64_t>(*Get(buf, "num_boxes")), (std::vector<int64_t>{0}));
}

// Instance masks (K,H,W) pad with empty planes to the batch's most boxes,
// as boxes do; planes of unequal sizes are listed instead.
TEST(CollateFields, PadsInstanceMasksWithEmptyPlanes) {
  auto planes = [](uint64_t k, uint64_t h, uint64_t w, char v) {
    return MakeField("masks", FieldKind::kInstanceMasks, "|u1", {k, h, w},
                     std::string(k * h * w, v));
  };
  std::vector<StagedFields> s = {Staged(0, {planes(1, 2, 3, 1)}), Staged(1, {planes(0, 2, 3, 0)}),
                                 Staged(2, {planes(2, 2, 3, 1)})};
  BatchBuffer buf;
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  const BatchField* m = Get(buf, "masks");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->stacked);
  EXPECT_EQ(m->dtype, "|u1");
  EXPECT_EQ(m->shape, (std::vector<uint64_t>{3, 2, 2, 3}));
  std::vector<uint8_t> want(3 * 2 * 6, 0);
  std::fill(want.begin(), want.begin() + 6, 1);  // sample 0: one plane, one empty
  std::fill(want.begin() + 24, want.end(), 1);   // sample 2: two planes
  EXPECT_EQ(m->data, want);
  std::vector<StagedFields> unequal = {Staged(0, {planes(1, 2, 3, 1)}),
                                       Staged(1, {planes(1, 3, 2, 1)})};
  ASSERT_TRUE(CollateFields(Ptrs(unequal), &buf, nullptr).ok());
  EXPECT_FALSE(Get(buf, "masks")->stacked);
  EXPECT_EQ(Get(buf, "masks")->items.size(), 2u);
}

TEST(CollateFields, UnequalShapesAndBytesBecomeItems) {
  Field a = MakeField("depth", FieldKind::kArray, "<f4", {2}, Bytes(std::vector<float>{1, 2}));
  Field b = MakeField("depth", FieldKind::kArray, "<f4", {3}, Bytes(std::vector<float>{3, 4, 5}));
  Field j1 = MakeField("meta", FieldKind::kBytes, "|u1", {2}, "{}");
  Field j2 = MakeField("meta", FieldKind::kBytes, "|u1", {2}, "[]");
  std::vector<StagedFields> s = {Staged(0, {a, j1, Mask(2, 2, 1)}),
                                 Staged(1, {b, j2, Mask(3, 2, 2)})};
  BatchBuffer buf;
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  for (const char* name : {"depth", "meta", "mask"}) {
    const BatchField* f = Get(buf, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_FALSE(f->stacked) << name;
    ASSERT_EQ(f->items.size(), 2u) << name;
  }
  EXPECT_EQ(Get(buf, "depth")->items[1].shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(Get(buf, "depth")->items[1].data, b.data);
  EXPECT_EQ(Get(buf, "meta")->items[0].data, "{}");
  EXPECT_EQ(Get(buf, "mask")->items[1].shape, (std::vector<uint64_t>{3, 2}));
  // Bytes of one length are still items, never stacked.
  std::vector<StagedFields> same = {Staged(0, {j1}), Staged(1, {j2})};
  ASSERT_TRUE(CollateFields(Ptrs(same), &buf, nullptr).ok());
  EXPECT_FALSE(Get(buf, "meta")->stacked);
  // Arrays of one shape and dtype are stacked.
  std::vector<StagedFields> arr = {Staged(0, {a}), Staged(1, {a})};
  ASSERT_TRUE(CollateFields(Ptrs(arr), &buf, nullptr).ok());
  EXPECT_TRUE(Get(buf, "depth")->stacked);
  EXPECT_EQ(Get(buf, "depth")->shape, (std::vector<uint64_t>{2, 2}));
}

TEST(CollateFields, AFieldMissingFromOneSampleIsAnErrorNamingIt) {
  std::vector<StagedFields> s = {Staged(10, {Mask(2, 2, 1), Boxes({})}), Staged(11, {Boxes({})})};
  BatchBuffer buf;
  auto describe = [](uint64_t id) { return "voc stem " + std::to_string(id); };
  Status st = CollateFields(Ptrs(s), &buf, describe);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_EQ(st.message(),
            "voc stem 11: has no field 'mask', which voc stem 10 of the same batch has");
  std::vector<StagedFields> extra = {Staged(10, {Boxes({})}),
                                     Staged(11, {Boxes({}), Mask(1, 1, 0)})};
  st = CollateFields(Ptrs(extra), &buf, describe);
  EXPECT_EQ(st.message(),
            "voc stem 11: has a field 'mask' that voc stem 10 of the same batch lacks");
  std::vector<StagedFields> first_bare = {Staged(10, {}), Staged(11, {Mask(1, 1, 0)})};
  st = CollateFields(Ptrs(first_bare), &buf, describe);
  EXPECT_EQ(st.message(),
            "voc stem 11: has a field 'mask' that voc stem 10 of the same batch lacks");
}

// Steady state: a pooled buffer's stacked fields keep their storage.
TEST(CollateFields, ReusesAPooledBuffersStorage) {
  std::vector<StagedFields> s = {Staged(0, {Mask(8, 8, 1), Boxes({1, 2, 3, 4}), Classes({1})}),
                                 Staged(1, {Mask(8, 8, 2), Boxes({}), Classes({})})};
  BatchBuffer buf;
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  std::vector<const uint8_t*> before;
  for (const auto& f : buf.fields) before.push_back(f.data.data());
  s[1] = Staged(1, {Mask(8, 8, 3), Boxes({0, 0, 1, 1}), Classes({4})});
  ASSERT_TRUE(CollateFields(Ptrs(s), &buf, nullptr).ok());
  for (size_t i = 0; i < buf.fields.size(); ++i)
    EXPECT_EQ(buf.fields[i].data.data(), before[i]) << buf.fields[i].name;
  EXPECT_EQ(As<int64_t>(*Get(buf, "classes")), (std::vector<int64_t>{1, 4}));
  // A classic batch clears them.
  std::vector<StagedFields> classic = {Staged(0, {})};
  ASSERT_TRUE(CollateFields(Ptrs(classic), &buf, nullptr).ok());
  EXPECT_TRUE(buf.fields.empty());
}

// ---- Mask planes: a "|u1" mask rendered straight into the batch ----

// A mask of varied values, so a wrong row or column shows.
Field VariedMask(int h, int w, int salt) {
  Field m = Mask(h, w, 0);
  for (size_t i = 0; i < m.data.size(); ++i) m.data[i] = static_cast<char>(i * 7 + salt);
  return m;
}

struct PlaneBatch {
  std::vector<Pixels> samples;
  std::vector<std::string> sections;
};

// Two samples of 30x40 pixels, sample j's fields `fields[j]`.
PlaneBatch TwoSamples(const std::vector<std::vector<Field>>& fields) {
  PlaneBatch b;
  for (size_t j = 0; j < fields.size(); ++j) {
    b.samples.push_back(MakeSample(30, 40, 3, 0, static_cast<int>(j)));
    b.sections.emplace_back();
    EXPECT_TRUE(cache_format::EncodeFields(fields[j], &b.sections.back()).ok());
  }
  for (size_t j = 0; j < fields.size(); ++j) b.samples[j].cs.fields = b.sections[j];
  return b;
}

// Renders each sample of b at its position: into planes when given.
std::vector<StagedFields> RenderAll(const SampleRenderer& r, PlaneBatch& b,
                                    std::vector<MaskPlane>* planes) {
  BatchBuffer buf;
  buf.images.assign(r.sample_bytes() * b.samples.size(), 0);
  buf.labels.assign(b.samples.size(), -1);
  std::vector<uint8_t> scratch;
  std::vector<StagedFields> staged(b.samples.size());
  for (size_t j = 0; j < b.samples.size(); ++j)
    EXPECT_TRUE(
        r.Render(b.samples[j].cs, 0, 100 + j, &buf, j, nullptr, &scratch, &staged[j], planes).ok());
  return staged;
}

std::vector<FieldSpec> MaskSchema() {
  return {{"image", FieldKind::kImage, ""}, {"mask", FieldKind::kMask, ""}};
}

// The worker renders the mask into the chunk's plane, and the batch takes
// that very storage: the mask is never staged nor copied by the consumer.
// The bytes are the ones the staged path gives.
TEST(MaskPlanes, AMaskIsRenderedIntoItsPlaneAndTheBatchTakesItWhole) {
  SampleRenderer r(PrepareSpec{}, Augment(), OutputSpec{}, 3);
  std::vector<MaskPlane> planes = r.MaskPlanes(MaskSchema());
  ASSERT_EQ(planes.size(), 1u);
  EXPECT_EQ(planes[0].name, "mask");
  ASSERT_EQ(planes[0].sample_bytes, 8u * 6u);
  planes[0].data.assign(2 * planes[0].sample_bytes, 0xee);
  PlaneBatch b = TwoSamples({{VariedMask(30, 40, 1)}, {VariedMask(30, 40, 5)}});
  std::vector<StagedFields> staged = RenderAll(r, b, &planes);
  std::vector<StagedFields> want = RenderAll(r, b, nullptr);  // the staged path
  for (size_t j = 0; j < 2; ++j) {
    ASSERT_EQ(staged[j].placed, (std::vector<int>{0}));
    EXPECT_TRUE(staged[j].fields[0].data.empty());
    EXPECT_EQ(staged[j].fields[0].shape, (std::vector<uint64_t>{8, 6}));
    EXPECT_EQ(staged[j].fields[0].dtype, "|u1");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(planes[0].data.data()) + j * 48, 48),
              want[j].fields[0].data);
  }
  BatchBuffer staged_batch, planed;
  ASSERT_TRUE(CollateFields(Ptrs(want), &staged_batch, nullptr).ok());
  const uint8_t* rendered = planes[0].data.data();
  std::vector<StagedFields*> mut = {&staged[0], &staged[1]};
  UnplaceMasks(mut, 0, planes, /*all=*/false);  // every sample placed it: nothing to do
  EXPECT_EQ(staged[0].placed, (std::vector<int>{0}));
  ASSERT_TRUE(CollateFields(Ptrs(staged), &planed, nullptr, &planes).ok());
  ASSERT_EQ(planed.fields.size(), 1u);
  EXPECT_EQ(planed.fields[0].data.data(), rendered);  // no copy
  EXPECT_TRUE(planed.fields[0].stacked);
  EXPECT_EQ(planed.fields[0].shape, staged_batch.fields[0].shape);
  EXPECT_EQ(planed.fields[0].data, staged_batch.fields[0].data);
}

// A short last batch: the plane is cut to the samples there are.
TEST(MaskPlanes, AShortBatchTakesOnlyItsSamples) {
  SampleRenderer r(PrepareSpec{}, Augment(), OutputSpec{}, 3);
  std::vector<MaskPlane> planes = r.MaskPlanes(MaskSchema());
  planes[0].data.assign(4 * planes[0].sample_bytes, 0xee);  // a chunk of 4
  PlaneBatch b = TwoSamples({{VariedMask(30, 40, 2)}, {VariedMask(30, 40, 3)}});
  std::vector<StagedFields> staged = RenderAll(r, b, &planes);
  std::vector<StagedFields> want = RenderAll(r, b, nullptr);
  BatchBuffer a, c;
  ASSERT_TRUE(CollateFields(Ptrs(want), &a, nullptr).ok());
  ASSERT_TRUE(CollateFields(Ptrs(staged), &c, nullptr, &planes).ok());
  EXPECT_EQ(c.fields[0].shape, (std::vector<uint64_t>{2, 8, 6}));
  EXPECT_EQ(c.fields[0].data, a.fields[0].data);
}

// A sample whose mask cannot go to the plane ("<u2") makes the batch list
// the masks as before; the placed ones are copied out first.
TEST(MaskPlanes, ABatchWhereNotEverySamplePlacedItsMaskIsCollatedAsBefore) {
  SampleRenderer r(PrepareSpec{}, Augment(), OutputSpec{}, 3);
  std::vector<MaskPlane> planes = r.MaskPlanes(MaskSchema());
  planes[0].data.assign(2 * planes[0].sample_bytes, 0xee);
  Field wide = MakeField("mask", FieldKind::kMask, "<u2", {30, 40}, std::string(30 * 40 * 2, '\3'));
  PlaneBatch b = TwoSamples({{VariedMask(30, 40, 1)}, {wide}});
  std::vector<StagedFields> staged = RenderAll(r, b, &planes);
  EXPECT_EQ(staged[0].placed, (std::vector<int>{0}));
  EXPECT_EQ(staged[1].placed, (std::vector<int>{-1}));
  std::vector<StagedFields> want = RenderAll(r, b, nullptr);
  std::vector<StagedFields*> mut = {&staged[0], &staged[1]};
  UnplaceMasks(mut, 0, planes, /*all=*/false);
  EXPECT_EQ(staged[0].placed, (std::vector<int>{-1}));
  EXPECT_EQ(staged[0].fields[0].data, want[0].fields[0].data);
  BatchBuffer a, c;
  ASSERT_TRUE(CollateFields(Ptrs(want), &a, nullptr).ok());
  ASSERT_TRUE(CollateFields(Ptrs(staged), &c, nullptr, &planes).ok());
  ASSERT_FALSE(c.fields[0].stacked);
  ASSERT_EQ(c.fields[0].items.size(), 2u);
  for (size_t j = 0; j < 2; ++j) EXPECT_EQ(c.fields[0].items[j].data, a.fields[0].items[j].data);
}

// Without a fixed output shape there are no planes: masks keep the
// sample's prepared size and are staged.
TEST(MaskPlanes, NoneWithoutAFixedShape) {
  SampleRenderer r(PrepareSpec{}, AugmentSpec{}, OutputSpec{}, 0);
  ASSERT_FALSE(r.fixed());
  EXPECT_TRUE(r.MaskPlanes(MaskSchema()).empty());
}

TEST(CollateFields, ClassicSchemaIsImageAndLabelOnly) {
  EXPECT_TRUE(
      IsClassicSchema({{"image", FieldKind::kImage, ""}, {"label", FieldKind::kLabel, ""}}));
  EXPECT_FALSE(IsClassicSchema({{"image", FieldKind::kImage, ""}}));
  EXPECT_FALSE(IsClassicSchema({{"image", FieldKind::kImage, ""},
                                {"label", FieldKind::kLabel, ""},
                                {"mask", FieldKind::kMask, ""}}));
}

}  // namespace
}  // namespace ssdfeed
