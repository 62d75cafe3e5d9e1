// Sources with fields: WebDataset members by extension, TFRecord features
// by key (object detection API, DeepLab), files: pairs by {stem} and coco:.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "source/tfrecord_format.h"
#include "ssdfeed/env.h"
#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using Members = std::vector<std::pair<std::string, std::string>>;

void WriteTar(const std::string& path, const Members& members) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, path.c_str());
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

void WriteFile(const std::string& path, const std::string& data) {
  ASSERT_EQ(test::RunCommand("mkdir -p '" + path.substr(0, path.find_last_of('/')) + "'"), 0);
  std::ofstream(path, std::ios::binary) << data;
}

const EncodedField* FieldOf(const EncodedSample& s, const std::string& name) {
  for (const auto& f : s.fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> Names(const std::vector<FieldSpec>& fields) {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

std::vector<float> Floats(const std::string& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<int64_t> Ints(const std::string& b) {
  std::vector<int64_t> v(b.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

SourceOptions WithFields(std::vector<FieldSpec> fields, OnError on_error = OnError::kRaise) {
  SourceOptions o;
  o.fields = std::move(fields);
  o.on_error = on_error;
  return o;
}

// --- tar ------------------------------------------------------------------

Members SegShard() {
  return {{"a.jpg", "JPG-A"},      {"a.seg.png", "MASK-A"}, {"a.cls", "3\n"},
          {"a.npy", "NPY-A"},      {"a.json", "{\"a\":1}"}, {"b.jpg", "JPG-B"},
          {"b.seg.png", "MASK-B"}, {"b.cls", "4"},          {"b.npy", "NPY-B"},
          {"b.json", "{}"}};
}

TEST(TarFields, MembersByExtensionFormOneSample) {
  test::TempDir dir;
  WriteTar(dir.Sub("s.tar"), SegShard());
  auto src =
      OpenSource("tar:" + dir.Sub("s.tar"), WithFields({{"image", FieldKind::kAuto, "jpg"},
                                                        {"mask", FieldKind::kAuto, "seg.png"},
                                                        {"label", FieldKind::kAuto, "cls"},
                                                        {"depth", FieldKind::kAuto, "npy"},
                                                        {"meta", FieldKind::kAuto, "json"}}));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  auto schema = (*src)->fields();
  EXPECT_EQ(Names(schema), (std::vector<std::string>{"image", "mask", "label", "depth", "meta"}));
  EXPECT_EQ(schema[1].kind, FieldKind::kMask);
  EXPECT_EQ(schema[2].kind, FieldKind::kLabel);
  EXPECT_EQ(schema[3].kind, FieldKind::kArray);
  EXPECT_EQ(schema[4].kind, FieldKind::kBytes);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "JPG-B");
  EXPECT_EQ(s.label, 4);
  ASSERT_EQ(s.fields.size(), 3u);  // the label travels in EncodedSample::label
  EXPECT_EQ(FieldOf(s, "mask")->bytes, "MASK-B");
  EXPECT_EQ(FieldOf(s, "mask")->kind, FieldKind::kMask);
  EXPECT_NE(FieldOf(s, "mask")->origin.find("b.seg.png"), std::string::npos);
  EXPECT_EQ(FieldOf(s, "depth")->bytes, "NPY-B");
  EXPECT_EQ(FieldOf(s, "meta")->bytes, "{}");
}

TEST(TarFields, URIQueryGivesTheFieldsAndTheImageComesFirst) {
  test::TempDir dir;
  WriteTar(dir.Sub("s.tar"), SegShard());
  auto src = OpenSource("tar:" + dir.Sub("s.tar") + "?mask=seg.png&extra:bytes=json");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  // NAME:KIND as --field takes it; only the image is added.
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "mask", "extra"}));
  EXPECT_EQ((*src)->fields()[2].kind, FieldKind::kBytes);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.bytes, "JPG-A");
  EXPECT_EQ(s.label, -1);  // no label asked for
  EXPECT_EQ(FieldOf(s, "mask")->bytes, "MASK-A");
}

TEST(TarFields, MissingFieldNamesSampleAndFieldOrIsSkippedAndCounted) {
  test::TempDir dir;
  Members m = SegShard();
  m.erase(m.begin() + 6);  // b.seg.png
  WriteTar(dir.Sub("s.tar"), m);
  std::vector<FieldSpec> f = {{"mask", FieldKind::kAuto, "seg.png"}};
  auto bad = OpenSource("tar:" + dir.Sub("s.tar"), WithFields(f));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sample 'b' has no member for field 'mask' (b.seg.png)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find(dir.Sub("s.tar")), std::string::npos);
  auto skip = OpenSource("tar:" + dir.Sub("s.tar"), WithFields(f, OnError::kSkip));
  ASSERT_TRUE(skip.ok()) << skip.status().ToString();
  EXPECT_EQ((*skip)->size(), 1u);
  EXPECT_EQ((*skip)->skipped(), 1u);
  ASSERT_EQ((*skip)->skipped_reasons().size(), 1u);
  EXPECT_NE((*skip)->skipped_reasons()[0].find("'b'"), std::string::npos);
}

