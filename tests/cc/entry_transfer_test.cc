// Portable entries: export / import of one entry as a tar stream, through
// the C++ API (fake samples) and the CLI (a real dataset, pipes, two uids).
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "cache/capacity.h"
#include "cache/entry_files.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

constexpr uint64_t kSamples = 60;

CacheOptions Root(const std::string& dir) {
  CacheOptions o;
  o.root = dir;
  o.capacity_bytes = 64ull << 20;
  o.reserve_chunk = 1 << 20;
  return o;
}

void Fill(const CacheOptions& o, const EntryKey& key, uint64_t from, uint64_t to,
          uint64_t step = 1) {
  auto e = CacheEntry::Open(o, key);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t id = from; id < to; id += step) ASSERT_TRUE(test::PutFake(e->get(), id).ok());
}

Status ExportToFile(const CacheOptions& o, const EntryKey& key, const std::string& path,
                    const ExportOptions& eo = {}, TransferReport* r = nullptr) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  TransferReport local;
  Status s = ExportEntry(o, key.fingerprint(), fd, eo, r ? r : &local);
  ::close(fd);
  return s;
}

Status ImportFile(const CacheOptions& o, const std::string& path, TransferReport* r = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY);
  TransferReport local;
  Status s = ImportEntry(o, fd, {}, r ? r : &local);
  ::close(fd);
  return s;
}

size_t Children(const std::string& dir) {
  std::vector<std::string> names;
  (void)Env::Default()->GetChildren(dir, &names);
  return names.size();
}

// Ids of the entry under o that read back intact and equal to FakePixels;
// -1 if one reads back different.
int64_t IntactFakes(const CacheOptions& o, const EntryKey& key) {
  auto e = CacheEntry::Open(o, key);
  if (!e.ok()) return -1;
  int64_t n = 0;
  for (uint64_t id = 0; id < key.samples_total; ++id) {
    if (!(*e)->Contains(id)) continue;
    if (!test::ReadsBackFake(e->get(), id)) return -1;
    ++n;
  }
  return n;
}

std::string ReadAll(const std::string& path) {
  std::string s;
  EXPECT_TRUE(Env::Default()->ReadFileToString(path, &s).ok());
  return s;
}

void WriteAll(const std::string& path, const std::string& data) {
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, data, 0600).ok());
}

// A plain export stream as its members, in order.
using Members = std::vector<std::pair<std::string, std::string>>;

Members ReadMembers(const std::string& stream) {
  Members out;
  archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, stream.data(), stream.size()), ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data(static_cast<size_t>(archive_entry_size(e)), '\0');
    EXPECT_EQ(archive_read_data(a, data.data(), data.size()), la_ssize_t(data.size()));
    out.emplace_back(archive_entry_pathname(e), std::move(data));
  }
  archive_read_free(a);
  return out;
}

// A records member's records by sample id (each: a 40-byte header with
// its payload length at offset 4 and its id at 8, then the payload).
std::map<uint64_t, std::string> SplitRecords(const std::string& data) {
  std::map<uint64_t, std::string> out;
  for (size_t off = 0; off + 40 <= data.size();) {
    uint32_t payload;
    uint64_t id;
    std::memcpy(&payload, data.data() + off + 4, 4);
    std::memcpy(&id, data.data() + off + 8, 8);
    out[id] = data.substr(off, 40 + payload);
    off += 40 + payload;
  }
  return out;
}

// Writes members as a plain tar with a checksum table that matches them:
// a stream whose producer forged it, not one damaged on the way.
void WriteForged(const std::string& path, Members members) {
  nlohmann::json table = nlohmann::json::array(), old;
  uint64_t records = 0, record_bytes = 0;
  for (auto& [name, data] : members) {
    if (name == "checksums.json") {
      old = nlohmann::json::parse(data);
      continue;
    }
    if (name.rfind("records/", 0) == 0)
      for (const auto& [id, rec] : SplitRecords(data)) records++, record_bytes += rec.size();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(data.data(), data.size())));
    table.push_back({{"name", name}, {"bytes", data.size()}, {"xxh3_64", hex}});
  }
  old["members"] = table;
  old["records"] = records;
  old["record_bytes"] = record_bytes;
  members.back() = {"checksums.json", old.dump(1) + "\n"};
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    archive_entry_free(e);
    ASSERT_EQ(archive_write_data(a, data.data(), data.size()), la_ssize_t(data.size()));
  }
  archive_write_close(a);
  archive_write_free(a);
}

// Sum of the sizes of every file under dir.
uint64_t BytesUnder(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) n += it->file_size();
  return n;
}

