#include "ssdfeed/source.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <fstream>
#include <set>

#include "source/tfrecord_format.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/image.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

MakeDatasetReport Make(const std::string& dir, const std::string& format, size_t count,
                       double corrupt = 0, size_t shard = 16) {
  MakeDatasetOptions o;
  o.dir = dir;
  o.format = format;
  o.count = count;
  o.classes = 4;
  o.seed = 7;
  o.corrupt = corrupt;
  o.shard_size = shard;
  o.min_side = 40;
  o.max_side = 80;
  MakeDatasetReport r;
  Status s = MakeDataset(o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

class AllFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(AllFormats, EnumeratesDecodesAndLabels) {
  test::TempDir dir;
  auto r = Make(dir.path(), GetParam(), 40);
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 40u);
  Decoder dec;
  std::set<int64_t> labels;
  for (size_t i = 0; i < (*src)->size(); ++i) {
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(i, &s).ok()) << (*src)->Describe(i);
    Image img;
    ASSERT_TRUE(dec.Decode(s.bytes, false, 0, 0, &img).ok()) << (*src)->Describe(i);
    EXPECT_GE(img.height, 40);
    EXPECT_LE(img.width, 80);
    labels.insert(s.label);
  }
  EXPECT_EQ(labels, (std::set<int64_t>{0, 1, 2, 3}));
}

TEST_P(AllFormats, SampleOrderAndLabelsMatchTheGenerator) {
  test::TempDir dir;
  auto r = Make(dir.path(), GetParam(), 20);
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok());
  std::string prev;
  for (size_t i = 0; i < 20; ++i) {
    // Shards keep generation order; a folder is sorted by class, then name.
    size_t gen = i;
    if (GetParam() == "folder") {
      std::string path = (*src)->Describe(i);
      EXPECT_LT(prev, path) << "folder order must be sorted";
      prev = path;
      gen = std::stoul(path.substr(path.rfind("img_") + 4, 8));
    }
    Image img;
    int label = -1;
    GenerateImage(7, gen, 4, 40, 80, &img, &label);
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(i, &s).ok());
    EXPECT_EQ(s.label, label) << i;
  }
}

TEST_P(AllFormats, IdentityChangesWhenAFileChanges) {
  test::TempDir dir;
  auto r = Make(dir.path(), GetParam(), 20);
  auto a = OpenSource(r.uri);
  auto b = OpenSource(r.uri);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->identity(), (*b)->identity());
  // Touch one input file with an older mtime.
  std::string path = (*a)->Describe(0);
  path = path.substr(0, path.find(' '));
  struct utimbuf t {
    1000000, 1000000
  };
  ASSERT_EQ(::utime(path.c_str(), &t), 0);
  auto c = OpenSource(r.uri);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)->identity(), (*c)->identity());
}

INSTANTIATE_TEST_SUITE_P(Source, AllFormats, ::testing::Values("folder", "tfrecord", "tar"));

TEST(Glob, BraceRanges) {
  test::TempDir dir;
  for (int i = 0; i < 4; ++i) std::ofstream(dir.Sub("s-0" + std::to_string(i) + ".tar")) << "x";
  auto files = ExpandGlob(dir.Sub("s-{00..02}.tar"));
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 3u);
  EXPECT_EQ(Basename((*files)[2]), "s-02.tar");
  auto missing = ExpandGlob(dir.Sub("nothing-*.tar"));
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(Source, UnknownKindIsAClearError) {
  auto s = OpenSource("s3x:bucket");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown source kind"), std::string::npos);
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteAll(const std::string& p, const std::string& d) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << d;
}

TEST(TFRecord, BadDataCrcNamesFileAndRecord) {
  test::TempDir dir;
  auto r = Make(dir.path(), "tfrecord", 10, 0, 10);
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok());
  std::string file = dir.Sub("train-00000-of-00001.tfrecord");
  std::string d = ReadAll(file);
  // Flip a byte inside record 3's payload.
  std::vector<RecordSpan> spans;
  size_t skipped = 0;
  auto rf = Env::Default()->NewRandomAccessFile(file);
  ASSERT_TRUE(ScanTFRecordFile(**rf, OnError::kRaise, &spans, &skipped).ok());
  d[spans[3].data_offset + spans[3].length / 2] ^= 0x40;
  WriteAll(file, d);
  auto src2 = OpenSource(r.uri);
  ASSERT_TRUE(src2.ok());
  EncodedSample s;
  Status st = (*src2)->Read(3, &s);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find(file + " record 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bad data CRC"), std::string::npos);
  EXPECT_TRUE((*src2)->Read(4, &s).ok());
}