TEST(TarFields, DefaultStaysClassicAndIdentityCoversTheFields) {
  test::TempDir dir;
  WriteTar(dir.Sub("s.tar"), SegShard());
  std::string uri = "tar:" + dir.Sub("s.tar");
  auto classic = OpenSource(uri);
  ASSERT_TRUE(classic.ok());
  EXPECT_EQ(Names((*classic)->fields()), (std::vector<std::string>{"image", "label"}));
  EncodedSample s;
  ASSERT_TRUE((*classic)->Read(0, &s).ok());
  EXPECT_TRUE(s.fields.empty());
  EXPECT_EQ(s.label, 3);
  auto m1 = OpenSource(uri, WithFields({{"mask", FieldKind::kAuto, "seg.png"}}));
  auto m2 = OpenSource(uri, WithFields({{"mask", FieldKind::kAuto, "json"}}));
  auto m3 = OpenSource(uri, WithFields({{"seg", FieldKind::kAuto, "seg.png"}}));
  ASSERT_TRUE(m1.ok() && m2.ok() && m3.ok());
  EXPECT_NE((*classic)->identity(), (*m1)->identity());
  EXPECT_NE((*m1)->identity(), (*m2)->identity());
  EXPECT_NE((*m1)->identity(), (*m3)->identity());
}

TEST(TarFields, AlternativesAndBadLabelAndDuplicateNames) {
  test::TempDir dir;
  WriteTar(dir.Sub("s.tar"), {{"a.png", "PNG-A"}, {"a.cls", "x"}, {"b.jpeg", "JPG-B"}});
  auto src = OpenSource("tar:" + dir.Sub("s.tar"),
                        WithFields({{"image", FieldKind::kAuto, "jpg;jpeg;png"}}));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->size(), 2u);
  auto bad = OpenSource("tar:" + dir.Sub("s.tar"),
                        WithFields({{"label", FieldKind::kAuto, "cls"}}, OnError::kRaise));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a.cls (field 'label') is not a decimal label"),
            std::string::npos)
      << bad.status().message();
  auto dup = OpenSource("tar:" + dir.Sub("s.tar"),
                        WithFields({{"m", FieldKind::kAuto, "a"}, {"m", FieldKind::kAuto, "b"}}));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("'m' is given twice"), std::string::npos);
}

TEST(TarFields, MembersTogetherOrFarApartReadTheSame) {
  test::TempDir dir;
  std::string big(1 << 20, 'x');  // a member no field asks for, between two that are
  WriteTar(dir.Sub("s.tar"), {{"a.jpg", "JPG-A"},
                              {"a.bin", big},
                              {"a.seg.png", "MASK-A"},
                              {"b.jpg", "JPG-B"},
                              {"b.seg.png", "MASK-B"}});
  auto src = OpenSource("tar:" + dir.Sub("s.tar") + "?mask=seg.png");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EncodedSample s;
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE((*src)->Read(i, &s).ok());
    EXPECT_EQ(s.bytes, i == 0 ? "JPG-A" : "JPG-B");
    EXPECT_EQ(s.fields[0].bytes, i == 0 ? "MASK-A" : "MASK-B");
  }
}

// --- tfrecord -------------------------------------------------------------

ExampleFeature Bytes(const std::string& key, const std::string& v) {
  return {ExampleFeature::kBytes, key, {v}, {}, {}};
}
ExampleFeature Floats(const std::string& key, std::vector<float> v) {
  return {ExampleFeature::kFloat, key, {}, std::move(v), {}};
}
ExampleFeature Int64s(const std::string& key, std::vector<int64_t> v) {
  return {ExampleFeature::kInt64, key, {}, {}, std::move(v)};
}

std::string OdExample(const std::string& image, std::vector<float> xmin, std::vector<int64_t> cls,
                      bool mask) {
  std::vector<float> ymin, xmax, ymax;
  for (float x : xmin) {
    ymin.push_back(x / 2);
    xmax.push_back(x + 0.25f);
    ymax.push_back(x / 2 + 0.5f);
  }
  std::vector<ExampleFeature> f = {
      Bytes("image/encoded", image),          Bytes("image/format", "jpeg"),
      Floats("image/object/bbox/xmin", xmin), Floats("image/object/bbox/ymin", ymin),
      Floats("image/object/bbox/xmax", xmax), Floats("image/object/bbox/ymax", ymax),
      Int64s("image/object/class/label", cls)};
  if (mask) f.push_back(Bytes("image/segmentation/class/encoded", "PNG-" + image));
  return SerializeFeatures(f);
}

