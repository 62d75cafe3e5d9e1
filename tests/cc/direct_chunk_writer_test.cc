// DirectChunkWriter on its own: records staged across 1 MiB chunks are
// written, indexed and read back after Flush, the padding is cut at close,
// roll-over opens the segment the hooks give, claims handed over are
// released once stored, and a failed write is reported once, before the
// Flush that covered it returns. Skipped where the directory refuses O_DIRECT.
#include "cache/direct_chunk_writer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "record_sink_test_util.h"
#include "util/fault_injection_env.h"

namespace ssdfeed {
namespace {

using Op = FaultInjectionEnv::Op;
using test::MakeRecord;
using test::SinkRig;
using test::TestRecord;

#define SKIP_WITHOUT_DIRECT(rig)            \
  if (!test::DirectIoWorks((rig).Path(""))) \
  GTEST_SKIP() << (rig).Path("") << " refuses O_DIRECT (tmpfs?): set TMPDIR to a disk"

std::unique_ptr<DirectChunkWriter> Make(SinkRig* rig, SinkOptions o) {
  SegmentPair first;
  EXPECT_TRUE(rig->Open(0, true, &first).ok());
  return std::make_unique<DirectChunkWriter>(o, std::move(first), rig->index(), rig->counters(),
                                             rig->Hooks(true));
}

// ~300 KiB records: four fill a 1 MiB chunk and most span two.
TestRecord Big(uint64_t id) { return MakeRecord(id, 300 + static_cast<int>(id % 7), 1000); }

TEST(DirectChunkWriter, RecordsAcrossChunksAreIndexedByFlushAndThePaddingIsCut) {
  SinkRig rig(Env::Default());
  SKIP_WITHOUT_DIRECT(rig);
  auto sink = Make(&rig, rig.Options());
  std::vector<TestRecord> recs;
  uint64_t bytes = 0;
  for (uint64_t id = 0; id < 12; ++id) {
    recs.push_back(Big(id));
    ASSERT_TRUE(sink->Add(recs.back().ie, recs.back().hdr, recs.back().payload.data(), 7).ok());
    bytes += recs.back().ie.record_len;
  }
  sink->Flush();
  EXPECT_EQ(sink->staged(), 0u);
  for (const auto& r : recs) EXPECT_TRUE(rig.ReadsBack(r)) << r.id;
  EXPECT_EQ(rig.written(), 12u * 7) << "every record's charge comes back once";
  EXPECT_EQ(rig.counters()->direct_writes.load(), 12u);
  ASSERT_TRUE(sink->Sync().ok());
  sink.reset();
  EXPECT_EQ(rig.FileSize("seg-0-0000.dat"), bytes) << "the last block's padding is cut";
  EXPECT_EQ(rig.FileSize("seg-0-0000.idx"), 12 * cache_format::kIndexEntrySize);
  EXPECT_TRUE(rig.failures().empty());
}

TEST(DirectChunkWriter, RollsOverToTheSegmentTheHooksOpenWithoutPadding) {
  SinkRig rig(Env::Default());
  SKIP_WITHOUT_DIRECT(rig);
  TestRecord probe = Big(0);
  auto sink = Make(&rig, rig.Options(3 * uint64_t{probe.ie.record_len}));
  std::vector<TestRecord> recs;
  for (uint64_t id = 0; id < 7; ++id) {
    recs.push_back(MakeRecord(id, 300, 1000));  // one size: three per segment
    ASSERT_TRUE(sink->Add(recs.back().ie, recs.back().hdr, recs.back().payload.data(), 0).ok());
  }
  sink->Flush();
  EXPECT_EQ(rig.opened(), (std::vector<int>{1, 2}));
  EXPECT_EQ(rig.FileSize("seg-0-0000.dat"), 3 * uint64_t{recs[0].ie.record_len});
  sink.reset();
  EXPECT_EQ(rig.FileSize("seg-0-0001.dat"), 3 * uint64_t{recs[0].ie.record_len});
  EXPECT_EQ(rig.FileSize("seg-0-0002.dat"), recs[0].ie.record_len);
  for (const auto& r : recs) EXPECT_TRUE(rig.ReadsBack(r)) << r.id;
}

TEST(DirectChunkWriter, AClaimHandedOverIsReleasedOnceTheRecordIsStored) {
  SinkRig rig(Env::Default());
  SKIP_WITHOUT_DIRECT(rig);
  auto sink = Make(&rig, rig.Options());
  TestRecord r = MakeRecord(42, 10, 10);
  EXPECT_FALSE(sink->ReleaseWhenStored(42)) << "not staged: the caller releases";
  ASSERT_TRUE(sink->Add(r.ie, r.hdr, r.payload.data(), 0).ok());
  // The idle seal may have written it already; either way the claim is
  // released exactly once, by whoever holds it when the record is stored.
  bool handed = sink->ReleaseWhenStored(42);
  sink->Flush();
  EXPECT_TRUE(rig.ReadsBack(r));
  EXPECT_EQ(rig.released(), handed ? std::vector<uint64_t>{42} : std::vector<uint64_t>{});
  EXPECT_FALSE(sink->FlushIfStaged(42)) << "stored: nothing staged to flush";
}

TEST(DirectChunkWriter, AFailedWriteIsReportedOnceBeforeTheFlushReturns) {
  FaultInjectionEnv env(Env::Default());
  SinkRig rig(&env);
  SKIP_WITHOUT_DIRECT(rig);
  auto sink = Make(&rig, rig.Options());
  env.FailAfter(Op::kWrite, 0, -1, Status::NoSpace("No space left on device"), ".dat");
  std::vector<TestRecord> recs;
  uint64_t staged = 0;
  for (uint64_t id = 0; id < 3; ++id) {
    recs.push_back(Big(id));
    // Staged: the failure comes later, from the writer thread (a later Add
    // may already see it).
    Status s = sink->Add(recs.back().ie, recs.back().hdr, recs.back().payload.data(), 5);
    if (s.ok())
      ++staged;
    else
      EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  }
  ASSERT_GE(staged, 1u);
  sink->Flush();
  ASSERT_EQ(rig.failures().size(), 1u) << "reported before Flush returns";
  EXPECT_NE(rig.failures()[0].find("No space left"), std::string::npos);
  EXPECT_EQ(sink->staged(), 0u) << "what was staged is dropped";
  Status s = sink->Sync();
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  TestRecord late = MakeRecord(9, 10, 10);
  EXPECT_TRUE(sink->Add(late.ie, late.hdr, late.payload.data(), 5).IsNoSpace());
  EXPECT_EQ(rig.failures().size(), 1u) << "counted once, when it happened";
  for (const auto& r : recs) EXPECT_FALSE(rig.index()->Contains(r.id));
  EXPECT_EQ(rig.written(), 5 * staged) << "a dropped record's charge comes back too";
  env.ClearFaults();
}

}  // namespace
}  // namespace ssdfeed
