// Pins docs/cache-format.md to the code: its worked example (the exact bytes
// of one record and its index entry) is parsed from the doc and compared byte
// for byte with what a real cache entry writes for the same sample.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/record_format.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/env.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

namespace cf = cache_format;

// One "```ssdfeed-golden NAME" block: lines "OFFSET HEX BYTES... | note".
// Each line's offset must be where the bytes before it end, so the doc's
// offsets are checked as well as its bytes.
Status ParseGoldenLine(const std::string& line, std::string* bytes) {
  std::istringstream in(line.substr(0, line.find('|')));
  size_t offset = 0;
  if (!(in >> offset)) return Status::Corruption("no offset in golden line: " + line);
  if (offset != bytes->size())
    return Status::Corruption("golden line at offset " + std::to_string(offset) + ", expected " +
                              std::to_string(bytes->size()) + ": " + line);
  for (std::string hex; in >> hex;) {
    char* end = nullptr;
    unsigned long b = std::strtoul(hex.c_str(), &end, 16);
    if (hex.size() != 2 || *end != '\0' || b > 255)
      return Status::Corruption("not a hex byte '" + hex + "' in golden line: " + line);
    bytes->push_back(static_cast<char>(b));
  }
  return Status::OK();
}

// Every golden block of a markdown text, by name.
Result<std::map<std::string, std::string>> ParseGoldenBlocks(const std::string& text) {
  const std::string kOpen = "```ssdfeed-golden ";
  std::map<std::string, std::string> blocks;
  std::istringstream in(text);
  std::string line, name;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line.rfind(kOpen, 0) == 0) {
      name = line.substr(kOpen.size());
      if (blocks.count(name)) return Status::Corruption("golden block '" + name + "' twice");
      blocks[name];
      inside = true;
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
    } else if (inside) {
      SSDFEED_RETURN_IF_ERROR(ParseGoldenLine(line, &blocks[name]));
    }
  }
  if (inside) return Status::Corruption("golden block '" + name + "' not closed");
  return blocks;
}

// append, not `std::string(DIR) + "..."`: GCC 12 at -O2 (the TSan build)
// warns a bogus -Warray-bounds on that for a short checkout path (/tmp/ci2).
std::string DocPath() {
  std::string path = SSDFEED_SOURCE_DIR;
  path.append("/docs/cache-format.md");
  return path;
}

std::map<std::string, std::string> DocBlocks() {
  std::string text;
  Status s = Env::Default()->ReadFileToString(DocPath(), &text);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto blocks = ParseGoldenBlocks(text);
  EXPECT_TRUE(blocks.ok()) << DocPath() << ": " << blocks.status().ToString();
  return blocks.ok() ? *blocks : std::map<std::string, std::string>{};
}

std::string Hex(const std::string& b) {
  std::string out;
  char buf[4];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof(buf), "%02x ", c);
    out += buf;
  }
  return out;
}

TEST(FormatGolden, ParserReadsBlocksAndChecksOffsets) {
  auto ok = ParseGoldenBlocks("text\n```ssdfeed-golden a\n0  01 02 | x\n2  ff | y\n```\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["a"], std::string("\x01\x02\xff", 3));
  EXPECT_TRUE(ParseGoldenBlocks("```ssdfeed-golden a\n0 01\n3 02\n```\n").status().IsCorruption());
  EXPECT_TRUE(ParseGoldenBlocks("```ssdfeed-golden a\n0 1g\n```\n").status().IsCorruption());
  EXPECT_TRUE(ParseGoldenBlocks("```ssdfeed-golden a\n0 01\n").status().IsCorruption());
}

TEST(FormatGolden, DocHasTheRecordAndIndexBlocks) {
  auto blocks = DocBlocks();
  ASSERT_EQ(blocks.count("record"), 1u) << DocPath();
  ASSERT_EQ(blocks.count("index"), 1u) << DocPath();
  EXPECT_EQ(blocks["record"].size(), cf::kRecordHeaderSize + 6);
  EXPECT_EQ(blocks["index"].size(), cf::kIndexEntrySize);
}

std::string ReadOnly(const std::string& dir, const std::string& ext) {
  std::vector<std::string> names;
  Status s = Env::Default()->GetChildren(dir, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::string found;
  for (const auto& n : names) {
    if (n.size() <= ext.size() || n.compare(n.size() - ext.size(), ext.size(), ext) != 0) continue;
    EXPECT_TRUE(found.empty()) << "two " << ext << " files in " << dir;
    s = Env::Default()->ReadFileToString(JoinPath(dir, n), &found);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return found;
}

// The doc's sample, put into a fresh entry through the real writer.
TEST(FormatGolden, WriterProducesTheDocsBytes) {
  auto blocks = DocBlocks();
  ASSERT_EQ(blocks.count("record") + blocks.count("index"), 2u);
  test::TempDir root;
  CacheOptions o;
  o.root = root.path();
  o.capacity_bytes = 1ull << 30;
  EntryKey key;
  key.source_uri = "test:golden";
  key.source_identity = "identity-golden";
  key.spec = "spec";
  key.samples_total = 8;
  auto e = CacheEntry::Open(o, key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const uint8_t pixels[] = {0x0a, 0x14, 0x1e, 0x28, 0x32, 0x3c};
  ASSERT_TRUE((*e)->Put(5, 3, pixels, 1, 2, 3).ok());
  ASSERT_TRUE((*e)->Sync().ok());
  std::string dat = ReadOnly((*e)->dir(), ".dat"), idx = ReadOnly((*e)->dir(), ".idx");
  EXPECT_EQ(Hex(dat), Hex(blocks["record"])) << "record bytes differ from " << DocPath();
  EXPECT_EQ(Hex(idx), Hex(blocks["index"])) << "index entry bytes differ from " << DocPath();
  // And the reader takes the doc's bytes back as the same sample.
  cf::RecordHeader h;
  EXPECT_EQ(cf::CheckRecord(blocks["record"].data(), blocks["record"].size(), 5, &h), "");
  cf::IndexEntry ie;
  ASSERT_TRUE(cf::DecodeIndexEntry(blocks["index"].data(), &ie));
  EXPECT_EQ(ie.sample_id, 5u);
  EXPECT_EQ(ie.record_len, blocks["record"].size());
  EXPECT_EQ(ie.stamp, 2u);
  EXPECT_EQ(ie.record_checksum, h.checksum & 0x00ffffffffffffffull);
}

}  // namespace
}  // namespace ssdfeed