TEST(EntryTransfer, RoundTripIntoAnEmptyRootPlainAndZstd) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  for (bool zstd : {false, true}) {
    ExportOptions eo;
    eo.zstd = zstd;
    std::string stream = d.Sub(zstd ? "s.tar.zst" : "s.tar");
    TransferReport ex;
    ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, stream, eo, &ex).ok());
    EXPECT_EQ(ex.records, kSamples);
    std::string b = d.Sub(zstd ? "bz" : "b");
    TransferReport im;
    Status s = ImportFile(Root(b), stream, &im);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(im.entry, key.fingerprint());
    EXPECT_EQ(im.added, kSamples);
    EXPECT_FALSE(im.merged);
    EXPECT_EQ(IntactFakes(Root(b), key), int64_t(kSamples));
    EXPECT_EQ(Children(b + "/trash"), 0u);
    // The imported entry is an ordinary one: it takes more records.
    auto e = CacheEntry::Open(Root(b), key);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE((*e)->Put(0, 1, reinterpret_cast<const uint8_t*>("abc"), 1, 1, 3).ok());
  }
}

TEST(EntryTransfer, PartialEntryNeedsPartial) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples / 2);
  Status s = ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("partial (30 of 60"), std::string::npos) << s.message();
  ExportOptions eo;
  eo.partial = true;
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"), eo).ok());
  ASSERT_TRUE(ImportFile(Root(d.Sub("b")), d.Sub("s.tar")).ok());
  EXPECT_EQ(IntactFakes(Root(d.Sub("b")), key), int64_t(kSamples / 2));
}

TEST(EntryTransfer, ExportWhileALoaderFillsTheEntry) {
  test::TempDir d;
  const uint64_t n = 400;
  auto key = test::FakeKey(n);
  Fill(Root(d.Sub("a")), key, 0, n / 4);
  std::atomic<bool> done{false};
  std::thread filler([&] {
    auto e = CacheEntry::Open(Root(d.Sub("a")), key);
    ASSERT_TRUE(e.ok());
    for (uint64_t id = n / 4; id < n; ++id) {
      ASSERT_TRUE(test::PutFake(e->get(), id).ok());
      std::string buf;
      CachedSample s;
      ASSERT_TRUE((*e)->Get(id / 2, &buf, &s).ok());  // and reads on
    }
    done = true;
  });
  ExportOptions eo;
  eo.partial = true;
  int exports = 0;
  do {  // at least one export overlaps the filling
    TransferReport ex;
    Status s = ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar"), eo, &ex);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_GE(ex.records, n / 4);
    ++exports;
  } while (!done && exports < 1000);
  filler.join();
  std::string b = d.Sub("b");
  TransferReport im;
  ASSERT_TRUE(ImportFile(Root(b), d.Sub("s.tar"), &im).ok());
  EXPECT_EQ(IntactFakes(Root(b), key), int64_t(im.records));
  EXPECT_GE(im.records, n / 4);
}

TEST(EntryTransfer, IntoAFullRootIsRefusedAndLeavesNothing) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  CacheOptions small = Root(d.Sub("b"));
  small.capacity_bytes = 20000;  // less than the entry's records
  Status s = ImportFile(small, d.Sub("s.tar"));
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.message();
  EXPECT_EQ(Children(d.Sub("b/entries")), 0u);
  EXPECT_EQ(Children(d.Sub("b/trash")), 0u);
}

TEST(EntryTransfer, IntoAnExistingEntryMerges) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  Fill(Root(d.Sub("a")), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  Fill(Root(d.Sub("b")), key, 0, kSamples, 2);          // the even ids
  auto user = CacheEntry::Open(Root(d.Sub("b")), key);  // in use meanwhile
  ASSERT_TRUE(user.ok());
  TransferReport im;
  Status s = ImportFile(Root(d.Sub("b")), d.Sub("s.tar"), &im);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(im.merged);
  EXPECT_EQ(im.already_present, kSamples / 2);
  EXPECT_EQ(im.added, kSamples / 2);
  ASSERT_TRUE((*user)->Refresh().ok());
  EXPECT_EQ((*user)->samples_present(), kSamples);
  EXPECT_EQ(IntactFakes(Root(d.Sub("b")), key), int64_t(kSamples));
  EXPECT_EQ(Children(d.Sub("b/trash")), 0u);
}