TEST(TFRecord, CutShortFailsOpenOrIsSkipped) {
  test::TempDir dir;
  auto r = Make(dir.path(), "tfrecord", 10, 0, 10);
  std::string file = dir.Sub("train-00000-of-00001.tfrecord");
  std::string d = ReadAll(file);
  WriteAll(file, d.substr(0, d.size() - 100));
  auto src = OpenSource(r.uri);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(file + " record 9"), std::string::npos)
      << src.status().message();
  EXPECT_NE(src.status().message().find("cut short"), std::string::npos);
  SourceOptions o;
  o.on_error = OnError::kSkip;
  auto skip = OpenSource(r.uri, o);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ((*skip)->size(), 9u);
  EXPECT_EQ((*skip)->skipped(), 1u);
}

TEST(TFRecord, BadLengthCrcFailsOpen) {
  test::TempDir dir;
  auto r = Make(dir.path(), "tfrecord", 5, 0, 5);
  std::string file = dir.Sub("train-00000-of-00001.tfrecord");
  std::string d = ReadAll(file);
  d[9] ^= 1;  // record 0's length CRC
  WriteAll(file, d);
  auto src = OpenSource(r.uri);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("record 0: bad length CRC"), std::string::npos)
      << src.status().message();
}

TEST(TFRecord, CustomKeys) {
  EncodedSample s;
  std::string ex = SerializeExample("imgbytes", 42);
  ASSERT_TRUE(ParseExample(ex, {}, &s).ok());
  EXPECT_EQ(s.bytes, "imgbytes");
  EXPECT_EQ(s.label, 42);
  Status st = ParseExample(ex, {"jpeg", ""}, &s);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("jpeg"), std::string::npos);
  EXPECT_TRUE(ParseExample("\xff\xff\xff", {}, &s).IsCorruption());
}

void WriteTarWith(const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& members) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, path.c_str());
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, data.size());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

TEST(Tar, UnsafeMemberPathIsRefusedAndNeverWritten) {
  test::TempDir dir;
  Image img;
  img.Reset(8, 8, 3);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img, 90, &jpg).ok());
  WriteTarWith(dir.Sub("evil.tar"), {{"a.jpg", jpg}, {"a.cls", "1"}, {"../../etc/x.jpg", jpg}});
  auto src = OpenSource("tar:" + dir.Sub("evil.tar"));
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("unsafe member path '../../etc/x.jpg'"), std::string::npos)
      << src.status().message();
  EXPECT_NE(src.status().message().find(dir.Sub("evil.tar")), std::string::npos);
  SourceOptions o;
  o.on_error = OnError::kSkip;
  auto skip = OpenSource("tar:" + dir.Sub("evil.tar"), o);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ((*skip)->size(), 1u);
  EncodedSample s;
  ASSERT_TRUE((*skip)->Read(0, &s).ok());
  EXPECT_EQ(s.bytes, jpg);
  EXPECT_EQ(s.label, 1);
}

TEST(Tar, LongNamesAndGrouping) {
  test::TempDir dir;
  std::string longdir(150, 'd');
  WriteTarWith(dir.Sub("t.tar"), {{longdir + "/k1.jpg", "JPEGDATA1"},
                                  {longdir + "/k1.cls", "3\n"},
                                  {"k2.seg.png", "PNGDATA"},
                                  {"k2.json", "{}"}});
  auto src = OpenSource("tar:" + dir.Sub("t.tar"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(0, &s).ok());
  EXPECT_EQ(s.bytes, "JPEGDATA1");
  EXPECT_EQ(s.label, 3);
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "PNGDATA");
  EXPECT_EQ(s.label, -1);
}

TEST(Tar, CompressedShardIsAClearError) {
  test::TempDir dir;
  WriteAll(dir.Sub("x.tar"), std::string("\x1f\x8b\x08\x00garbage", 12));
  auto src = OpenSource("tar:" + dir.Sub("x.tar"));
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(dir.Sub("x.tar")), std::string::npos);
}

TEST(MakeDataset, DeterministicAndCorruptFractionHolds) {
  test::TempDir a, b;
  auto ra = Make(a.path(), "tfrecord", 100, 0.2, 100);
  auto rb = Make(b.path(), "tfrecord", 100, 0.2, 100);
  EXPECT_TRUE(ReadAll(a.Sub("train-00000-of-00001.tfrecord")) ==
              ReadAll(b.Sub("train-00000-of-00001.tfrecord")));
  EXPECT_GT(ra.corrupt, 8u);
  EXPECT_LT(ra.corrupt, 35u);
  auto src = OpenSource(ra.uri);
  ASSERT_TRUE(src.ok());
  Decoder dec;
  size_t bad = 0;
  for (size_t i = 0; i < 100; ++i) {
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(i, &s).ok());
    Image img;
    Status st = dec.Decode(s.bytes, false, 0, 0, &img);
    EXPECT_EQ(!st.ok(), IsCorruptSample(7, i, 0.2)) << i << " " << st.ToString();
    bad += !st.ok();
  }
  EXPECT_EQ(bad, ra.corrupt);
}

}  // namespace
}  // namespace ssdfeed