void WriteRecords(const std::string& path, const std::vector<std::string>& records) {
  WritableFileOptions wo;
  wo.truncate = true;
  auto f = Env::Default()->NewWritableFile(path, wo);
  ASSERT_TRUE(f.ok());
  for (const auto& r : records) ASSERT_TRUE(AppendTFRecord(f->get(), r).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(TFRecordFields, ObjectDetectionApiIsDetectedFromTheFirstRecord) {
  test::TempDir dir;
  WriteRecords(dir.Sub("od.tfrecord"),
               {OdExample("I0", {0.1f, 0.5f}, {1, 7}, true), OdExample("I1", {}, {}, true)});
  auto src = OpenSource("tfrecord:" + dir.Sub("od.tfrecord"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Names((*src)->fields()),
            (std::vector<std::string>{"image", "boxes", "classes", "mask"}));
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.bytes, "I0");
  const EncodedField* boxes = FieldOf(s, "boxes");
  ASSERT_NE(boxes, nullptr);
  EXPECT_TRUE(boxes->normalized);
  EXPECT_EQ(Floats(boxes->bytes),
            (std::vector<float>{0.1f, 0.05f, 0.35f, 0.55f, 0.5f, 0.25f, 0.75f, 0.75f}));
  EXPECT_EQ(Ints(FieldOf(s, "classes")->bytes), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(FieldOf(s, "mask")->bytes, "PNG-I0");
  EXPECT_EQ(FieldOf(s, "mask")->kind, FieldKind::kMask);
  EXPECT_NE(FieldOf(s, "mask")->origin.find("record 0"), std::string::npos);
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_TRUE(FieldOf(s, "boxes")->bytes.empty());
  EXPECT_TRUE(FieldOf(s, "classes")->bytes.empty());
}

TEST(TFRecordFields, ADamagedFirstRecordLeavesDetectionToTheNext) {
  test::TempDir dir;
  std::string path = dir.Sub("od.tfrecord");
  WriteRecords(path, {OdExample("I0", {0.1f}, {1}, false), OdExample("I1", {0.2f}, {2}, false)});
  std::string bytes;
  ASSERT_TRUE(Env::Default()->ReadFileToString(path, &bytes).ok());
  bytes[12 + 3] ^= 0x40;  // inside record 0's payload: its data CRC no longer matches
  WriteFile(path, bytes);
  auto src = OpenSource("tfrecord:" + path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "boxes", "classes"}));
  EncodedSample s;
  EXPECT_TRUE((*src)->Read(0, &s).IsCorruption());
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(Ints(FieldOf(s, "classes")->bytes), (std::vector<int64_t>{2}));
}

TEST(TFRecordFields, ClassicExamplesStayClassic) {
  test::TempDir dir;
  WriteRecords(dir.Sub("c.tfrecord"), {SerializeExample("IMG", 5)});
  auto src = OpenSource("tfrecord:" + dir.Sub("c.tfrecord"));
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "label"}));
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.label, 5);
  EXPECT_TRUE(s.fields.empty());
}

TEST(TFRecordFields, RequestedKeysAndAMissingFeatureNamesKeyAndRecord) {
  test::TempDir dir;
  WriteRecords(
      dir.Sub("d.tfrecord"),
      {SerializeFeatures({Bytes("image/encoded", "I0"), Bytes("depth", "NPY0"),
                          Int64s("image/class/label", {2})}),
       SerializeFeatures({Bytes("image/encoded", "I1"), Int64s("image/class/label", {3})})});
  std::string uri = "tfrecord:" + dir.Sub("d.tfrecord");
  auto src = OpenSource(
      uri, WithFields({{"label", FieldKind::kAuto, ""}, {"depth", FieldKind::kArray, "depth"}}));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "label", "depth"}));
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.label, 2);
  EXPECT_EQ(FieldOf(s, "depth")->bytes, "NPY0");
  Status st = (*src)->Read(1, &s);
  ASSERT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("no feature 'depth' (field 'depth')"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("record 1"), std::string::npos) << st.message();
  auto classic = OpenSource(uri);
  ASSERT_TRUE(classic.ok());
  EXPECT_NE((*classic)->identity(), (*src)->identity());
}

// A box_floats field reads a float_list, one value per box; absent: no
// objects.
TEST(TFRecordFields, BoxFloatsAreAFloatList) {
  test::TempDir dir;
  WriteRecords(dir.Sub("od.tfrecord"), {OdExample("I0", {0.1f, 0.5f}, {1, 7}, false),
                                        SerializeFeatures({Bytes("image/encoded", "I1")})});
  auto src = OpenSource("tfrecord:" + dir.Sub("od.tfrecord"),
                        WithFields({{"boxes", FieldKind::kAuto, "image/object/bbox/"},
                                    {"xmin", FieldKind::kBoxFloats, "image/object/bbox/xmin"}}));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(Floats(FieldOf(s, "xmin")->bytes), (std::vector<float>{0.1f, 0.5f}));
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_TRUE(FieldOf(s, "xmin")->bytes.empty());
}

TEST(TFRecordFields, UnequalBoxListsAreCorruption) {
  test::TempDir dir;
  WriteRecords(
      dir.Sub("b.tfrecord"),
      {SerializeFeatures(
          {Bytes("image/encoded", "I0"), Floats("image/object/bbox/xmin", {0.1f, 0.2f}),
           Floats("image/object/bbox/ymin", {0.1f}), Floats("image/object/bbox/xmax", {0.3f, 0.4f}),
           Floats("image/object/bbox/ymax", {0.3f, 0.4f})})});
  auto src = OpenSource("tfrecord:" + dir.Sub("b.tfrecord"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EncodedSample s;
  Status st = (*src)->Read(0, &s);
  ASSERT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("image/object/bbox/ymin has 1"), std::string::npos) << st.message();
}

// --- files: ---------------------------------------------------------------

TEST(FilesSource, VocPairsInSortedStemOrder) {
  test::TempDir dir;
  for (std::string stem : {"2007_000033", "2007_000032"}) {
    WriteFile(dir.Sub("JPEGImages/" + stem + ".jpg"), "JPG" + stem);
    WriteFile(dir.Sub("SegmentationClass/" + stem + ".png"), "PNG" + stem);
  }
  std::string uri =
      "files:" + dir.path() + "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png";
  auto src = OpenSource(uri);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "mask"}));
  EXPECT_EQ((*src)->fields()[1].kind, FieldKind::kMask);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.bytes, "JPG2007_000032");
  ASSERT_EQ(s.fields.size(), 1u);
  EXPECT_EQ(s.fields[0].bytes, "PNG2007_000032");
  EXPECT_EQ(s.fields[0].origin, dir.Sub("SegmentationClass/2007_000032.png"));
}

