// make-dataset's scene formats: the URI each prints reads its fields back,
// and masks, boxes and pixels agree.
#include <gtest/gtest.h>

#include <cstring>

#include "ssdfeed/dataset.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

MakeDatasetReport MakeScenes(const std::string& dir, const std::string& format) {
  MakeDatasetOptions o;
  o.dir = dir;
  o.format = format;
  o.count = 15;
  o.classes = 5;
  o.seed = 3;
  o.shard_size = 6;
  o.min_side = 48;
  o.max_side = 80;
  o.threads = 2;
  MakeDatasetReport r;
  Status s = MakeDataset(o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

std::vector<std::string> Names(const Source& s) {
  std::vector<std::string> out;
  for (const auto& f : s.fields()) out.push_back(f.name);
  return out;
}

bool IsPng(const std::string& b) { return b.size() > 8 && b.compare(1, 3, "PNG") == 0; }

TEST(SceneDataset, EveryPixelHasItsClassColourAndBoxesHoldTheirObject) {
  for (uint64_t i = 0; i < 14; ++i) {
    Scene sc;
    ASSERT_TRUE(GenerateScene(9, i, 20, 32, 90, &sc).ok());
    const Image& im = sc.image;
    for (int y = 0; y < im.height; ++y)
      for (int x = 0; x < im.width; ++x) {
        uint8_t rgb[3];
        SceneColour(sc.mask[y * im.width + x], rgb);
        ASSERT_EQ(std::memcmp(rgb, &im.pixels[(y * im.width + x) * 3], 3), 0) << i;
      }
    if (i % 7 == 6) {
      EXPECT_TRUE(sc.objects.empty());
    }
    for (const auto& o : sc.objects) {
      int cx = static_cast<int>((o.x0 + o.x1) / 2), cy = static_cast<int>((o.y0 + o.y1) / 2);
      EXPECT_EQ(sc.mask[cy * im.width + cx], o.cls) << "scene " << i;
      // The box is the object's extent: its edges' pixels are of the class.
      EXPECT_EQ(sc.mask[cy * im.width + static_cast<int>(o.x0)], o.cls);
      EXPECT_EQ(sc.mask[cy * im.width + static_cast<int>(o.x1) - 1], o.cls);
      EXPECT_EQ(sc.mask[static_cast<int>(o.y0) * im.width + cx], o.cls);
    }
  }
  EXPECT_EQ(SceneCategoryId(1), 1);
  EXPECT_EQ(SceneCategoryId(3), 6);
}

TEST(SceneDataset, VocReadsBackImageAndPaletteMask) {
  test::TempDir dir;
  auto r = MakeScenes(dir.path(), "voc");
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok()) << r.uri << ": " << src.status().ToString();
  ASSERT_EQ((*src)->size(), 15u);
  EXPECT_EQ(Names(**src), (std::vector<std::string>{"image", "mask"}));
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(4, &s).ok());
  Decoder dec;
  Image img;
  ASSERT_TRUE(dec.Decode(s.bytes, false, 0, 0, &img).ok());
  Scene sc;
  ASSERT_TRUE(GenerateScene(3, 4, 5, 48, 80, &sc).ok());
  EXPECT_EQ(img.height, sc.image.height);
  ASSERT_EQ(s.fields.size(), 1u);
  EXPECT_TRUE(IsPng(s.fields[0].bytes));
  EXPECT_NE(s.fields[0].bytes.find("PLTE"), std::string::npos);  // palette, as VOC's
}

TEST(SceneDataset, CocoReadsBackTheScenesBoxesInIdOrder) {
  test::TempDir dir;
  auto r = MakeScenes(dir.path(), "coco");
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok()) << r.uri << ": " << src.status().ToString();
  ASSERT_EQ((*src)->size(), 15u);
  auto cats = (*src)->categories();
  ASSERT_EQ(cats.size(), 5u);
  EXPECT_EQ(cats[2].id, 6);
  size_t crowd = 0, empty = 0;
  for (size_t i = 0; i < 15; ++i) {  // file names sort as the scene indices
    Scene sc;
    ASSERT_TRUE(GenerateScene(3, i, 5, 48, 80, &sc).ok());
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(i, &s).ok());
    std::vector<float> want;
    std::vector<int64_t> classes;
    for (const auto& o : sc.objects) {
      crowd += o.crowd;
      if (o.crowd) continue;
      for (float v : {o.x0, o.y0, o.x1, o.y1}) want.push_back(v);
      classes.push_back(o.cls - 1);
    }
    empty += sc.objects.empty();
    std::vector<float> got(s.fields[0].bytes.size() / 4);
    if (!got.empty()) std::memcpy(got.data(), s.fields[0].bytes.data(), s.fields[0].bytes.size());
    EXPECT_EQ(got, want) << i;
    std::vector<int64_t> got_classes(s.fields[1].bytes.size() / 8);
    if (!got_classes.empty())
      std::memcpy(got_classes.data(), s.fields[1].bytes.data(), s.fields[1].bytes.size());
    EXPECT_EQ(got_classes, classes) << i;
  }
  EXPECT_GT(crowd, 0u);
  EXPECT_GT(empty, 0u);
}

TEST(SceneDataset, WebDatasetShardsReadBackEveryField) {
  test::TempDir dir;
  auto r = MakeScenes(dir.path(), "wds-seg");
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok()) << r.uri << ": " << src.status().ToString();
  ASSERT_EQ((*src)->size(), 15u);
  EXPECT_EQ(Names(**src), (std::vector<std::string>{"image", "mask", "label", "depth", "meta"}));
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(7, &s).ok());
  ASSERT_EQ(s.fields.size(), 3u);
  EXPECT_TRUE(IsPng(s.fields[0].bytes));
  EXPECT_EQ(s.fields[1].kind, FieldKind::kArray);
  EXPECT_EQ(s.fields[1].bytes.compare(0, 6, "\x93NUMPY"), 0);
  EXPECT_NE(s.fields[2].bytes.find("\"index\":7"), std::string::npos) << s.fields[2].bytes;
  EXPECT_GE(s.label, 0);
}

}  // namespace
}  // namespace ssdfeed