// Records with fields (format v3) go out and come back byte for byte, into
// a new entry and merged into an existing one, and an import's record check
// sees each record's fields.
TEST(EntryTransfer, FieldsTravelWithTheirRecords) {
  test::TempDir d;
  auto key = test::FakeKey(kSamples);
  {
    auto e = CacheEntry::Open(Root(d.Sub("a")), key);
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < kSamples; ++id)
      ASSERT_TRUE(test::PutFakeWithFields(e->get(), id).ok());
  }
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  Fill(Root(d.Sub("m")), key, 0, kSamples, 2);  // the even ids, without fields
  for (const char* into : {"b", "m"}) {
    uint64_t checked = 0;
    ImportOptions io;
    io.check_record = [&checked](uint64_t id, const CachedSample& r) {
      checked += test::SameAsFakeWithFields(id, r);
      return Status::OK();
    };
    int fd = ::open(d.Sub("s.tar").c_str(), O_RDONLY);
    TransferReport im;
    Status s = ImportEntry(Root(d.Sub(into)), fd, io, &im);
    ::close(fd);
    ASSERT_TRUE(s.ok()) << into << ": " << s.ToString();
    EXPECT_EQ(checked, kSamples) << into;
    auto e = CacheEntry::Open(Root(d.Sub(into)), key);
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < kSamples; ++id) {
      bool merged_over = std::string(into) == "m" && id % 2 == 0;  // kept its own
      EXPECT_TRUE(merged_over ? test::ReadsBackFake(e->get(), id)
                              : test::ReadsBackFakeWithFields(e->get(), id))
          << into << " " << id;
    }
  }
}

// Records of a codec travel as stored (byte 22 and the stored bytes), come
// back serving the same pixels, and an import decodes each one: a record
// whose zstd stream is damaged under a valid checksum (and a checksum table
// forged to match) is refused, naming it, and leaves nothing.
TEST(EntryTransfer, CodedRecordsTravelAsStoredAndImportDecodesThem) {
  test::TempDir d;
  auto key = test::CodecKey(kSamples, RecordCodec::kZstd, "codec");
  {
    auto e = CacheEntry::Open(Root(d.Sub("a")), key);
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < kSamples; ++id)
      ASSERT_TRUE(test::PutFakeCoded(e->get(), id, RecordCodec::kZstd).ok());
  }
  ASSERT_TRUE(ExportToFile(Root(d.Sub("a")), key, d.Sub("s.tar")).ok());
  ASSERT_TRUE(ImportFile(Root(d.Sub("b")), d.Sub("s.tar")).ok());
  EXPECT_EQ(IntactFakes(Root(d.Sub("b")), key), int64_t(kSamples));  // zstd: lossless
  Members members = ReadMembers(ReadAll(d.Sub("s.tar")));
  size_t r = 0;
  while (r < members.size() && members[r].first.rfind("records/", 0) != 0) ++r;
  ASSERT_LT(r, members.size());
  auto records = SplitRecords(members[r].second);
  ASSERT_EQ(records.size(), kSamples);
  for (const auto& [id, rec] : records) EXPECT_EQ(rec[22], 1) << "sample " << id << ": codec byte";
  // Sample 3's stream damaged, its checksum and the member's table rewritten.
  std::string data;
  for (auto& [id, rec] : records) {
    if (id == 3) test::DamageStoredBytes(rec.data());
    data += rec;
  }
  members[r].second = data;
  WriteForged(d.Sub("forged.tar"), members);
  Status s = ImportFile(Root(d.Sub("c")), d.Sub("forged.tar"));
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("(sample 3): zstd pixels"), std::string::npos) << s.message();
  EXPECT_EQ(Children(d.Sub("c/entries")), 0u);
}

// A stream whose producer crafted records its entry never holds (the codec
// byte of another codec, a shape past the entry's prepare spec), checksums
// and table forged to match: refused on the record's header, before its
// pixels are decoded (each here decodes to 48 MiB), naming the entry and
// the record; nothing is left.
TEST(EntryTransfer, RecordsTheEntryNeverHoldsAreRefusedBeforeDecoding) {
  test::TempDir d;
  PrepareSpec spec;
  spec.resize_short = 12;
  spec.max_long = 12;
  spec.codec = RecordCodec::kZstd;
  const std::string frame = test::ZeroFrame(uint64_t{4096} * 4096 * 3);
  struct Case {
    EntryKey key;
    uint8_t codec;
    std::string says;
  } cases[] = {
      {test::FakeKey(kSamples), 1, "codec zstd, not the entry's raw"},
      {test::SpecKey(kSamples, spec), 1, "shape 4096x4096x3: the entry's images have sides"},
  };
  for (const Case& c : cases) {
    std::string a = d.Sub("a" + std::to_string(c.codec) + c.key.spec.substr(0, 4));
    {
      auto e = CacheEntry::Open(Root(a), c.key);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      for (uint64_t id = 0; id < kSamples; ++id)
        ASSERT_TRUE((c.key.spec == "spec" ? test::PutFake(e->get(), id)
                                          : test::PutFakeCoded(e->get(), id, spec.codec))
                        .ok());
    }
    ASSERT_TRUE(ExportToFile(Root(a), c.key, d.Sub("s.tar")).ok());
    Members members = ReadMembers(ReadAll(d.Sub("s.tar")));
    size_t r = 0;
    while (r < members.size() && members[r].first.rfind("records/", 0) != 0) ++r;
    ASSERT_LT(r, members.size());
    std::string data;
    for (auto& [id, rec] : SplitRecords(members[r].second))
      data += id == 3 ? test::CraftedRecord(3, c.codec, 4096, 4096, 3, frame) : rec;
    // The header declares the bytes the crafted stream holds.
    auto header = nlohmann::json::parse(members[0].second);
    header["record_bytes"] =
        header["record_bytes"].get<uint64_t>() + data.size() - members[r].second.size();
    members[0].second = header.dump(1);
    members[r].second = data;
    WriteForged(d.Sub("forged.tar"), members);
    CacheOptions into = Root(d.Sub("c"));
    Status s = ImportFile(into, d.Sub("forged.tar"));
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find("(sample 3) of entry " + c.key.fingerprint() + ": " + c.says),
              std::string::npos)
        << s.message();
    EXPECT_EQ(Children(into.root + "/entries"), 0u);
  }
}