TEST(FilesSource, CityscapesStemsSpanFolders) {
  test::TempDir dir;
  for (std::string stem : {"aachen/aachen_000000_000019", "bochum/bochum_000000_000313"}) {
    WriteFile(dir.Sub("leftImg8bit/train/" + stem + "_leftImg8bit.png"), "IMG" + stem);
    WriteFile(dir.Sub("gtFine/train/" + stem + "_gtFine_labelIds.png"), "LBL" + stem);
    WriteFile(dir.Sub("gtFine/train/" + stem + "_gtFine_color.png"), "unused");
  }
  auto src = OpenSource("files:" + dir.path() +
                        "?image=leftImg8bit/train/{stem}_leftImg8bit.png"
                        "&mask=gtFine/train/{stem}_gtFine_labelIds.png");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "IMGbochum/bochum_000000_000313");
  EXPECT_EQ(s.fields[0].bytes, "LBLbochum/bochum_000000_000313");
  EXPECT_NE((*src)->Describe(1).find("bochum/bochum_000000_000313"), std::string::npos);
}

TEST(FilesSource, AdeLayoutWithALabelFile) {
  test::TempDir dir;
  WriteFile(dir.Sub("images/training/ADE_train_00000001.jpg"), "JPG");
  WriteFile(dir.Sub("annotations/training/ADE_train_00000001.png"), "PNG");
  WriteFile(dir.Sub("labels/ADE_train_00000001.txt"), "12\n");
  auto src = OpenSource("files:" + dir.path() +
                        "?image=images/training/{stem}.jpg&mask=annotations/training/{stem}.png"
                        "&label=labels/{stem}.txt");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.label, 12);
  ASSERT_EQ(s.fields.size(), 1u);
  EXPECT_EQ(s.fields[0].name, "mask");
}

TEST(FilesSource, MissingFieldNamesStemAndFieldOrIsSkippedNamedAndCounted) {
  test::TempDir dir;
  WriteFile(dir.Sub("JPEGImages/a.jpg"), "A");
  WriteFile(dir.Sub("JPEGImages/b.jpg"), "B");
  WriteFile(dir.Sub("SegmentationClass/a.png"), "MA");
  std::string uri =
      "files:" + dir.path() + "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png";
  auto bad = OpenSource(uri);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stem 'b' has no 'mask' file (" +
                                        dir.Sub("SegmentationClass/b.png") + ")"),
            std::string::npos)
      << bad.status().message();
  SourceOptions o;
  o.on_error = OnError::kSkip;
  auto skip = OpenSource(uri, o);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ((*skip)->size(), 1u);
  EXPECT_EQ((*skip)->skipped(), 1u);
  ASSERT_EQ((*skip)->skipped_reasons().size(), 1u);
  EXPECT_NE((*skip)->skipped_reasons()[0].find("stem 'b'"), std::string::npos);
}

TEST(FilesSource, IdentityCoversPatternsAndEveryFile) {
  test::TempDir dir;
  WriteFile(dir.Sub("img/a.jpg"), "A");
  WriteFile(dir.Sub("seg/a.png"), "MA");
  WriteFile(dir.Sub("seg2/a.png"), "MA");
  std::string base = "files:" + dir.path() + "?image=img/{stem}.jpg&mask=";
  auto one = OpenSource(base + "seg/{stem}.png");
  auto two = OpenSource(base + "seg2/{stem}.png");
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_NE((*one)->identity(), (*two)->identity());
  std::string before = (*one)->identity();
  WriteFile(dir.Sub("seg/a.png"), "MASK-CHANGED");
  auto again = OpenSource(base + "seg/{stem}.png");
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->identity(), before);
}

TEST(FilesSource, BadPatternsAndS3AreClearErrors) {
  test::TempDir dir;
  WriteFile(dir.Sub("img/a.jpg"), "A");
  auto no_stem = OpenSource("files:" + dir.path() + "?image=img/a.jpg");
  ASSERT_FALSE(no_stem.ok());
  EXPECT_NE(no_stem.status().message().find("holding {stem} once"), std::string::npos);
  auto no_image = OpenSource("files:" + dir.path() + "?mask=img/{stem}.jpg");
  ASSERT_FALSE(no_image.ok());
  EXPECT_NE(no_image.status().message().find("no image field"), std::string::npos);
  auto s3 = OpenSource("files:s3://bucket/voc?image=JPEGImages/{stem}.jpg");
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.status().message().find("not supported"), std::string::npos);
}

