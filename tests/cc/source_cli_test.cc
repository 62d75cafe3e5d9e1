// The fields of a source on the command line (--field, inspect) and in the
// entry key that reopens the source for verify and import.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipeline/entry_key.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

std::string Cli(const std::string& args, int* rc) {
  std::string out;
  *rc = test::RunCommand(test::CliPath() + " " + args + " 2>&1", &out);
  return out;
}

// The shards of the wds-seg dataset without its fields, quoted for a shell.
std::string Shards(const std::string& uri) {
  std::string out = "'";
  out.append(uri, 0, uri.find('?'));
  out.push_back('\'');
  return out;
}

std::string SegDataset(const test::TempDir& dir) {
  return test::MakeTestDataset({.dir = dir.Sub("seg"),
                                .format = "wds-seg",
                                .count = 6,
                                .classes = 3,
                                .shard_size = 4,
                                .min_side = 32,
                                .max_side = 40});
}

TEST(SourceCli, FieldFlagsReachTheSourceAndItsEntry) {
  test::TempDir dir;
  std::string uri = SegDataset(dir);
  ASSERT_FALSE(uri.empty());
  std::string shards = Shards(uri);
  int rc = 0;
  std::string classic = Cli("entry-id --source " + shards, &rc);
  ASSERT_EQ(rc, 0) << classic;
  std::string with_mask = Cli("entry-id --source " + shards + " --field mask=seg.png", &rc);
  ASSERT_EQ(rc, 0) << with_mask;
  std::string as_array = Cli("entry-id --source " + shards + " --field mask:array=seg.png", &rc);
  ASSERT_EQ(rc, 0) << as_array;
  EXPECT_NE(classic, with_mask);
  EXPECT_NE(with_mask, as_array);
  std::string out =
      Cli("inspect --json --samples 1 --source " + shards + " --field depth:array=npy", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["fields"].size(), 2u);
  EXPECT_EQ(j["fields"][1]["name"], "depth");
  EXPECT_EQ(j["fields"][1]["kind"], "array");
  EXPECT_EQ(j["samples"][0]["fields"]["depth"]["kind"], "array");
}

TEST(SourceCli, BadFieldFlagsAreUsageErrors) {
  test::TempDir dir;
  std::string uri = SegDataset(dir);
  std::string shards = Shards(uri);
  int rc = 0;
  std::string out = Cli("inspect --source " + shards + " --field mask", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("expected NAME=KEY"), std::string::npos) << out;
  out = Cli("inspect --source " + shards + " --field mask:shape=seg.png", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("field kind must be 'image', 'mask'"), std::string::npos) << out;
  EXPECT_NE(out.find("not 'shape'"), std::string::npos) << out;
  // A kind said outright wins over what the name and key imply.
  out = Cli("inspect --source " + shards + " --field mask:bytes=seg.png", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"kind\": \"bytes\""), std::string::npos) << out;
}

TEST(SourceCli, EntryKeyKeepsFieldsAndCrowdAndClassicKeysStayAsTheyWere) {
  test::TempDir dir;
  std::string uri = SegDataset(dir);
  SourceOptions so;
  so.fields = {{"mask", FieldKind::kMask, "seg.png"}, {"depth", FieldKind::kArray, "npy"}};
  so.coco_crowd = true;
  auto src = OpenSource(uri.substr(0, uri.find('?')), so);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EntryKey key = MakeEntryKey(**src, so, PrepareSpec{});
  PrepareSpec spec;
  SourceOptions back;
  ASSERT_TRUE(ParsePrepareJson(key.prepare_json, &spec, &back).ok());
  ASSERT_EQ(back.fields.size(), 2u);
  EXPECT_EQ(back.fields[1].name, "depth");
  EXPECT_EQ(back.fields[1].kind, FieldKind::kArray);
  EXPECT_EQ(back.fields[1].key, "npy");
  EXPECT_TRUE(back.coco_crowd);
  auto classic = OpenSource(uri.substr(0, uri.find('?')));
  ASSERT_TRUE(classic.ok());
  std::string json = MakeEntryKey(**classic, {}, PrepareSpec{}).prepare_json;
  EXPECT_EQ(json.find("fields"), std::string::npos) << json;
  EXPECT_EQ(json.find("coco_crowd"), std::string::npos) << json;
}

}  // namespace
}  // namespace ssdfeed
