// The record and index-entry codecs alone: a record checks back as written,
// every kind of damage is named, and an index entry survives a round trip
// (its checksum's eighth byte excepted) and fails its own hash when damaged.
#include "cache/record_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/field_section.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {
namespace {

namespace cf = cache_format;

// A 3 x 4 x 2 record of sample 77.
std::string Record(cf::RecordHeader* h) {
  std::vector<uint8_t> payload(24);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 11);
  h->payload_len = 24;
  h->sample_id = 77;
  h->height = 3;
  h->width = 4;
  h->channels = 2;
  h->label = -3;
  std::string rec(cf::kRecordHeaderSize, '\0');
  cf::EncodeRecordHeader(h, payload.data(), rec.data());
  rec.append(payload.begin(), payload.end());
  return rec;
}

TEST(RecordFormat, ARecordChecksBackAsWritten) {
  cf::RecordHeader in, out;
  std::string rec = Record(&in);
  EXPECT_NE(in.checksum, 0u) << "Encode fills in the checksum";
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 77, {}, &out), "");
  EXPECT_EQ(out.payload_len, 24u);
  EXPECT_EQ(out.height, 3);
  EXPECT_EQ(out.width, 4);
  EXPECT_EQ(out.channels, 2);
  EXPECT_EQ(out.label, -3);
  EXPECT_EQ(out.checksum, in.checksum);
}

TEST(RecordFormat, EachKindOfDamageIsNamed) {
  cf::RecordHeader h, out;
  std::string rec = Record(&h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), 10, 77, {}, &out), "record shorter than its header");
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 78, {}, &out), "record holds sample 77");
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size() - 1, 77, {}, &out), "record length mismatch");
  std::string bad = rec;
  bad[0] ^= 1;
  EXPECT_EQ(cf::CheckRecord(bad.data(), bad.size(), 77, {}, &out), "bad record magic");
  bad = rec;
  bad[20] = 3;  // channels: 3 x 4 x 3 is not 24
  EXPECT_EQ(cf::CheckRecord(bad.data(), bad.size(), 77, {}, &out),
            "record shape does not match its length");
  bad = rec;
  bad.back() ^= 0x40;  // one payload bit
  EXPECT_EQ(cf::CheckRecord(bad.data(), bad.size(), 77, {}, &out), "checksum mismatch");
  bad = rec;
  bad[24] ^= 1;  // the label is covered too
  EXPECT_EQ(cf::CheckRecord(bad.data(), bad.size(), 77, {}, &out), "checksum mismatch");
}

// A 2 x 2 x 1 record of sample 9 whose payload is its pixels and section,
// with num_fields in its header (computed with the checksum, as a writer
// that means it would).
std::string RecordWithFields(const std::string& section, uint8_t num_fields, cf::RecordHeader* h) {
  std::string payload = "\x01\x02\x03\x04" + section;
  h->payload_len = static_cast<uint32_t>(payload.size());
  h->sample_id = 9;
  h->height = 2;
  h->width = 2;
  h->channels = 1;
  h->num_fields = num_fields;
  h->label = 4;
  std::string rec(cf::kRecordHeaderSize, '\0');
  cf::EncodeRecordHeader(h, reinterpret_cast<const uint8_t*>(payload.data()), rec.data());
  return rec + payload;
}

std::string TwoFields() {
  std::string sec;
  std::vector<Field> f = {
      {"mask", FieldKind::kMask, "|u1", {2, 2}, std::string("\x00\x01\x01\x00", 4)},
      {"classes", FieldKind::kClasses, "<i8", {1}, std::string(8, '\x05')}};
  EXPECT_TRUE(cf::EncodeFields(f, &sec).ok());
  return sec;
}

TEST(RecordFormat, ARecordWithFieldsChecksBackWithItsSection) {
  cf::RecordHeader in, out;
  std::string rec = RecordWithFields(TwoFields(), 2, &in);
  EXPECT_EQ(rec[21], 2) << "header byte 21: the number of fields";
  ASSERT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out), "");
  EXPECT_EQ(out.num_fields, 2);
  CachedSample s;
  cf::SampleOf(rec.data(), out, &s);
  EXPECT_EQ(s.bytes(), 4u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.pixels), 4), "\x01\x02\x03\x04");
  EXPECT_EQ(s.fields, TwoFields());
  EXPECT_EQ(s.label, 4);
}

// Damage a checksum cannot see (a writer's bug, a forged record): the
// section is checked as well, and its count against the header's.
TEST(RecordFormat, ASectionThatDoesNotParseIsDamage) {
  cf::RecordHeader h, out;
  std::string rec = RecordWithFields(TwoFields(), 1, &h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out),
            "field section holds another number of fields");
  std::string sec = TwoFields();
  sec[8 + 1] = 3;  // the mask's ndim: its dims now run into its name
  rec = RecordWithFields(sec, 2, &h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out).rfind("field section: ", 0), 0u)
      << cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out);
  rec = RecordWithFields(TwoFields().substr(0, 40), 2, &h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out),
            "field section: field 0 cut short");
  // Fields in the header and no section at all: the payload is all pixels.
  rec = RecordWithFields("", 2, &h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out),
            "record shape does not match its length");
  // A section without fields in the header: bytes the shape does not explain.
  rec = RecordWithFields(TwoFields(), 0, &h);
  EXPECT_EQ(cf::CheckRecord(rec.data(), rec.size(), 9, {}, &out),
            "record shape does not match its length");
}

TEST(RecordFormat, EveryFieldByteIsUnderTheChecksum) {
  cf::RecordHeader h, out;
  const std::string rec = RecordWithFields(TwoFields(), 2, &h);
  for (size_t i = cf::kRecordHeaderSize + 4; i < rec.size(); ++i) {
    std::string bad = rec;
    bad[i] ^= 0x01;
    EXPECT_EQ(cf::CheckRecord(bad.data(), bad.size(), 9, {}, &out), "checksum mismatch") << i;
  }
}

TEST(RecordFormat, AnIndexEntryRoundTripsAndFailsItsHashWhenDamaged) {
  cf::IndexEntry in{
      12345, 1ull << 33, 4096, 300, 400, 3, 0x0102030405060708ull, 0xAABBCCDDEEFF1122ull};
  char buf[cf::kIndexEntrySize];
  cf::EncodeIndexEntry(in, buf);
  cf::IndexEntry out;
  ASSERT_TRUE(cf::DecodeIndexEntry(buf, &out));
  EXPECT_EQ(out.sample_id, in.sample_id);
  EXPECT_EQ(out.offset, in.offset);
  EXPECT_EQ(out.record_len, in.record_len);
  EXPECT_EQ(out.height, in.height);
  EXPECT_EQ(out.width, in.width);
  EXPECT_EQ(out.channels, in.channels);
  EXPECT_EQ(out.stamp, in.stamp);
  EXPECT_EQ(out.record_checksum, in.record_checksum & 0x00FFFFFFFFFFFFFFull) << "7 bytes kept";
  for (size_t i = 0; i < cf::kIndexEntrySize; ++i) {
    char bad[cf::kIndexEntrySize];
    std::copy(buf, buf + cf::kIndexEntrySize, bad);
    bad[i] ^= 0x10;
    EXPECT_FALSE(cf::DecodeIndexEntry(bad, &out)) << "byte " << i;
  }
}

}  // namespace
}  // namespace ssdfeed