// A damaged stream is refused and leaves nothing; a change the stream does
// not depend on (tar padding) may be accepted, but then imports every record
// intact.
class DamagedStream : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = test::FakeKey(kSamples);
    Fill(Root(d_.Sub("a")), key_, 0, kSamples);
    ASSERT_TRUE(ExportToFile(Root(d_.Sub("a")), key_, d_.Sub("s.tar")).ok());
    stream_ = ReadAll(d_.Sub("s.tar"));
  }
  // True when refused; fails the test if it left anything or imported wrong data.
  bool Refused(const std::string& damaged, const std::string& what) {
    std::string root = d_.Sub("t" + std::to_string(n_++));
    WriteAll(d_.Sub("damaged.tar"), damaged);
    TransferReport im;
    Status s = ImportFile(Root(root), d_.Sub("damaged.tar"), &im);
    if (s.ok()) {
      EXPECT_EQ(IntactFakes(Root(root), key_), int64_t(kSamples)) << what;
    } else {
      EXPECT_EQ(Children(root + "/entries"), 0u) << what;
      EXPECT_EQ(Children(root + "/trash"), 0u) << what;
      EXPECT_NE(s.message().find("export stream"), std::string::npos) << s.message();
    }
    std::filesystem::remove_all(root);
    return !s.ok();
  }
  test::TempDir d_;
  EntryKey key_;
  std::string stream_;
  int n_ = 0;
};

TEST_F(DamagedStream, ByteFlipsAreRefused) {
  size_t first_record = stream_.find("SDFR");
  size_t table = stream_.find("checksums.json");
  ASSERT_NE(first_record, std::string::npos);
  int refused = 0, tried = 0;
  for (size_t pos = 0; pos < stream_.size(); pos += 151) {
    std::string bad = stream_;
    bad[pos] ^= 0x10;
    bool r = Refused(bad, "flip at " + std::to_string(pos));
    ++tried;
    refused += r;
    // Inside the records (pixels and headers): always refused.
    if (pos >= first_record && pos < table - 512) {
      EXPECT_TRUE(r) << "flip at " << pos;
    }
  }
  EXPECT_GT(refused, tried / 4);
}

TEST_F(DamagedStream, TruncationIsRefused) {
  size_t table = stream_.find("checksums.json");
  for (size_t len = 0; len < stream_.size(); len += 211) {
    bool r = Refused(stream_.substr(0, len), "cut at " + std::to_string(len));
    if (len < table + 512) {
      EXPECT_TRUE(r) << "cut at " << len;
    }
  }
}

TEST_F(DamagedStream, NotAnExportIsRefused) {
  EXPECT_TRUE(Refused("hello", "text"));
  EXPECT_TRUE(Refused(std::string(10240, '\0'), "zeros"));
  // A manifest of another entry: the records would be served under a wrong key.
  std::string bad = stream_;
  size_t at = bad.find("\"samples_total\": 60");
  ASSERT_NE(at, std::string::npos);
  bad[at + 17] = '7';
  EXPECT_TRUE(Refused(bad, "manifest samples_total"));
}