// A VOC-like tree: four stems, ImageSets/Segmentation/{train,val}.txt.
std::string MakeVocSplits(const test::TempDir& dir) {
  for (std::string stem : {"2007_000032", "2007_000033", "2007_000039", "2007_000042"}) {
    WriteFile(dir.Sub("JPEGImages/" + stem + ".jpg"), "JPG" + stem);
    WriteFile(dir.Sub("SegmentationClass/" + stem + ".png"), "PNG" + stem);
  }
  WriteFile(dir.Sub("ImageSets/Segmentation/train.txt"), "2007_000039\r\n2007_000032\n\n");
  WriteFile(dir.Sub("ImageSets/Segmentation/val.txt"), "2007_000033\n2007_000042  \n");
  return "files:" + dir.path() + "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png";
}

std::vector<std::string> Images(const Source& src) {
  std::vector<std::string> out;
  for (size_t i = 0; i < src.size(); ++i) {
    EncodedSample s;
    EXPECT_TRUE(src.Read(i, &s).ok());
    out.push_back(s.bytes);
  }
  return out;
}

TEST(FilesSource, SplitFileServesItsStemsInSortedOrder) {
  test::TempDir dir;
  std::string uri = MakeVocSplits(dir);
  auto train = OpenSource(uri + "&split=ImageSets/Segmentation/train.txt");
  auto val = OpenSource(uri + "&split=ImageSets/Segmentation/val.txt");
  auto all = OpenSource(uri);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  ASSERT_TRUE(val.ok() && all.ok());
  EXPECT_EQ(Images(**train), (std::vector<std::string>{"JPG2007_000032", "JPG2007_000039"}));
  EXPECT_EQ(Images(**val), (std::vector<std::string>{"JPG2007_000033", "JPG2007_000042"}));
  EXPECT_EQ((*all)->size(), 4u);
  EXPECT_NE((*train)->identity(), (*val)->identity());
  EXPECT_NE((*train)->identity(), (*all)->identity());
  EncodedSample s;
  ASSERT_TRUE((*train)->Read(1, &s).ok());
  EXPECT_EQ(s.fields[0].bytes, "PNG2007_000039");
  // The same stems as a list (the Python stems= argument): the same source.
  SourceOptions o;
  o.stems = {"2007_000039", "2007_000032"};
  auto listed = OpenSource(uri, o);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ((*listed)->identity(), (*train)->identity());
  auto both = OpenSource(uri + "&split=ImageSets/Segmentation/train.txt", o);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("give one"), std::string::npos);
}

TEST(FilesSource, SplitStemWithoutFilesOrBadLinesAreNamed) {
  test::TempDir dir;
  std::string uri = MakeVocSplits(dir);
  WriteFile(dir.Sub("ImageSets/Segmentation/train.txt"), "2007_000032\n2007_000099\n");
  auto missing = OpenSource(uri + "&split=ImageSets/Segmentation/train.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("stem '2007_000099' has no 'image' file (" +
                                            dir.Sub("JPEGImages/2007_000099.jpg")),
            std::string::npos)
      << missing.status().message();
  SourceOptions skip;
  skip.on_error = OnError::kSkip;
  auto skipped = OpenSource(uri + "&split=ImageSets/Segmentation/train.txt", skip);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ((*skipped)->size(), 1u);
  EXPECT_EQ((*skipped)->skipped(), 1u);
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"2007_000032\n2008_000008 -1\n", "line 2: '2008_000008 -1' is not one stem"},
           {"2007_000032\n2007_000032\n", "line 2: stem '2007_000032' is listed twice"},
           {"../JPEGImages/2007_000032\n", "line 1: stem '../JPEGImages/2007_000032'"},
           {"\n\n", "lists no stem"}}) {
    WriteFile(dir.Sub("ImageSets/Segmentation/bad.txt"), b.text);
    auto bad = OpenSource(uri + "&split=ImageSets/Segmentation/bad.txt");
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_NE(bad.status().message().find(dir.Sub("ImageSets/Segmentation/bad.txt")),
              std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(b.says), std::string::npos) << bad.status().message();
  }
  auto absent = OpenSource(uri + "&split=ImageSets/Segmentation/nope.txt");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("nope.txt"), std::string::npos);
  EXPECT_FALSE(OpenSource(uri + "&split=../train.txt").ok());
  SourceOptions twice;
  twice.stems = {"2007_000032", "2007_000032"};
  EXPECT_FALSE(OpenSource(uri, twice).ok());
}

// --- coco: ----------------------------------------------------------------

const char* kCoco = R"({
  "images": [
    {"id": 20, "file_name": "b.jpg", "width": 100, "height": 80},
    {"id": 10, "file_name": "a.jpg", "width": 64, "height": 48},
    {"id": 30, "file_name": "c.jpg", "width": 10, "height": 10}],
  "categories": [{"id": 7, "name": "cat"}, {"id": 1, "name": "person"},
                 {"id": 3, "name": "car"}],
  "annotations": [
    {"id": 1, "image_id": 20, "category_id": 7, "bbox": [10, 20, 30, 40], "iscrowd": 0},
    {"id": 2, "image_id": 10, "category_id": 1, "bbox": [1.5, 2, 3, 4], "iscrowd": 0},
    {"id": 3, "image_id": 20, "category_id": 3, "bbox": [0, 0, 100, 80], "iscrowd": 1},
    {"id": 4, "image_id": 20, "category_id": 3, "bbox": [5, 5, 10, 10]}]
})";

