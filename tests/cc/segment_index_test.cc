// SegmentIndex alone: Refresh finds the records another writer appended
// (only those, and each once), and a record damaged on disk fails its check,
// is named as Corruption and dropped from the index.
#include "cache/segment_index.h"

#include <gtest/gtest.h>

#include <fstream>

#include "cache/buffered_appender.h"
#include "record_sink_test_util.h"

namespace ssdfeed {
namespace {

using test::MakeRecord;
using test::SinkRig;
using test::TestRecord;

// Appends records [from, to) through a BufferedAppender of rig's (slot 0).
void Append(SinkRig* rig, BufferedAppender* sink, std::vector<TestRecord>* recs, uint64_t from,
            uint64_t to) {
  for (uint64_t id = from; id < to; ++id) {
    recs->push_back(MakeRecord(id, 16, 16 + static_cast<int>(id)));
    ASSERT_TRUE(sink->Add(recs->back().ie, recs->back().hdr, recs->back().payload.data(), 0).ok());
  }
}

TEST(SegmentIndex, RefreshFindsWhatAnotherWriterAppendedEachOnce) {
  SinkRig rig(Env::Default());
  SegmentPair first;
  ASSERT_TRUE(rig.Open(0, false, &first).ok());
  BufferedAppender sink(rig.Options(), std::move(first), rig.index(), rig.counters(),
                        rig.Hooks(false));
  std::vector<TestRecord> recs;
  Append(&rig, &sink, &recs, 0, 4);
  SegmentIndex reader(Env::Default(), rig.Path(""), 100);
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.present(), 4u);
  Append(&rig, &sink, &recs, 4, 7);
  EXPECT_FALSE(reader.Contains(5)) << "not before the next refresh";
  ASSERT_TRUE(reader.Refresh().ok());
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.present(), 7u) << "each record counted once";
  for (const auto& r : recs) {
    std::string buf;
    CachedSample s;
    ASSERT_TRUE(reader.Get(r.id, &buf, &s).ok()) << r.id;
    EXPECT_TRUE(std::equal(r.payload.begin(), r.payload.end(), s.pixels)) << r.id;
  }
  EXPECT_FALSE(reader.Contains(7));
}

TEST(SegmentIndex, ADamagedRecordIsCorruptionAndDropped) {
  SinkRig rig(Env::Default());
  std::vector<TestRecord> recs;
  {
    SegmentPair first;
    ASSERT_TRUE(rig.Open(0, false, &first).ok());
    BufferedAppender sink(rig.Options(), std::move(first), rig.index(), rig.counters(),
                          rig.Hooks(false));
    Append(&rig, &sink, &recs, 0, 3);
  }
  // One payload byte of record 1, flipped on disk.
  uint64_t at = recs[0].ie.record_len + cache_format::kRecordHeaderSize + 5;
  {
    std::fstream f(rig.Path("seg-0-0000.dat"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x01));
  }
  SegmentIndex reader(Env::Default(), rig.Path(""), 100);
  ASSERT_TRUE(reader.Refresh().ok());
  ASSERT_TRUE(reader.Contains(1));
  std::string buf;
  CachedSample s;
  Status st = reader.Get(1, &buf, &s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_FALSE(reader.Contains(1)) << "dropped: prepared again from the origin";
  EXPECT_TRUE(reader.Get(0, &buf, &s).ok());
  EXPECT_TRUE(reader.Get(2, &buf, &s).ok());
}

}  // namespace
}  // namespace ssdfeed