// A forged header (its producer is hostile, its checksum table matches)
// must not make the import write more than the root may hold: the charge is
// computed from the header's counts, so they are bounded and the arithmetic
// checked. Each of these wrote the whole entry into a root too small for it.
class ForgedHeader : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = test::FakeKey(kSamples);
    Fill(Root(d_.Sub("a")), key_, 0, kSamples);
    ASSERT_TRUE(ExportToFile(Root(d_.Sub("a")), key_, d_.Sub("s.tar")).ok());
    members_ = ReadMembers(ReadAll(d_.Sub("s.tar")));
    ASSERT_EQ(members_.front().first, "ssdfeed-export.json");
    ASSERT_EQ(members_[1].first, "manifest.json");
  }
  // Imports the stream with the header (and manifest) edited into a root of
  // 20000 bytes, less than the entry's records.
  Status Import(const std::function<void(nlohmann::json*, nlohmann::json*)>& edit) {
    Members m = members_;
    auto header = nlohmann::json::parse(m[0].second);
    auto manifest = nlohmann::json::parse(m[1].second);
    edit(&header, &manifest);
    m[0].second = header.dump(1);
    m[1].second = manifest.dump(1);
    WriteForged(d_.Sub("forged.tar"), m);
    CacheOptions small = Root(d_.Sub("b" + std::to_string(n_++)));
    small.capacity_bytes = 20000;
    Status s = ImportFile(small, d_.Sub("forged.tar"));
    EXPECT_LE(BytesUnder(small.root), small.capacity_bytes) << s.ToString();
    return s;
  }
  test::TempDir d_;
  EntryKey key_;
  Members members_;
  int n_ = 0;
};

TEST_F(ForgedHeader, TheUnforgedStreamDoesNotFit) {
  Status s = Import([](nlohmann::json*, nlohmann::json*) {});
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
}

TEST_F(ForgedHeader, RecordBytesThatWrapTheChargeAreRefused) {
  // record_bytes + records * 48 + MetaAllowance wraps to 4 KiB.
  uint64_t rest = kSamples * 48 + kSamples * 4 + 16384;
  Status s = Import([&](nlohmann::json* h, nlohmann::json*) {
    (*h)["record_bytes"] = uint64_t(0) - rest + 4096;
  });
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("record counts do not add up"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(key_.fingerprint()), std::string::npos) << s.message();
}

TEST_F(ForgedHeader, SamplesTotalOutOfRangeIsRefused) {
  EntryKey big = key_;
  big.samples_total = uint64_t(1) << 62;
  Status s = Import([&](nlohmann::json* h, nlohmann::json* m) {
    (*h)["samples_total"] = big.samples_total;
    (*h)["entry"] = big.fingerprint();
    (*m)["samples_total"] = big.samples_total;
    (*m)["fingerprint"] = big.fingerprint();
    (*h)["record_bytes"] = uint64_t(0) - 4 * kSamples * 48;  // with records: wraps
    (*h)["records"] = 4 * kSamples;
  });
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("samples_total 4611686018427387904 is out of range"),
            std::string::npos)
      << s.message();
}

TEST_F(ForgedHeader, MoreRecordsThanDeclaredAreRefused) {
  // Index entries are charged per declared record: one past them is refused.
  CacheOptions o = Root(d_.Sub("c"));
  Members m = members_;
  auto h = nlohmann::json::parse(m[0].second);
  h["records"] = 1;
  m[0].second = h.dump(1);
  WriteForged(d_.Sub("few.tar"), m);
  Status s = ImportFile(o, d_.Sub("few.tar"));
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("more records than the stream declares"), std::string::npos)
      << s.message();
  EXPECT_EQ(Children(o.root + "/entries"), 0u);
}

TEST_F(ForgedHeader, AManifestOverAMegabyteIsRefused) {
  Status s = Import(
      [](nlohmann::json*, nlohmann::json* m) { (*m)["padding"] = std::string(2 << 20, 'x'); });
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("manifest.json is too large"), std::string::npos) << s.message();
}

// ---- manifests (hand-written, imported, damaged) as every lister reads them

// An entry directory whose manifest is `manifest`, holding nothing else.
std::string HandWrittenEntry(const CacheOptions& o, const std::string& manifest) {
  auto e = CacheEntry::Open(o, test::FakeKey(4, "real"));  // makes the root
  EXPECT_TRUE(e.ok());
  std::string dir = o.root + "/entries/" + std::string(64, 'f');
  EXPECT_EQ(::mkdir(dir.c_str(), 0700), 0);
  WriteAll(dir + "/manifest.json", manifest);
  return dir;
}

const EntryInfo* Find(const std::vector<EntryInfo>& list, const std::string& name) {
  for (const auto& e : list)
    if (e.name == name) return &e;
  return nullptr;
}

TEST(HostileManifest, SamplesTotalOutOfRangeIsListedBrokenNotAnAbort) {
  test::TempDir d;
  CacheOptions o = Root(d.Sub("r"));
  HandWrittenEntry(o, R"({"fingerprint": "x", "samples_total": 4611686018427387904})");
  auto list = ListEntries(o);  // threw bad_alloc
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  const EntryInfo* e = Find(*list, std::string(64, 'f'));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state.rfind("broken: manifest damaged: samples_total 4611686018427387904", 0), 0u)
      << e->state;
  EXPECT_EQ(e->samples_total, 0u);
  ASSERT_NE(Find(*list, test::FakeKey(4, "real").fingerprint()), nullptr);  // the rest listed
}