std::string MakeCoco(const test::TempDir& dir) {
  for (std::string f : {"a.jpg", "b.jpg", "c.jpg"}) WriteFile(dir.Sub("images/" + f), "JPG" + f);
  WriteFile(dir.Sub("ann.json"), kCoco);
  return "coco:" + dir.Sub("images") + "?annotations=" + dir.Sub("ann.json");
}

TEST(CocoSource, BoxesClassesMapAndOrder) {
  test::TempDir dir;
  auto src = OpenSource(MakeCoco(dir));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 3u);
  EXPECT_EQ(Names((*src)->fields()), (std::vector<std::string>{"image", "boxes", "classes"}));
  auto cats = (*src)->categories();
  ASSERT_EQ(cats.size(), 3u);
  EXPECT_EQ(cats[0].id, 1);
  EXPECT_EQ(cats[1].id, 3);
  EXPECT_EQ(cats[2].name, "cat");
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());  // a.jpg: sorted by file name
  EXPECT_EQ(s.bytes, "JPGa.jpg");
  EXPECT_EQ(Floats(FieldOf(s, "boxes")->bytes), (std::vector<float>{1.5f, 2, 4.5f, 6}));
  EXPECT_FALSE(FieldOf(s, "boxes")->normalized);
  EXPECT_EQ(Ints(FieldOf(s, "classes")->bytes), (std::vector<int64_t>{0}));
  ASSERT_TRUE((*src)->Read(1, &s).ok());  // b.jpg: the crowd box left out
  EXPECT_EQ(Floats(FieldOf(s, "boxes")->bytes), (std::vector<float>{10, 20, 40, 60, 5, 5, 15, 15}));
  EXPECT_EQ(Ints(FieldOf(s, "classes")->bytes), (std::vector<int64_t>{2, 1}));
  ASSERT_TRUE((*src)->Read(2, &s).ok());  // c.jpg: no annotations, still a sample
  EXPECT_TRUE(FieldOf(s, "boxes")->bytes.empty());
}

TEST(CocoSource, CrowdOnRequestChangesTheIdentity) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  auto plain = OpenSource(uri);
  auto crowd = OpenSource(uri + "&crowd=1");
  SourceOptions o;
  o.coco_crowd = true;
  auto by_option = OpenSource(uri, o);
  ASSERT_TRUE(plain.ok() && crowd.ok() && by_option.ok());
  EXPECT_NE((*plain)->identity(), (*crowd)->identity());
  EXPECT_EQ((*crowd)->identity(), (*by_option)->identity());
  EncodedSample s;
  ASSERT_TRUE((*crowd)->Read(1, &s).ok());
  EXPECT_EQ(Ints(FieldOf(s, "classes")->bytes), (std::vector<int64_t>{2, 1, 1}));
}

TEST(CocoSource, CategoryMapIsPartOfTheIdentity) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  auto before = OpenSource(uri);
  ASSERT_TRUE(before.ok());
  std::string text = kCoco;
  text.replace(text.find("\"cat\""), 5, "\"dog\"");
  WriteFile(dir.Sub("ann.json"), text);
  auto after = OpenSource(uri);
  ASSERT_TRUE(after.ok());
  EXPECT_NE((*before)->identity(), (*after)->identity());
}

TEST(CocoSource, MissingImageAndBadJsonAreNamed) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  ASSERT_EQ(::unlink(dir.Sub("images/b.jpg").c_str()), 0);
  auto bad = OpenSource(uri);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("image id 20"), std::string::npos)
      << bad.status().message();
  SourceOptions o;
  o.on_error = OnError::kSkip;
  auto skip = OpenSource(uri, o);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ((*skip)->size(), 2u);
  EXPECT_EQ((*skip)->skipped(), 1u);
  WriteFile(dir.Sub("ann.json"), "{\"images\": [{\"id\": 1}]}");
  auto broken = OpenSource(uri);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(dir.Sub("ann.json")), std::string::npos);
  EXPECT_TRUE(broken.status().IsCorruption()) << broken.status().ToString();
  WriteFile(dir.Sub("ann.json"),
            R"({"images": [{"id": 1, "file_name": "a.jpg"}], "categories": [],
                "annotations": [{"id": 9, "image_id": 1, "category_id": 4, "bbox": [0,0,1,1]}]})");
  auto unknown = OpenSource(uri);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("annotation id 9 names category id 4"),
            std::string::npos)
      << unknown.status().message();
}

