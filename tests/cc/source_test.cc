#include "ssdfeed/source.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

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
    ASSERT_TRUE(GenerateImage(7, gen, 4, 40, 80, &img, &label).ok());
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

// The smallest sides make-dataset accepts drew ellipse axes from an empty
// range: a negative axis, and OpenCV threw out of the CLI (an abort).
TEST(MakeDataset, TheSmallestSidesMakeImages) {
  for (uint64_t i = 0; i < 300; ++i) {
    Image img;
    int label = -1;
    Status s = GenerateImage(7, i, 4, 16, 29, &img, &label);
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
    EXPECT_GE(img.height, 16);
    EXPECT_LE(img.width, 29);
  }
  test::TempDir dir;
  MakeDatasetOptions o;
  o.dir = dir.path();
  o.format = "folder";
  o.count = 64;
  o.min_side = 16;
  o.max_side = 20;
  MakeDatasetReport r;
  Status s = MakeDataset(o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.samples, 64u);
  Image img;
  int label;
  EXPECT_TRUE(GenerateImage(7, 0, 0, 16, 20, &img, &label).IsInvalidArgument());
  EXPECT_TRUE(GenerateImage(7, 0, 4, 0, 20, &img, &label).IsInvalidArgument());
}

// --- Source identity: labels, same-size rewrites, symlinks -------------------

std::vector<int64_t> Labels(const Source& s) {
  std::vector<int64_t> labels;
  for (size_t i = 0; i < s.size(); ++i) {
    EncodedSample e;
    EXPECT_TRUE(s.Read(i, &e).ok()) << s.Describe(i);
    labels.push_back(e.label);
  }
  return labels;
}

TEST(Folder, EmptyClassFolderIsRefusedNamingIt) {
  test::TempDir dir;
  auto r = Make(dir.path(), "folder", 12);
  // What an unzip made on a Mac leaves: sorts before every class.
  ASSERT_EQ(::mkdir(dir.Sub("__MACOSX").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.Sub("zz_empty").c_str(), 0755), 0);
  auto src = OpenSource(r.uri);
  ASSERT_FALSE(src.ok());
  const std::string& m = src.status().message();
  EXPECT_NE(m.find(dir.path()), std::string::npos) << m;
  EXPECT_NE(m.find("found no valid file for the classes __MACOSX, zz_empty"), std::string::npos)
      << m;
  EXPECT_NE(m.find("allow_empty=1"), std::string::npos) << m;
}

TEST(Folder, AllowedEmptyClassKeepsItsIndexAndChangesTheIdentity) {
  test::TempDir dir;
  auto r = Make(dir.path(), "folder", 12);
  auto before = OpenSource(r.uri);
  ASSERT_TRUE(before.ok());
  std::vector<int64_t> old_labels = Labels(**before);
  ASSERT_EQ(::mkdir(dir.Sub("__MACOSX").c_str(), 0755), 0);
  auto after = OpenSource(r.uri + "?allow_empty=1");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ((*after)->size(), old_labels.size());
  std::vector<int64_t> labels = Labels(**after);
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], old_labels[i] + 1) << i;
  // Same files, new label map: a new identity, so no entry mixes the two.
  EXPECT_NE((*after)->identity(), (*before)->identity());
  EXPECT_EQ((*after)->uri(), r.uri + "?allow_empty=1");
  SourceOptions o;
  o.allow_empty_classes = true;
  auto by_option = OpenSource(r.uri, o);
  ASSERT_TRUE(by_option.ok());
  EXPECT_EQ((*by_option)->identity(), (*after)->identity());
  EXPECT_FALSE(OpenSource(r.uri + "?allow_empty=0").ok());
  auto bad = OpenSource(r.uri + "?allow_empty=maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("allow_empty must be 0 or 1"), std::string::npos);
  EXPECT_FALSE(OpenSource(r.uri + "?colour=1").ok());
}

TEST(Folder, QuestionMarkInAPathIsNotAnOption) {
  test::TempDir dir;
  auto r = Make(dir.Sub("a?b=c/ds"), "folder", 4);
  auto src = OpenSource(r.uri);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->size(), 4u);
}

TEST(Folder, DotFoldersAreClassesAsInImageFolder) {
  // torchvision's find_classes keeps every directory os.scandir lists,
  // hidden ones included.
  test::TempDir dir;
  auto r = Make(dir.path(), "folder", 8);
  auto before = OpenSource(r.uri);
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(::mkdir(dir.Sub(".ipynb_checkpoints").c_str(), 0755), 0);
  auto refused = OpenSource(r.uri);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(".ipynb_checkpoints"), std::string::npos);
  auto after = OpenSource(r.uri + "?allow_empty=1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Labels(**after)[0], Labels(**before)[0] + 1);
}

