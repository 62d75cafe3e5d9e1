// The loader's sample renderer on its own: a cached sample into its batch
// slot, with the crop keyed by (seed, epoch, id), and the checks that keep
// a wrong sample out of a batch.
#include "pipeline/sample_renderer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "image/augment.h"

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
  p.cs = {p.im.pixels.data(), h, w, c, label, {}};
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

}  // namespace
}  // namespace ssdfeed