// image_id and iscrowd on request: by the URI's fields= or by
// SourceOptions::fields naming the COCO key; iscrowd has one value per box.
TEST(CocoSource, ImageIdAndIscrowdOnRequest) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  auto plain = OpenSource(uri);
  auto asked = OpenSource(uri + "&crowd=1&fields=image_id,iscrowd");
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(Names((*asked)->fields()),
            (std::vector<std::string>{"image", "boxes", "classes", "image_id", "iscrowd"}));
  EXPECT_EQ((*asked)->fields()[3].kind, FieldKind::kLabel);
  EXPECT_EQ((*asked)->fields()[4].kind, FieldKind::kClasses);
  EXPECT_NE((*plain)->identity(), (*asked)->identity());
  EncodedSample s;
  ASSERT_TRUE((*asked)->Read(1, &s).ok());  // b.jpg: id 20, annotations 1, 3 (crowd), 4
  EXPECT_EQ(Ints(FieldOf(s, "image_id")->bytes), (std::vector<int64_t>{20}));
  EXPECT_EQ(Ints(FieldOf(s, "iscrowd")->bytes), (std::vector<int64_t>{0, 1, 0}));
  ASSERT_TRUE((*asked)->Read(2, &s).ok());  // c.jpg: no annotations
  EXPECT_EQ(Ints(FieldOf(s, "image_id")->bytes), (std::vector<int64_t>{30}));
  EXPECT_TRUE(FieldOf(s, "iscrowd")->bytes.empty());
  auto named = OpenSource(uri, WithFields({{"id", FieldKind::kAuto, "image_id"}}));
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  ASSERT_TRUE((*named)->Read(0, &s).ok());
  EXPECT_EQ(Ints(FieldOf(s, "id")->bytes), (std::vector<int64_t>{10}));
  auto unknown = OpenSource(uri + "&fields=image_id,score");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("COCO key 'score'"), std::string::npos)
      << unknown.status().message();
  auto kind = OpenSource(uri, WithFields({{"iscrowd", FieldKind::kBytes, "iscrowd"}}));
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("is a classes field"), std::string::npos)
      << kind.status().message();
}

// area on request: one float32 per box, as the json gives it (a
// box_floats field); asked for, an annotation without one is an error.
TEST(CocoSource, AreaOnRequest) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  auto missing = OpenSource(uri + "&fields=area");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("annotation id 1 has no area"), std::string::npos)
      << missing.status().message();
  WriteFile(dir.Sub("ann.json"),
            R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
                "categories": [{"id": 4, "name": "x"}],
                "annotations": [
                  {"id": 9, "image_id": 2, "category_id": 4, "bbox": [0,0,2,3], "area": 5.25},
                  {"id": 8, "image_id": 2, "category_id": 4, "bbox": [1,1,2,2], "area": 4}]})");
  auto src = OpenSource(uri + "&fields=area,iscrowd");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->fields()[3].kind, FieldKind::kBoxFloats);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(Floats(FieldOf(s, "area")->bytes), (std::vector<float>{5.25f, 4}));
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_TRUE(FieldOf(s, "area")->bytes.empty());
  WriteFile(dir.Sub("ann.json"),
            R"({"images": [{"id": 1, "file_name": "a.jpg"}], "categories": [{"id": 4}],
                "annotations": [{"id": 7, "image_id": 1, "category_id": 4, "bbox": [0,0,1,1],
                                 "area": 1e300}]})");
  auto huge = OpenSource(uri + "&fields=area");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("annotation id 7 area"), std::string::npos)
      << huge.status().message();
  EXPECT_TRUE(OpenSource(uri).ok());  // not asked for: not read
}

// masks on request: each kept annotation's segmentation rasterised at the
// json's height x width (an instance_masks field, one plane per box). The
// expected planes are pycocotools' annToMask of the same annotations: a
// polygon, two polygons of one instance, an uncompressed RLE and a crowd's
// compressed RLE (whose counts hold negative differences).
TEST(CocoSource, MasksOnRequestAreWhatPycocotoolsRasterises) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  WriteFile(dir.Sub("ann.json"),
            R"({"images": [{"id": 1, "file_name": "a.jpg", "height": 5, "width": 6},
                           {"id": 2, "file_name": "b.jpg", "height": 5, "width": 6}],
                "categories": [{"id": 4, "name": "x"}],
                "annotations": [
                  {"id": 1, "image_id": 1, "category_id": 4, "bbox": [1,1,3,2],
                   "segmentation": [[1,1,4,1,4,3,1,3]]},
                  {"id": 2, "image_id": 1, "category_id": 4, "bbox": [0,0,6,5],
                   "segmentation": [[0,0,2,0,0,2],[5,3,6,5,3,5]]},
                  {"id": 3, "image_id": 1, "category_id": 4, "bbox": [0,0,6,5],
                   "segmentation": {"size": [5,6], "counts": [3,4,20,3]}},
                  {"id": 4, "image_id": 1, "category_id": 4, "bbox": [0,0,6,5], "iscrowd": 1,
                   "segmentation": {"size": [5,6], "counts": "0180I2100000O"}}]})");
  auto src = OpenSource(uri + "&fields=masks&crowd=1");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->fields()[3].kind, FieldKind::kInstanceMasks);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  const std::string want =  // four 5x6 planes, row-major
      "000000"
      "011100"
      "011100"
      "000000"
      "000000"  // polygon
      "100000"
      "000000"
      "000000"
      "000010"
      "000111"  // two polygons
      "010000"
      "010000"
      "000001"
      "100001"
      "100001"  // RLE counts
      "100000"
      "001111"
      "001111"
      "001111"
      "010000";  // compressed RLE
  std::string got = FieldOf(s, "masks")->bytes;
  ASSERT_GE(got.size(), 8u);
  EXPECT_EQ(got.substr(0, 8), std::string("\x05\0\0\0\x06\0\0\0", 8));  // uint32 H, W
  got.erase(0, 8);
  for (char& c : got) c = static_cast<char>('0' + c);
  EXPECT_EQ(got, want);
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(FieldOf(s, "masks")->bytes.size(), 8u);  // no boxes: no planes
  // Without crowd=1 the crowd's plane goes with its box.
  src = OpenSource(uri + "&fields=masks");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(FieldOf(s, "masks")->bytes.size(), 8 + 3u * 30);
}

