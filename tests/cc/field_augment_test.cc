// Augmentation of masks and boxes with their image: the same crop, resize
// and flip as RenderSample (image/field_augment.h).
#include "image/field_augment.h"

#include <gtest/gtest.h>

#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <tuple>
#include <utility>

#include "image/mask_rle.h"

namespace ssdfeed {
namespace {

FieldView View(std::string_view name, FieldKind kind, std::string_view dtype,
               std::vector<uint64_t> shape, const void* data, size_t size) {
  return {name, kind, dtype, std::move(shape), static_cast<const uint8_t*>(data), size};
}

template <typename T>
std::vector<T> As(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

TEST(FieldAugment, MaskIsTheCropResizedNearestAndFlippedAsOpenCvDoes) {
  std::mt19937 rng(5);
  for (int type : {CV_8UC1, CV_16UC1}) {
    cv::Mat mask(120, 160, type);
    cv::randu(mask, 0, 30);
    // Shrinks (a gather), enlargements (byte shuffles), and one at the right
    // edge, where a shuffle's 16-byte load would pass the row's end.
    for (CropBox box : {CropBox{10, 20, 50, 70, false}, CropBox{0, 0, 120, 160, true},
                        CropBox{33, 41, 17, 29, true}, CropBox{100, 137, 20, 23, false},
                        CropBox{90, 130, 30, 30, true}}) {
      FieldView v = View("mask", FieldKind::kMask, type == CV_8UC1 ? "|u1" : "<u2", {120, 160},
                         mask.data, mask.total() * mask.elemSize());
      std::vector<Field> out;
      ASSERT_TRUE(RenderFields({v}, box, 120, 160, 64, 48, 0.25, &out).ok());
      cv::Mat ref;
      cv::resize(mask(cv::Rect(box.left, box.top, box.width, box.height)), ref, cv::Size(48, 64), 0,
                 0, cv::INTER_NEAREST);
      if (box.flip) cv::flip(ref, ref, 1);
      ASSERT_EQ(out[0].shape, (std::vector<uint64_t>{64, 48}));
      ASSERT_EQ(out[0].data.size(), ref.total() * ref.elemSize());
      EXPECT_EQ(std::memcmp(out[0].data.data(), ref.data, ref.total() * ref.elemSize()), 0);
    }
  }
}

TEST(FieldAugment, FlippedMaskIsTheMaskOfTheFlippedImage) {
  // A scene of class blocks whose image pixels are the class's colour: after
  // the same crop and flip, image and mask must tell the same class
  // wherever the image is not blended across an edge.
  const int H = 180, W = 240;
  cv::Mat mask(H, W, CV_8UC1, cv::Scalar(0));
  cv::rectangle(mask, cv::Rect(20, 30, 90, 60), cv::Scalar(1), cv::FILLED);
  cv::rectangle(mask, cv::Rect(130, 10, 80, 150), cv::Scalar(2), cv::FILLED);
  cv::circle(mask, cv::Point(70, 140), 30, cv::Scalar(3), cv::FILLED);
  const uint8_t colour[4] = {0, 80, 160, 240};
  cv::Mat img(H, W, CV_8UC3);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      img.at<cv::Vec3b>(y, x) = cv::Vec3b::all(colour[mask.at<uint8_t>(y, x)]);
  AugmentSpec aug;
  aug.scale_min = 0.3;
  int flips = 0;
  for (uint64_t id = 0; id < 20; ++id) {
    CropBox box = SampleCrop(aug, H, W, AugmentKey(1, 0, id));
    flips += box.flip;
    std::vector<uint8_t> pixels(224 * 224 * 3), scratch;
    ASSERT_TRUE(RenderSample({img.data, H, W, 3}, box, 224, 224, {}, pixels.data(), &scratch).ok());
    std::vector<Field> out;
    FieldView v = View("mask", FieldKind::kMask, "|u1", {H, W}, mask.data, mask.total());
    ASSERT_TRUE(RenderFields({v}, box, H, W, 224, 224, 0.25, &out).ok());
    size_t exact = 0, agree = 0;
    for (size_t p = 0; p < 224 * 224; ++p) {
      int cls = -1;
      for (int c = 0; c < 4; ++c)
        if (pixels[p * 3] == colour[c]) cls = c;
      if (cls < 0) continue;  // blended at an edge
      ++exact;
      agree += static_cast<uint8_t>(out[0].data[p]) == cls;
    }
    ASSERT_GT(exact, 224u * 224 / 2);
    EXPECT_GE(agree, exact * 995 / 1000) << "id " << id << " flip " << box.flip;
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 20);
}

TEST(FieldAugment, BoxesAreShiftedScaledClippedDroppedAndFlippedWithTheirClasses) {
  // A 100x100 crop at (top 50, left 20) to 200x200: x' = 2 (x - 20), y' =
  // 2 (y - 50), then mirrored: x' = 200 - x'.
  std::vector<float> boxes = {30,  60,  50,  80,    // inside: (20,20)-(60,60)
                              0,   60,  40,  80,    // x 0..40 -> half seen: kept, clipped
                              10,  60,  25,  80,    // x 10..25 -> 1/3 seen: kept
                              0,   60,  22,  80,    // x 0..22 -> 1/11 seen: dropped
                              500, 500, 600, 600};  // outside: dropped
  std::vector<int64_t> classes = {1, 2, 3, 4, 5};
  std::vector<float> areas = {1.5f, 2.5f, 3.5f, 4.5f, 5.5f};  // box_floats: kept as given
  std::string blob = "raw";
  std::vector<FieldView> in = {
      View("boxes", FieldKind::kBoxes, "<f4", {5, 4}, boxes.data(), boxes.size() * 4),
      View("classes", FieldKind::kClasses, "<i8", {5}, classes.data(), classes.size() * 8),
      View("meta", FieldKind::kBytes, "|u1", {3}, blob.data(), blob.size()),
      View("area", FieldKind::kBoxFloats, "<f4", {5}, areas.data(), areas.size() * 4)};
  std::vector<Field> out;
  ASSERT_TRUE(RenderFields(in, {50, 20, 100, 100, false}, 300, 300, 200, 200, 0.25, &out).ok());
  EXPECT_EQ(As<float>(out[0].data),
            (std::vector<float>{20, 20, 60, 60, 0, 20, 40, 60, 0, 20, 10, 60}));
  EXPECT_EQ(out[0].shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(As<int64_t>(out[1].data), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(out[1].shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(out[2].data, "raw");
  EXPECT_EQ(out[2].name, "meta");
  EXPECT_EQ(As<float>(out[3].data), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(out[3].dtype, "<f4");
  EXPECT_EQ(out[3].shape, (std::vector<uint64_t>{3}));
  ASSERT_TRUE(RenderFields(in, {50, 20, 100, 100, true}, 300, 300, 200, 200, 0.25, &out).ok());
  EXPECT_EQ(As<float>(out[0].data),
            (std::vector<float>{140, 20, 180, 60, 160, 20, 200, 60, 190, 20, 200, 60}));
  // A stricter threshold drops the third box too.
  ASSERT_TRUE(RenderFields(in, {50, 20, 100, 100, false}, 300, 300, 200, 200, 0.4, &out).ok());
  EXPECT_EQ(As<int64_t>(out[1].data), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(As<float>(out[3].data), (std::vector<float>{1.5f, 2.5f}));
}

// A scale-jitter window: the mask resized nearest to the jittered size,
// flipped, padded bottom and right with mask_fill, cropped; boxes scaled,
// flipped and shifted the same way.
TEST(FieldAugment, ScaleJitterWindowPadsMasksWithTheirFillAndMovesBoxes) {
  cv::Mat mask(40, 60, CV_8UC1);
  cv::randu(mask, 0, 30);
  float boxes[2][4] = {{6, 4, 30, 20}, {50, 30, 60, 40}};
  int64_t classes[2] = {3, 9};
  for (bool flip : {false, true}) {
    // Resized to 30x45, flipped, padded to 50x55, window at (i, j) = (10, 5).
    int rh = 30, rw = 45, ch = 24, cw = 50, i = 6, j = 3;
    CropBox box{i, flip ? rw - j - cw : j, ch, cw, flip, rh, rw, 0, 255};
    std::vector<FieldView> in = {
        View("mask", FieldKind::kMask, "|u1", {40, 60}, mask.data, mask.total()),
        View("boxes", FieldKind::kBoxes, "<f4", {2, 4}, boxes, sizeof(boxes)),
        View("classes", FieldKind::kClasses, "<i8", {2}, classes, sizeof(classes))};
    std::vector<Field> out;
    ASSERT_TRUE(RenderFields(in, box, 40, 60, ch, cw, 0.25, &out).ok());
    cv::Mat resized, padded;
    cv::resize(mask, resized, cv::Size(rw, rh), 0, 0, cv::INTER_NEAREST);
    if (flip) cv::flip(resized, resized, 1);
    cv::copyMakeBorder(resized, padded, 0, std::max(0, i + ch - rh), 0, std::max(0, j + cw - rw),
                       cv::BORDER_CONSTANT, cv::Scalar(255));
    cv::Mat want = padded(cv::Rect(j, i, cw, ch)).clone();
    ASSERT_EQ(out[0].shape, (std::vector<uint64_t>{24, 50}));
    EXPECT_EQ(std::memcmp(out[0].data.data(), want.data, want.total()), 0) << "flip " << flip;
    // Box 0 scaled by 0.75, (flipped in 45 px), shifted by (-3, -6).
    std::vector<float> b = As<float>(out[1].data);
    ASSERT_EQ(b.size(), 8u) << "flip " << flip;
    float x1 = 6 * 0.75f, x2 = 30 * 0.75f;
    if (flip) std::tie(x1, x2) = std::make_pair(45 - x2, 45 - x1);
    EXPECT_FLOAT_EQ(b[0], x1 - 3);
    EXPECT_FLOAT_EQ(b[1], 0);  // 4 * 0.75 - 6 < 0: clipped
    EXPECT_FLOAT_EQ(b[2], x2 - 3);
    EXPECT_FLOAT_EQ(b[3], 20 * 0.75f - 6);
    EXPECT_EQ(As<int64_t>(out[2].data), (std::vector<int64_t>{3, 9}));
  }
}

TEST(FieldAugment, InstanceMasksFollowTheCropAndFlipAndTheirBoxes) {
  // Plane k is box k's rectangle filled: after any crop and flip, each kept
  // plane is the crop of its own plane (as a mask is), and its pixels lie in
  // its kept box; dropped boxes take their planes with them.
  const int H = 120, W = 160;
  std::vector<float> boxes = {10,  20,  70,  90,    // kept by the crop below
                              100, 5,   150, 60,    // kept
                              0,   100, 8,   118};  // outside the crop: dropped
  std::vector<uint8_t> planes(3 * H * W, 0);
  for (int k = 0; k < 3; ++k)
    for (int y = static_cast<int>(boxes[k * 4 + 1]); y < boxes[k * 4 + 3]; ++y)
      for (int x = static_cast<int>(boxes[k * 4]); x < boxes[k * 4 + 2]; ++x)
        planes[(k * H + y) * W + x] = 1;
  std::vector<int64_t> classes = {4, 5, 6};
  std::vector<FieldView> in = {
      View("masks", FieldKind::kInstanceMasks, "|u1", {3, H, W}, planes.data(), planes.size()),
      View("boxes", FieldKind::kBoxes, "<f4", {3, 4}, boxes.data(), boxes.size() * 4),
      View("classes", FieldKind::kClasses, "<i8", {3}, classes.data(), classes.size() * 8)};
  for (bool flip : {false, true}) {
    CropBox box{4, 6, 100, 150, flip};
    std::vector<Field> out;
    ASSERT_TRUE(RenderFields(in, box, H, W, 64, 96, 0.25, &out).ok());
    ASSERT_EQ(out[0].dtype, "|u1");
    ASSERT_EQ(out[0].shape, (std::vector<uint64_t>{2, 64, 96}));
    EXPECT_EQ(As<int64_t>(out[2].data), (std::vector<int64_t>{4, 5}));
    std::vector<float> kept = As<float>(out[1].data);
    for (int k = 0; k < 2; ++k) {
      cv::Mat plane(H, W, CV_8UC1, planes.data() + k * H * W), ref;
      cv::resize(plane(cv::Rect(box.left, box.top, box.width, box.height)), ref, cv::Size(96, 64),
                 0, 0, cv::INTER_NEAREST);
      if (flip) cv::flip(ref, ref, 1);
      EXPECT_EQ(std::memcmp(out[0].data.data() + k * 64 * 96, ref.data, 64 * 96), 0) << k;
      size_t on = 0;
      for (int y = 0; y < 64; ++y)
        for (int x = 0; x < 96; ++x) {
          if (out[0].data[(k * 64 + y) * 96 + x] == 0) continue;
          // A set pixel lies in its box, give or take the one output pixel
          // nearest sampling (a pixel's corner, OpenCV's pick) moves an edge.
          ++on;
          EXPECT_GE(x + 1, kept[k * 4]);
          EXPECT_LE(x, kept[k * 4 + 2]);
          EXPECT_GE(y + 1, kept[k * 4 + 1]);
          EXPECT_LE(y, kept[k * 4 + 3]);
        }
      EXPECT_GT(on, 100u);
    }
  }
  // Planes that do not match the boxes are an error naming the field.
  in[0].shape = {2, H, W};
  std::vector<Field> out;
  Status s = RenderFields(in, {0, 0, H, W, false}, H, W, H, W, 0.25, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("instance_masks 'masks'"), std::string::npos) << s.message();
}

TEST(FieldAugment, MaskOfAnotherShapeIsAnError) {
  std::vector<uint8_t> m(10 * 12);
  std::vector<Field> out;
  Status s = RenderFields({View("seg", FieldKind::kMask, "|u1", {10, 12}, m.data(), m.size())},
                          {0, 0, 5, 5, false}, 10, 13, 4, 4, 0.25, &out);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("'seg' is |u1 (10,12), its image is (10,13)"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace ssdfeed

namespace ssdfeed {
namespace {

// A view of runs (EncodeMaskRle) of a |u1 field.
FieldView RleView(const FieldView& raw, std::string* runs) {
  uint64_t width = raw.shape.back();
  EncodeMaskRle(raw.data, raw.size / width, width, runs);
  FieldView v = raw;
  v.data = reinterpret_cast<const uint8_t*>(runs->data());
  v.size = runs->size();
  v.codec = FieldCodec::kRle;
  return v;
}

// A mask or instance masks stored as runs render to the very bytes their
// raw form does, under crops, flips, scale-jitter windows and dropped boxes.
TEST(FieldAugment, RunLengthMasksRenderAsTheirRawForm) {
  const int H = 90, W = 120;
  std::vector<uint8_t> mask(H * W), planes(3 * H * W, 0);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) mask[y * W + x] = static_cast<uint8_t>((x / 17 + y / 11) % 5);
  std::vector<float> boxes = {10, 20, 70, 80, 100, 5, 118, 60, 0, 85, 4, 89};
  for (int k = 0; k < 3; ++k)
    for (int y = static_cast<int>(boxes[k * 4 + 1]); y < boxes[k * 4 + 3]; ++y)
      for (int x = static_cast<int>(boxes[k * 4]); x < boxes[k * 4 + 2]; ++x)
        planes[(k * H + y) * W + x] = 1;
  std::vector<FieldView> raw = {
      View("mask", FieldKind::kMask, "|u1", {H, W}, mask.data(), mask.size()),
      View("masks", FieldKind::kInstanceMasks, "|u1", {3, H, W}, planes.data(), planes.size()),
      View("boxes", FieldKind::kBoxes, "<f4", {3, 4}, boxes.data(), boxes.size() * 4)};
  std::string r0, r1;
  std::vector<FieldView> runs = {RleView(raw[0], &r0), RleView(raw[1], &r1), raw[2]};
  EXPECT_LT(r0.size() * 3, mask.size());
  CropBox window{0, 0, 64, 96, false};
  window.resize_h = 80;
  window.resize_w = 110;
  window.top = -5;
  window.left = 3;
  window.mask_fill = 9;
  std::vector<std::tuple<CropBox, int, int>> boxes_out = {
      {{4, 6, 70, 100, false}, 64, 96},
      {{4, 6, 70, 100, true}, 64, 96},
      {{30, 50, 20, 30, false}, 64, 96},  // enlarged: rows repeat
      {{0, 0, H, W, true}, 45, 60},       // shrunk
      {window, 64, 96}};
  for (const auto& [box, oh, ow] : boxes_out) {
    std::vector<Field> want, got;
    ASSERT_TRUE(RenderFields(raw, box, H, W, oh, ow, 0.25, &want).ok());
    ASSERT_TRUE(RenderFields(runs, box, H, W, oh, ow, 0.25, &got).ok());
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].shape, want[i].shape) << i;
      EXPECT_EQ(got[i].data, want[i].data) << i << " box " << box.top << "," << box.left;
    }
  }
}

}  // namespace
}  // namespace ssdfeed