// Rewrites path in place with the same bytes and sets its mtime back, as
// `cp -p` does: size and mtime are what they were.
void RewriteKeepingSizeAndMtime(const std::string& path) {
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::string data = ReadAll(path);
  // ctime follows the kernel's coarse clock: write again until it moved.
  for (int i = 0; i < 2000; ++i) {
    WriteAll(path, data);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    struct stat after;
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    ASSERT_EQ(after.st_size, before.st_size);
    ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    if (after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
        after.st_ctim.tv_nsec != before.st_ctim.tv_nsec)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL() << "ctime of " << path << " never changed";
}

class Rewrite : public ::testing::TestWithParam<std::string> {};

TEST_P(Rewrite, SameSizeSameMtimeRewriteChangesIdentity) {
  test::TempDir dir;
  auto r = Make(dir.path(), GetParam(), 20);
  auto a = OpenSource(r.uri);
  ASSERT_TRUE(a.ok());
  std::string path = (*a)->Describe(0);
  path = path.substr(0, path.find(' '));
  RewriteKeepingSizeAndMtime(path);
  auto b = OpenSource(r.uri);
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*a)->identity(), (*b)->identity());
}

TEST_P(Rewrite, ReplacedByRenameChangesIdentity) {
  // rsync -t: a new file (new inode) renamed over the old one, mtime kept.
  test::TempDir dir;
  auto r = Make(dir.path(), GetParam(), 20);
  auto a = OpenSource(r.uri);
  ASSERT_TRUE(a.ok());
  std::string path = (*a)->Describe(0);
  path = path.substr(0, path.find(' '));
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  WriteAll(path + ".tmp", ReadAll(path));
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (path + ".tmp").c_str(), times, 0), 0);
  ASSERT_EQ(::rename((path + ".tmp").c_str(), path.c_str()), 0);
  auto b = OpenSource(r.uri);
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*a)->identity(), (*b)->identity());
}

INSTANTIATE_TEST_SUITE_P(Source, Rewrite, ::testing::Values("folder", "tfrecord", "tar"));

TEST(Folder, SymlinkedImagesAndClassFoldersAreReadOnRequest) {
  test::TempDir dir;
  auto r = Make(dir.Sub("all"), "folder", 16);
  auto real = OpenSource(r.uri);
  ASSERT_TRUE(real.ok());
  // A split assembled from links: class 0 is a linked folder, the others
  // real folders of linked images.
  std::vector<std::string> classes;
  ASSERT_TRUE(Env::Default()->GetChildren(dir.Sub("all"), &classes).ok());
  std::sort(classes.begin(), classes.end());
  ASSERT_EQ(::mkdir(dir.Sub("split").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(dir.Sub("all/" + classes[0]).c_str(), dir.Sub("split/" + classes[0]).c_str()),
            0);
  for (size_t c = 1; c < classes.size(); ++c) {
    ASSERT_EQ(::mkdir(dir.Sub("split/" + classes[c]).c_str(), 0755), 0);
    std::vector<std::string> files;
    ASSERT_TRUE(Env::Default()->GetChildren(dir.Sub("all/" + classes[c]), &files).ok());
    for (const auto& f : files)
      ASSERT_EQ(::symlink(dir.Sub("all/" + classes[c] + "/" + f).c_str(),
                          dir.Sub("split/" + classes[c] + "/" + f).c_str()),
                0);
  }
  // The links lead out of split/: followed only on request.
  auto refused = OpenSource("folder:" + dir.Sub("split"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("follow_links=1"), std::string::npos)
      << refused.status().ToString();
  auto split = OpenSource("folder:" + dir.Sub("split") + "?follow_links=1");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ((*split)->size(), (*real)->size());
  for (size_t i = 0; i < (*split)->size(); ++i) {
    EncodedSample a, b;
    Status s = (*split)->Read(i, &a);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE((*real)->Read(i, &b).ok());
    EXPECT_EQ(a.bytes, b.bytes) << i;
    EXPECT_EQ(a.label, b.label) << i;
  }
}

TEST(TFRecord, SymlinkedShardsAreRead) {
  test::TempDir dir;
  auto r = Make(dir.Sub("real"), "tfrecord", 10, 0, 5);
  std::vector<std::string> shards;
  ASSERT_TRUE(Env::Default()->GetChildren(dir.Sub("real"), &shards).ok());
  ASSERT_EQ(::mkdir(dir.Sub("links").c_str(), 0755), 0);
  for (const auto& s : shards)
    ASSERT_EQ(::symlink(dir.Sub("real/" + s).c_str(), dir.Sub("links/" + s).c_str()), 0);
  auto src = OpenSource("tfrecord:" + dir.Sub("links/*.tfrecord"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Labels(**src).size(), 10u);
}

}  // namespace
}  // namespace ssdfeed
