// BufferedAppender on its own: records and their index entries appended in
// order and indexed on return, roll-over to the segment the hooks open, and
// a failed append or sync reported once with nothing appended after it.
#include "cache/buffered_appender.h"

#include <gtest/gtest.h>

#include "record_sink_test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;
using test::MakeRecord;
using test::SinkRig;
using test::TestRecord;

std::unique_ptr<BufferedAppender> Make(SinkRig* rig, SinkOptions o) {
  SegmentPair first;
  EXPECT_TRUE(rig->Open(0, false, &first).ok());
  return std::make_unique<BufferedAppender>(o, std::move(first), rig->index(), rig->counters(),
                                            rig->Hooks(false));
}

TEST(BufferedAppender, AppendsEachRecordThenItsEntryAndIndexesOnReturn) {
  SinkRig rig(Env::Default());
  auto sink = Make(&rig, rig.Options());
  std::vector<TestRecord> recs;
  uint64_t offset = 0;
  for (uint64_t id = 0; id < 5; ++id) {
    recs.push_back(MakeRecord(id, 10 + static_cast<int>(id), 33));
    const TestRecord& r = recs.back();
    ASSERT_TRUE(sink->Add(r.ie, r.hdr, r.payload.data(), 0).ok());
    EXPECT_TRUE(rig.index()->Contains(id)) << "indexed before Add returns";
    EXPECT_EQ(sink->staged(), 0u);
    offset += r.ie.record_len;
  }
  ASSERT_TRUE(sink->Sync().ok());
  EXPECT_EQ(rig.FileSize("seg-0-0000.dat"), offset);
  EXPECT_EQ(rig.FileSize("seg-0-0000.idx"), 5 * cache_format::kIndexEntrySize);
  for (const auto& r : recs) EXPECT_TRUE(rig.ReadsBack(r));
  EXPECT_EQ(rig.counters()->puts.load(), 5u);
  EXPECT_EQ(rig.counters()->put_bytes.load(), offset);
  EXPECT_TRUE(rig.failures().empty());
}

TEST(BufferedAppender, RollsOverToTheSegmentTheHooksOpen) {
  SinkRig rig(Env::Default());
  TestRecord probe = MakeRecord(0, 20, 50);
  uint64_t seg_bytes = probe.ie.record_len * 2 + probe.ie.record_len / 2;  // two fit
  auto sink = Make(&rig, rig.Options(seg_bytes));
  std::vector<TestRecord> recs;
  for (uint64_t id = 0; id < 5; ++id) {
    recs.push_back(MakeRecord(id, 20, 50));
    EXPECT_EQ(sink->StartsSegment(recs.back().ie.record_len), id % 2 == 0 && id > 0) << id;
    ASSERT_TRUE(sink->Add(recs.back().ie, recs.back().hdr, recs.back().payload.data(), 0).ok());
  }
  EXPECT_EQ(rig.opened(), (std::vector<int>{1, 2}));
  sink.reset();
  EXPECT_EQ(rig.FileSize("seg-0-0000.dat"), 2 * probe.ie.record_len);
  EXPECT_EQ(rig.FileSize("seg-0-0002.dat"), probe.ie.record_len);
  for (const auto& r : recs) EXPECT_TRUE(rig.ReadsBack(r));
}

TEST(BufferedAppender, AFailedAppendIsReportedOnceAndNothingIsAppendedAfterIt) {
  FaultInjectionEnv env(Env::Default());
  SinkRig rig(&env);
  auto sink = Make(&rig, rig.Options());
  TestRecord a = MakeRecord(1, 8, 8), b = MakeRecord(2, 8, 8);
  env.FailAfter(Op::kWrite, 0, 1, Status::IOError("Input/output error"), ".dat");
  Status s = sink->Add(a.ie, a.hdr, a.payload.data(), 0);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  ASSERT_EQ(rig.failures().size(), 1u);
  int writes = env.Count(Op::kWrite);
  // The fault is spent: a write now would succeed, but none is tried.
  s = sink->Add(b.ie, b.hdr, b.payload.data(), 0);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos);
  EXPECT_EQ(env.Count(Op::kWrite), writes);
  EXPECT_EQ(rig.failures().size(), 1u);
  EXPECT_FALSE(rig.index()->Contains(1));
  EXPECT_FALSE(rig.index()->Contains(2));
}

TEST(BufferedAppender, AFailedSyncIsReturnedAndReported) {
  FaultInjectionEnv env(Env::Default());
  SinkRig rig(&env);
  auto sink = Make(&rig, rig.Options());
  TestRecord a = MakeRecord(1, 8, 8);
  ASSERT_TRUE(sink->Add(a.ie, a.hdr, a.payload.data(), 0).ok());
  env.FailAfter(Op::kSync, 0, 1, Status::IOError("Input/output error"), ".dat");
  EXPECT_TRUE(sink->Sync().IsIOError());
  EXPECT_EQ(rig.failures().size(), 1u);
  EXPECT_TRUE(rig.ReadsBack(a));
}

// sync_bytes reached: the appender's own thread syncs; the destructor joins
// it and syncs the rest. Every record is then on disk and indexed.
TEST(BufferedAppender, BackgroundSyncsAndCloseKeepEveryRecord) {
  FaultInjectionEnv env(Env::Default());
  SinkRig rig(&env);
  std::vector<TestRecord> recs;
  {
    auto sink = Make(&rig, rig.Options(1ull << 30, 500));
    for (uint64_t id = 0; id < 20; ++id) {
      recs.push_back(MakeRecord(id, 10, 10));
      ASSERT_TRUE(sink->Add(recs.back().ie, recs.back().hdr, recs.back().payload.data(), 0).ok());
    }
  }
  EXPECT_GE(env.Count(Op::kSync), 2);  // at least the close's data and index syncs
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  for (const auto& r : recs) EXPECT_TRUE(rig.ReadsBack(r));
}

}  // namespace
}  // namespace ssdfeed