// A segmentation that is not COCO's, or an image without its size, is an
// error naming the json and the annotation (or image).
TEST(CocoSource, BadSegmentationsAreNamedErrors) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  struct Case {
    std::string image, segmentation, says;
  };
  const std::string img = R"({"id": 1, "file_name": "a.jpg", "height": 5, "width": 6})";
  for (const Case& c : std::vector<Case>{
           {R"({"id": 1, "file_name": "a.jpg"})", "[[0,0,1,0,1,1]]", "image id 1 has no height"},
           {img, "7", "annotation id 9 segmentation is neither"},
           {img, "[[0,0,1,0]]", "annotation id 9 segmentation holds [0,0,1,0]"},
           {img, R"([[0,0,1,0,1,"a"]])", "annotation id 9 segmentation holds coordinate"},
           {img, R"({"size": [6,5], "counts": [30]})", "RLE size [6,5] is not its image's [5, 6]"},
           {img, R"({"size": [5,6], "counts": [3,4]})", "RLE runs cover 7 pixels"},
           {img, R"({"size": [5,6], "counts": "0~"})", "not COCO's compressed encoding"}}) {
    WriteFile(dir.Sub("ann.json"),
              "{\"images\": [" + c.image + R"(], "categories": [{"id": 4}], "annotations": [)" +
                  R"({"id": 9, "image_id": 1, "category_id": 4, "bbox": [0,0,1,1],)" +
                  " \"segmentation\": " + c.segmentation + "}]}");
    auto src = OpenSource(uri + "&fields=masks");
    ASSERT_FALSE(src.ok()) << c.segmentation;
    EXPECT_NE(src.status().message().find(c.says), std::string::npos) << src.status().message();
    EXPECT_NE(src.status().message().find("ann.json"), std::string::npos) << src.status().message();
    EXPECT_TRUE(OpenSource(uri).ok());  // not asked for: not read
  }
}

// Ids and boxes beyond what int64 / float32 hold (1e30, 9.3e18, 1e300)
// would be undefined conversions: each is an error naming the json file and
// the image, category or annotation. (1e999 does not even parse: the json
// reader's overflow error names the file.)
TEST(CocoSource, OutOfRangeNumbersAreNamedErrors) {
  test::TempDir dir;
  std::string uri = MakeCoco(dir);
  struct Case {
    std::string image, category, ann, says;
  };
  const std::string img = R"({"id": 1, "file_name": "a.jpg"})";
  const std::string cat = R"({"id": 4, "name": "x"})";
  const std::string ann = R"({"id": 9, "image_id": 1, "category_id": 4, "bbox": [0,0,1,1]})";
  auto open = [&](const Case& c) {
    WriteFile(dir.Sub("ann.json"), "{\"images\": [" + c.image + "], \"categories\": [" +
                                       c.category + "], \"annotations\": [" + c.ann + "]}");
    return OpenSource(uri);
  };
  for (const Case& c : std::vector<Case>{
           {R"({"id": 1e30, "file_name": "a.jpg"})", cat, "", "image id 1e+30"},
           {R"({"id": -9.3e18, "file_name": "a.jpg"})", cat, "", "image id -9.3e+18"},
           {R"({"id": 9223372036854775808, "file_name": "a.jpg"})", cat, "", "image id"},
           {R"({"id": -1e999, "file_name": "a.jpg"})", cat, "", "number overflow"},
           {R"({"id": 1.5, "file_name": "a.jpg"})", cat, "", "image id 1.5"},
           {img, R"({"id": 1e30, "name": "x"})", "", "category id 1e+30"},
           {img, cat, R"({"id": 9, "image_id": 1e30, "category_id": 4, "bbox": [0,0,1,1]})",
            "annotation id 9 image_id"},
           {img, cat, R"({"id": 9, "image_id": 1, "category_id": 1e19, "bbox": [0,0,1,1]})",
            "annotation id 9 category_id"},
           {img, cat, R"({"id": 9, "image_id": 1, "category_id": 4, "bbox": [1e300,0,1,1]})",
            "annotation id 9 bbox"},
           {img, cat, R"({"id": 9, "image_id": 1, "category_id": 4, "bbox": [0,-1e39,1,1]})",
            "annotation id 9 bbox"},
           {img, cat, R"({"id": 9, "image_id": 1, "category_id": 4, "bbox": [3e38,0,3e38,1]})",
            "annotation id 9 bbox"}}) {
    auto src = open(c);
    ASSERT_FALSE(src.ok()) << c.image << " " << c.category << " " << c.ann;
    EXPECT_TRUE(src.status().IsCorruption()) << src.status().ToString();
    EXPECT_NE(src.status().message().find(dir.Sub("ann.json")), std::string::npos)
        << src.status().message();
    EXPECT_NE(src.status().message().find(c.says), std::string::npos) << src.status().message();
  }
  auto integral = open({R"({"id": 1.0, "file_name": "a.jpg"})", cat, ann, ""});
  ASSERT_TRUE(integral.ok()) << integral.status().ToString();
}

}  // namespace
}  // namespace ssdfeed