TEST(HostileManifest, AManifestOverAMegabyteIsNotRead) {
  test::TempDir d;
  CacheOptions o = Root(d.Sub("r"));
  std::string pad(2 << 20, ' ');
  std::string dir = HandWrittenEntry(o, R"({"samples_total": 4, "pad": ")" + pad + R"("})");
  auto list = ListEntries(o);
  ASSERT_TRUE(list.ok());
  const EntryInfo* e = Find(*list, std::string(64, 'f'));
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->state.find("too large for a manifest"), std::string::npos) << e->state;
  auto key = ReadEntryKey(Env::Default(), dir);
  EXPECT_TRUE(key.status().IsCorruption()) << key.status().ToString();
}

TEST(HostileManifest, CountingAManifestsSamplesFollowsTheIndexNotSamplesTotal) {
  // Within the bound, a manifest may still declare far more samples than
  // the entry holds: counting them must not size a table by it.
  test::TempDir d;
  CacheOptions o = Root(d.Sub("r"));
  auto key = test::FakeKey(10);
  Fill(o, key, 0, 10);
  std::string dir = o.root + "/entries/" + key.fingerprint();
  EXPECT_EQ(CountIndexed(Env::Default(), dir, 10), 10u);
  EXPECT_EQ(CountIndexed(Env::Default(), dir, kMaxSamplesTotal), 10u);
  EXPECT_EQ(CountIndexed(Env::Default(), dir, 5), 5u);
}

TEST(SkippedFile, CountsDistinctIdsOfThisEntryOnly) {
  auto n = ParseSkipped(R"({"samples_total": 10, "skipped": [{"id": 3}, {"id": 3}, {"id": 9}]})",
                        10, "skipped.json");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u);  // a repeated id does not make a partial entry complete
  for (const char* bad :
       {R"({"samples_total": 10, "skipped": [{"id": 10}]})",
        R"({"samples_total": 11, "skipped": []})", R"({"samples_total": 10, "skipped": [3]})",
        R"({"samples_total": 10, "skipped": {}})", R"([])", "not json"}) {
    auto r = ParseSkipped(bad, 10, "e/skipped.json");
    EXPECT_TRUE(r.status().IsCorruption()) << bad;
    EXPECT_NE(r.status().message().find("e/skipped.json"), std::string::npos) << bad;
  }
}

// ---- the CLI, with a real dataset

struct CliFixture {
  test::TempDir dir;
  std::string uri;
  CliFixture() {
    uri = test::MakeTestDataset(
        {.dir = dir.Sub("data"), .format = "folder", .count = 40, .min_side = 40, .max_side = 80});
  }
  std::string Cli() const { return test::CliPath(); }
  std::string Warm(const std::string& cache, const std::string& source,
                   const std::string& extra = "") const {
    return Cli() + " warm --source " + source + " --cache " + cache +
           " --resize-short 32 --json --quiet --workers 2 " + extra;
  }
  static uint64_t Prepared(const std::string& json) {
    auto j = nlohmann::json::parse(json, nullptr, false);
    return j.is_object() && j.contains("prepared") ? j["prepared"].get<uint64_t>() : 999999;
  }
};

TEST(EntryTransferCli, PipeExportIntoImportThenAllHits) {
  CliFixture f;
  std::string a = f.dir.Sub("a"), b = f.dir.Sub("b"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry.substr(0, 12) + " --zstd --cache " + a +
                           " 2>/dev/null | " + f.Cli() + " cache import - --json --cache " + b,
                       &out),
      0)
      << out;
  EXPECT_EQ(nlohmann::json::parse(out)["entry"], entry);
  ASSERT_EQ(test::RunCommand(f.Warm(b, f.uri), &out), 0);
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
  // A file that is not an export: exit 1, naming the file.
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + f.dir.Sub("a/entries/" + entry) +
                                 "/manifest.json --cache " + b + " 2>&1",
                             &out),
            1);
  EXPECT_NE(out.find("manifest.json: export stream"), std::string::npos) << out;
}

