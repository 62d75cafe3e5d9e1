// folder:, files: and coco: follow symlinks only while they stay inside the
// source's root: a link out of it (a caption linked to the reader's
// credentials by whoever can write a shared dataset folder) is refused,
// naming the file and its target, both when the source lists its files and
// when it reads one later, unless the user opts in with follow_links=1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

void WriteFile(const std::string& path, const std::string& data) {
  ASSERT_EQ(test::RunCommand("mkdir -p '" + path.substr(0, path.find_last_of('/')) + "'"), 0);
  std::ofstream(path, std::ios::binary) << data;
}

void Link(const std::string& target, const std::string& at) {
  ASSERT_EQ(test::RunCommand("mkdir -p '" + at.substr(0, at.find_last_of('/')) + "'"), 0);
  ASSERT_EQ(::symlink(target.c_str(), at.c_str()), 0) << at;
}

// The refusal names the file, the link's target and the opt-in.
void ExpectRefused(const Status& st, const std::string& file, const std::string& target) {
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_NE(st.message().find(file), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(target), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("follow_links=1"), std::string::npos) << st.message();
}

// A dataset root beside a folder of the reader's own files.
struct Tree {
  test::TempDir dir;
  std::string root = dir.Sub("data");
  std::string secret = dir.Sub("home/.ssh/id_rsa");
  Tree() {
    WriteFile(secret, "PRIVATE KEY");
    WriteFile(dir.Sub("home/photo.jpg"), "PRIVATE PHOTO");
  }
  std::string In(const std::string& rel) const { return root + "/" + rel; }
};

// --- files: ----------------------------------------------------------------

std::string VocUri(const Tree& t, const std::string& extra = "") {
  return "files:" + t.root +
         "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png"
         "&caption=captions/{stem}.txt" +
         extra;
}

void MakeVoc(const Tree& t) {
  for (std::string stem : {"a", "b"}) {
    WriteFile(t.In("JPEGImages/" + stem + ".jpg"), "JPG" + stem);
    WriteFile(t.In("SegmentationClass/" + stem + ".png"), "PNG" + stem);
    WriteFile(t.In("captions/" + stem + ".txt"), "caption " + stem);
  }
}

TEST(FilesLinks, CaptionOrMaskLinkedOutOfRootIsRefused) {
  for (std::string field : {"captions/b.txt", "SegmentationClass/b.png"}) {
    Tree t;
    MakeVoc(t);
    ASSERT_EQ(::unlink(t.In(field).c_str()), 0);
    Link(t.secret, t.In(field));
    auto src = OpenSource(VocUri(t));
    ExpectRefused(src.status(), t.In(field), t.secret);
    SourceOptions skip;  // not a missing file: skipping would hide it
    skip.on_error = OnError::kSkip;
    EXPECT_FALSE(OpenSource(VocUri(t), skip).ok());
  }
}

TEST(FilesLinks, ImageOrFolderLinkedOutOfRootIsRefused) {
  Tree t;
  MakeVoc(t);
  Link(t.dir.Sub("home/photo.jpg"), t.In("JPEGImages/c.jpg"));
  ExpectRefused(OpenSource(VocUri(t)).status(), t.In("JPEGImages/c.jpg"),
                t.dir.Sub("home/photo.jpg"));
  ASSERT_EQ(::unlink(t.In("JPEGImages/c.jpg").c_str()), 0);
  Link(t.dir.Sub("home"), t.In("JPEGImages/more"));  // a folder: never walked
  ExpectRefused(OpenSource(VocUri(t)).status(), t.In("JPEGImages/more"), t.dir.Sub("home"));
}

TEST(FilesLinks, DotDotInAPatternIsRefusedToo) {
  Tree t;
  MakeVoc(t);
  WriteFile(t.dir.Sub("home/a.txt"), "outside");
  WriteFile(t.dir.Sub("home/b.txt"), "outside");
  auto src =
      OpenSource("files:" + t.root + "?image=JPEGImages/{stem}.jpg&caption=../home/{stem}.txt");
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(t.dir.Sub("home")), std::string::npos)
      << src.status().message();
}

TEST(FilesLinks, LinksInsideRootAndALinkedRootAreFollowed) {
  Tree t;
  MakeVoc(t);
  WriteFile(t.In("shared/b.txt"), "shared caption");
  ASSERT_EQ(::unlink(t.In("captions/b.txt").c_str()), 0);
  Link("../shared/b.txt", t.In("captions/b.txt"));           // relative, inside
  Link(t.In("JPEGImages/a.jpg"), t.In("JPEGImages/c.jpg"));  // absolute, inside
  WriteFile(t.In("SegmentationClass/c.png"), "PNGc");
  WriteFile(t.In("captions/c.txt"), "caption c");
  Link(t.root, t.dir.Sub("voc"));  // the root itself through a link
  for (std::string root : {t.root, t.dir.Sub("voc")}) {
    auto src = OpenSource("files:" + root +
                          "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png"
                          "&caption=captions/{stem}.txt");
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    ASSERT_EQ((*src)->size(), 3u);
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(1, &s).ok());
    EXPECT_EQ(s.fields[1].bytes, "shared caption");
    ASSERT_TRUE((*src)->Read(2, &s).ok());
    EXPECT_EQ(s.bytes, "JPGa");
  }
}

// Images at the root itself ({stem}.jpg, no folder in the pattern): the root
// is where the source is confined, not a path that leads out of it.
TEST(FilesLinks, FilesAtTheRootItselfAreListed) {
  Tree t;
  for (std::string stem : {"a", "b"}) {
    WriteFile(t.In(stem + ".jpg"), "JPG" + stem);
    WriteFile(t.In(stem + ".txt"), "caption " + stem);
  }
  auto src = OpenSource("files:" + t.root + "?image={stem}.jpg&caption={stem}.txt");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "JPGb");
}

