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

#include "cache/entry_files.h"
#include "cache/field_section.h"
#include "cache/record_format.h"
#include "image/pixel_codec.h"
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
  for (const char* name :
       {"record", "index", "record-fields", "index-fields", "record-zstd", "index-zstd"})
    ASSERT_EQ(blocks.count(name), 1u) << DocPath() << " lacks " << name;
  EXPECT_EQ(blocks["record"].size(), cf::kRecordHeaderSize + 6);
  EXPECT_EQ(blocks["index"].size(), cf::kIndexEntrySize);
  EXPECT_EQ(blocks["record-fields"].size(), cf::kRecordHeaderSize + 6 + 104);
  EXPECT_EQ(blocks["index-fields"].size(), cf::kIndexEntrySize);
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

// Puts sample id into a fresh entry through the real writer and compares
// its .dat and .idx with the doc's blocks `record` and `index` (+ suffix);
// then the reader must take the doc's bytes back as that sample.
void ExpectDocBytes(uint64_t id, const CachedSample& sample, const std::string& suffix) {
  auto blocks = DocBlocks();
  const std::string& record = blocks["record" + suffix];
  const std::string& index = blocks["index" + suffix];
  ASSERT_FALSE(record.empty() || index.empty()) << DocPath() << " lacks the blocks " << suffix;
  test::TempDir root;
  CacheOptions o;
  o.root = root.path();
  o.capacity_bytes = 1ull << 30;
  EntryKey key;
  key.source_uri = "test:golden";
  key.source_identity = "identity-golden";
  key.spec = "spec";
  key.samples_total = 8;
  if (sample.codec != RecordCodec::kRaw) {  // in an entry whose prepare spec names the codec
    PrepareSpec spec;
    spec.codec = sample.codec;
    key.spec = spec.Canonical();
    key.prepare_json = spec.ToJson();
  }
  auto e = CacheEntry::Open(o, key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->Put(id, sample).ok());
  ASSERT_TRUE((*e)->Sync().ok());
  std::string dat = ReadOnly((*e)->dir(), ".dat"), idx = ReadOnly((*e)->dir(), ".idx");
  EXPECT_EQ(Hex(dat), Hex(record)) << "record bytes differ from " << DocPath();
  EXPECT_EQ(Hex(idx), Hex(index)) << "index entry bytes differ from " << DocPath();
  cf::RecordHeader h;
  ASSERT_EQ(cf::CheckRecord(record.data(), record.size(), id, RulesOf(key), &h), "");
  CachedSample back;
  cf::SampleOf(record.data(), h, &back);
  EXPECT_EQ(back.codec, sample.codec);
  std::vector<uint8_t> decoded(back.bytes());
  PixelCodecScratch scratch;
  ASSERT_TRUE(cf::DecodeSample(&back, decoded.data(), &scratch).ok());
  EXPECT_EQ(back.label, sample.label);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.pixels), back.bytes()),
            std::string(reinterpret_cast<const char*>(sample.pixels), sample.bytes()));
  EXPECT_EQ(Hex(std::string(back.fields)), Hex(std::string(sample.fields)));
  cf::IndexEntry ie;
  ASSERT_TRUE(cf::DecodeIndexEntry(index.data(), &ie));
  EXPECT_EQ(ie.sample_id, id);
  EXPECT_EQ(ie.record_len, record.size());
  EXPECT_EQ(ie.stamp, 2u);
  EXPECT_EQ(ie.record_checksum, h.checksum & 0x00ffffffffffffffull);
}

const uint8_t kPixels[] = {0x0a, 0x14, 0x1e, 0x28, 0x32, 0x3c};

// The doc's image-only sample: its record is as format version 2 wrote it.
TEST(FormatGolden, WriterProducesTheDocsBytes) {
  CachedSample s;
  s.pixels = kPixels;
  s.height = 1;
  s.width = 2;
  s.channels = 3;
  s.label = 3;
  ExpectDocBytes(5, s, "");
}

// The doc's sample with fields: a 1 x 2 mask and one box class.
TEST(FormatGolden, WriterProducesTheDocsBytesWithFields) {
  std::string section;
  std::vector<Field> fields = {
      {"mask", FieldKind::kMask, "|u1", {1, 2}, std::string("\x00\x01", 2)},
      {"classes", FieldKind::kClasses, "<i8", {1}, std::string("\x07\0\0\0\0\0\0\0", 8)}};
  ASSERT_TRUE(cf::EncodeFields(fields, &section).ok());
  ASSERT_EQ(section.size(), 104u);
  CachedSample s;
  s.pixels = kPixels;
  s.height = 1;
  s.width = 2;
  s.channels = 3;
  s.label = 2;
  s.fields = section;
  ExpectDocBytes(6, s, "-fields");
}

// The doc's zstd sample: a 2 x 1 RGB image stored as the Up-filtered rows
// in one zstd frame (docs/cache-format.md, "Codecs").
TEST(FormatGolden, WriterProducesTheDocsBytesForZstd) {
  PixelCodecScratch scratch;
  std::string stored;
  ASSERT_TRUE(EncodePixels(RecordCodec::kZstd, 90, kPixels, 2, 1, 3, &stored, &scratch).ok());
  CachedSample s;
  s.pixels = kPixels;
  s.height = 2;
  s.width = 1;
  s.channels = 3;
  s.label = 4;
  s.codec = RecordCodec::kZstd;
  s.stored = stored;
  ExpectDocBytes(7, s, "-zstd");
}

}  // namespace
}  // namespace ssdfeed