TEST(EntryTransferCli, SourceRootRebindsToTheNodesCopy) {
  CliFixture f;
  std::string a = f.dir.Sub("a"), b = f.dir.Sub("b"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  std::string stream = f.dir.Sub("e.tar");
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry + " --to " + stream + " --cache " + a),
      0);
  // The node's copy: another path, other inodes and ctimes.
  ASSERT_EQ(test::RunCommand("cp -a " + f.dir.Sub("data") + " " + f.dir.Sub("node-data")), 0);
  std::string node_uri = f.uri;
  node_uri.replace(node_uri.find(f.dir.Sub("data")), f.dir.Sub("data").size(),
                   f.dir.Sub("node-data"));
  ASSERT_EQ(test::RunCommand("mv " + f.dir.Sub("data") + " " + f.dir.Sub("gone")), 0);
  // Without --source-root the source is not found here: refused, named.
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --cache " + b + " 2>&1", &out),
            1);
  EXPECT_NE(out.find("--source-root"), std::string::npos) << out;
  EXPECT_EQ(Children(b + "/entries"), 0u);
  // Another dataset of as many samples at that path: refused, named.
  const std::string data_uri = test::MakeTestDataset(
      {.dir = f.dir.Sub("other"), .count = 40, .seed = 7, .min_side = 40, .max_side = 80});
  ASSERT_FALSE(data_uri.empty());
  EXPECT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --source-root " +
                                 f.dir.Sub("data") + "=" + f.dir.Sub("other") + " --cache " + b,
                             &out),
            1);
  EXPECT_NE(out.find("not the same dataset"), std::string::npos) << out;
  EXPECT_EQ(Children(b + "/entries"), 0u);
  EXPECT_EQ(Children(b + "/trash"), 0u);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache import " + stream + " --json --source-root " +
                                 f.dir.Sub("data") + "=" + f.dir.Sub("node-data") + " --cache " + b,
                             &out),
            0)
      << out;
  EXPECT_NE(nlohmann::json::parse(out)["entry"], entry);  // the node's identity
  ASSERT_EQ(test::RunCommand(f.Warm(b, node_uri), &out), 0);
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
}