TEST(FilesLinks, FollowLinksOptInReadsThem) {
  Tree t;
  MakeVoc(t);
  ASSERT_EQ(::unlink(t.In("captions/b.txt").c_str()), 0);
  Link(t.secret, t.In("captions/b.txt"));
  SourceOptions follow;
  follow.follow_links = true;
  for (bool by_uri : {true, false}) {
    auto src = by_uri ? OpenSource(VocUri(t, "&follow_links=1")) : OpenSource(VocUri(t), follow);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EncodedSample s;
    ASSERT_TRUE((*src)->Read(1, &s).ok());
    EXPECT_EQ(s.fields[1].bytes, "PRIVATE KEY");
  }
  EXPECT_FALSE(OpenSource(VocUri(t, "&follow_links=2")).ok());
}

// A link swapped in after the source listed its files: the read refuses it.
TEST(FilesLinks, LinkSwappedInAfterOpenIsRefusedOnRead) {
  Tree t;
  MakeVoc(t);
  auto src = OpenSource(VocUri(t));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_EQ(::unlink(t.In("captions/b.txt").c_str()), 0);
  Link(t.secret, t.In("captions/b.txt"));
  EncodedSample s;
  Status st = (*src)->Read(1, &s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(t.In("captions/b.txt")), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(t.secret), std::string::npos) << st.message();
  for (const auto& f : s.fields) EXPECT_EQ(f.bytes.find("PRIVATE"), std::string::npos);
  ASSERT_TRUE((*src)->Read(0, &s).ok());  // the others still read
}

// --- coco: -----------------------------------------------------------------

std::string MakeCoco(const Tree& t, const std::string& b_name = "b.jpg") {
  WriteFile(t.In("images/a.jpg"), "JPGa");
  WriteFile(t.dir.Sub("ann.json"),
            R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": ")" + b_name +
                R"("}], "categories": [{"id": 1, "name": "x"}], "annotations": []})");
  return "coco:" + t.In("images") + "?annotations=" + t.dir.Sub("ann.json");
}

TEST(CocoLinks, ImageLinkedOutOfImagesDirIsRefused) {
  Tree t;
  std::string uri = MakeCoco(t);
  Link(t.dir.Sub("home/photo.jpg"), t.In("images/b.jpg"));
  auto src = OpenSource(uri);
  ExpectRefused(src.status(), t.In("images/b.jpg"), t.dir.Sub("home/photo.jpg"));
  EXPECT_NE(src.status().message().find("image id 2"), std::string::npos);
  auto follow = OpenSource(uri + "&follow_links=1");
  ASSERT_TRUE(follow.ok()) << follow.status().ToString();
  EncodedSample s;
  ASSERT_TRUE((*follow)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "PRIVATE PHOTO");
}

TEST(CocoLinks, FolderLinkedOutOrDotDotInFileNameIsRefused) {
  Tree t;
  std::string uri = MakeCoco(t, "sub/photo.jpg");
  Link(t.dir.Sub("home"), t.In("images/sub"));
  ExpectRefused(OpenSource(uri).status(), t.In("images/sub/photo.jpg"),
                t.dir.Sub("home/photo.jpg"));
  for (std::string name : {"../../home/photo.jpg", "a/../../../home/photo.jpg"}) {
    auto src = OpenSource(MakeCoco(t, name) + "&follow_links=1");
    ASSERT_FALSE(src.ok()) << name;
    EXPECT_NE(src.status().message().find("not a relative path inside IMAGES_DIR"),
              std::string::npos)
        << src.status().message();
  }
}

TEST(CocoLinks, LinkInsideImagesDirIsFollowed) {
  Tree t;
  std::string uri = MakeCoco(t);
  Link("a.jpg", t.In("images/b.jpg"));
  auto src = OpenSource(uri);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "JPGa");
}

// --- folder: ---------------------------------------------------------------

TEST(FolderLinks, ImageOrClassFolderLinkedOutOfRootIsRefused) {
  Tree t;
  WriteFile(t.In("cat/1.jpg"), "JPG1");
  Link(t.dir.Sub("home/photo.jpg"), t.In("cat/2.jpg"));
  ExpectRefused(OpenSource("folder:" + t.root).status(), t.In("cat/2.jpg"),
                t.dir.Sub("home/photo.jpg"));
  ASSERT_EQ(::unlink(t.In("cat/2.jpg").c_str()), 0);
  Link(t.dir.Sub("home"), t.In("dog"));
  ExpectRefused(OpenSource("folder:" + t.root).status(), t.In("dog"), t.dir.Sub("home"));
  for (std::string q : {"?follow_links=1", "?allow_empty=1&follow_links=1"}) {
    auto src = OpenSource("folder:" + t.root + q);
    ASSERT_TRUE(src.ok()) << q << ": " << src.status().ToString();
    EXPECT_EQ((*src)->size(), 2u);
  }
  EXPECT_FALSE(OpenSource("folder:" + t.root + "?follow_links=yes").ok());
}

TEST(FolderLinks, LinksInsideRootAreFollowed) {
  Tree t;
  WriteFile(t.In("all/1.jpg"), "JPG1");
  WriteFile(t.In("cat/2.jpg"), "JPG2");
  Link("../all/1.jpg", t.In("cat/1.jpg"));
  Link(t.In("cat"), t.In("kitten"));  // a class folder linked inside
  auto src = OpenSource("folder:" + t.root);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->size(), 5u);  // all/1, cat/1, cat/2, kitten/1, kitten/2
  EncodedSample s;
  ASSERT_TRUE((*src)->Read(1, &s).ok());
  EXPECT_EQ(s.bytes, "JPG1");
}

}  // namespace
}  // namespace ssdfeed