TEST(EntryTransferCli, ExportFileHasTheCachesModeAndNeverFollowsALink) {
  CliFixture f;
  std::string a = f.dir.Sub("a"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  std::string stream = f.dir.Sub("e.tar");
  std::string exp = f.Cli() + " cache export " + entry + " --cache " + a + " --to ";
  ASSERT_EQ(test::RunCommand("umask 022; " + exp + stream + " 2>/dev/null"), 0);
  struct stat st;
  ASSERT_EQ(::stat(stream.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // was 0644: the records readable by all
  // A link planted where the stream is written aside (the shell's pid is
  // the exporter's after exec): refused, its target untouched.
  std::string victim = f.dir.Sub("victim"), to = f.dir.Sub("f.tar");
  WriteAll(victim, "precious");
  EXPECT_NE(
      test::RunCommand(
          "sh -c 'ln -s " + victim + " " + to + ".partial-$$ && exec " + exp + to + "' 2>&1", &out),
      0);
  EXPECT_EQ(ReadAll(victim), "precious");
  EXPECT_FALSE(std::filesystem::exists(to)) << out;
}

TEST(EntryTransferCli, CheckOriginComparesIdsAForgerCannotPredict) {
  // Every other record from another dataset of as many samples: with 16 of
  // 40 ids evenly spaced (every 2nd) the forgery passed; 16 random ones all
  // even has odds of 8e-8.
  CliFixture f;
  const std::string data_uri = test::MakeTestDataset(
      {.dir = f.dir.Sub("other"), .count = 40, .seed = 7, .min_side = 40, .max_side = 80});
  ASSERT_FALSE(data_uri.empty());
  Members streams[2];
  for (int i = 0; i < 2; ++i) {
    std::string cache = f.dir.Sub("c" + std::to_string(i)), out;
    ASSERT_EQ(test::RunCommand(f.Warm(cache, i == 0 ? f.uri : data_uri)), 0);
    ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + cache, &out), 0);
    std::string entry = nlohmann::json::parse(out)[0]["entry"], s = f.dir.Sub("s.tar");
    ASSERT_EQ(test::RunCommand(f.Cli() + " cache export " + entry + " --to " + s + " --cache " +
                               cache + " 2>/dev/null"),
              0);
    streams[i] = ReadMembers(ReadAll(s));
    std::filesystem::remove(s);
  }
  std::map<uint64_t, std::string> recs[2];
  for (int i = 0; i < 2; ++i)
    for (const auto& [name, data] : streams[i])
      if (name.rfind("records/", 0) == 0) recs[i].merge(SplitRecords(data));
  ASSERT_EQ(recs[0].size(), 40u);
  ASSERT_EQ(recs[1].size(), 40u);
  std::string forged;
  for (uint64_t id = 0; id < 40; ++id) forged += recs[id % 2][id];
  Members m = {streams[0][0], streams[0][1], {"records/000000.dat", forged}, streams[0].back()};
  auto header = nlohmann::json::parse(m[0].second);
  header["record_bytes"] = forged.size();
  m[0].second = header.dump(1);
  WriteForged(f.dir.Sub("forged.tar"), m);
  std::string out, b = f.dir.Sub("b");
  EXPECT_EQ(
      test::RunCommand(
          f.Cli() + " cache import " + f.dir.Sub("forged.tar") + " --cache " + b + " 2>&1", &out),
      1)
      << out;
  EXPECT_NE(out.find("prepares differently here"), std::string::npos) << out;
  EXPECT_EQ(Children(b + "/entries"), 0u);
}

TEST(EntryTransferCli, ImportAsASecondUserOfAGroupSharedRoot) {
  for (int uid : {4201, 4202})
    if (auto why = test::CannotActAs(uid, 4243); !why.empty()) GTEST_SKIP() << why;
  CliFixture f;
  ASSERT_EQ(::chmod(f.dir.path().c_str(), 0711), 0);
  ASSERT_EQ(test::RunCommand("chmod -R a+rX " + f.dir.Sub("data")), 0);
  std::string a = f.dir.Sub("a"), out;
  ASSERT_EQ(test::RunCommand(f.Warm(a, f.uri)), 0);
  ASSERT_EQ(test::RunCommand(f.Cli() + " cache ls --json --cache " + a, &out), 0);
  std::string entry = nlohmann::json::parse(out)[0]["entry"];
  std::string stream = f.dir.Sub("e.tar");
  ASSERT_EQ(
      test::RunCommand(f.Cli() + " cache export " + entry + " --to " + stream + " --cache " + a),
      0);
  ASSERT_EQ(::chmod(stream.c_str(), 0644), 0);
  std::string cache = f.dir.Sub("shared");
  const gid_t group = 4243;
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  ASSERT_EQ(::chown(cache.c_str(), 0, group), 0);
  ASSERT_EQ(::chmod(cache.c_str(), 02770), 0);
  auto as_user = [&](int uid, const std::string& cmd) {
    return "/usr/bin/setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(uid) +
           " --groups=" + std::to_string(group) + " /bin/sh -c 'umask 022; " + cmd + "'";
  };
  ASSERT_EQ(test::RunCommand(as_user(4201, f.Cli() + " cache import " + stream +
                                               " --group-shared --cache " + cache),
                             &out),
            0)
      << out;
  // The other user of the group uses (and fills) it: every sample a hit.
  ASSERT_EQ(test::RunCommand(as_user(4202, f.Warm(cache, f.uri, "--group-shared")), &out), 0)
      << out;
  EXPECT_EQ(CliFixture::Prepared(out), 0u) << out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(cache, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    ASSERT_EQ(::lstat(it->path().c_str(), &st), 0);
    std::string p = it->path().string();
    EXPECT_EQ(st.st_mode & 07, 0u) << p << " is world-accessible";
    EXPECT_EQ(st.st_gid, group) << p;
    EXPECT_EQ(st.st_mode & (S_ISDIR(st.st_mode) ? 02070u : 060u),
              S_ISDIR(st.st_mode) ? 02070u : 060u)
        << p;
  }
}

// Another process empties the trash (as every open and reservation does)
// the instant each staging directory is made: the directory is its
// maker's already, so neither a new entry nor an import loses it.
class CleanupAtBirthEnv : public EnvWrapper {
 public:
  CleanupAtBirthEnv(Env* base, const std::string& root) : EnvWrapper(base), paths_(root) {}
  Status CreateDir(const std::string& path, uint32_t mode) override {
    Status s = EnvWrapper::CreateDir(path, mode);
    if (s.ok() && Dirname(path) == paths_.trash && Basename(path).rfind(kStagingPrefix, 0) == 0) {
      EmptyTrash(target(), paths_);
      ++cleanups;
    }
    return s;
  }
  std::atomic<int> cleanups{0};

 private:
  RootPaths paths_;
};

TEST(EntryTransfer, StagingDirSurvivesAnotherProcessEmptyingTheTrashAtItsBirth) {
  test::TempDir a, b;
  EntryKey key = test::FakeKey(kSamples);
  Fill(Root(a.path()), key, 0, kSamples);
  ASSERT_TRUE(ExportToFile(Root(a.path()), key, a.Sub("x.tar")).ok());
  CleanupAtBirthEnv env(Env::Default(), b.path());
  CacheOptions o = Root(b.path());
  o.env = &env;
  TransferReport r;
  Status s = ImportFile(o, a.Sub("x.tar"), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(env.cleanups.load(), 1);
  EXPECT_EQ(IntactFakes(Root(b.path()), key), static_cast<int64_t>(kSamples));
  // A new entry's staging directory, likewise.
  auto e = CacheEntry::Open(o, test::FakeKey(kSamples, "new"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(env.cleanups.load(), 2);
  EXPECT_TRUE(test::PutFake(e->get(), 3).ok());
  e->reset();
  // Nothing is left in the trash: neither directories nor maker locks.
  EXPECT_EQ(Children(JoinPath(b.path(), "trash")), 0u);
}

}  // namespace
}  // namespace ssdfeed
