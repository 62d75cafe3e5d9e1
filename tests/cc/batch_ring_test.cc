// The loader's ring of chunk slots on its own: which positions a worker
// gets, backpressure, errors travelling with their chunk, a restart in
// the middle of a chunk, and many workers against one consumer.
#include "pipeline/batch_ring.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace ssdfeed {
namespace {

constexpr size_t kSampleBytes = 4;

BatchRing MakeRing(size_t nslots, size_t batch_size) {
  return BatchRing(nslots, batch_size, kSampleBytes, BatchPool::Create());
}

// Takes and finishes every position of the runs it gets until Take says no.
size_t FillAvailable(BatchRing* ring, size_t group) {
  size_t taken = 0;
  RingRun run;
  while (ring->Take(group, true, &run)) {
    for (size_t j = 0; j < run.n; ++j) ring->Finish(run.slot, Status::OK());
    taken += run.n;
  }
  return taken;
}

TEST(BatchRing, RunsStopAtChunkEndsAndTheEpochsEnd) {
  BatchRing ring = MakeRing(3, 4);
  ring.Start(0, 10);  // chunks of 4, 4 and 2
  std::vector<std::pair<uint64_t, size_t>> runs;
  RingRun run;
  while (ring.Take(3, true, &run)) {
    runs.emplace_back(run.k, run.n);
    for (size_t j = 0; j < run.n; ++j) ring.Finish(run.slot, Status::OK());
  }
  std::vector<std::pair<uint64_t, size_t>> want = {{0, 3}, {3, 1}, {4, 3}, {7, 1}, {8, 2}};
  EXPECT_EQ(runs, want);
  for (uint64_t c = 0; c < 3; ++c) {
    RingSlot* slot = nullptr;
    ASSERT_TRUE(ring.WaitChunk(c, &slot).ok());
    EXPECT_EQ(slot->count, c < 2 ? 4u : 2u);
    EXPECT_EQ(slot->buffer->images.size(), 4 * kSampleBytes);
    ring.Release(c);
  }
  EXPECT_FALSE(ring.Take(1, false, &run)) << "the epoch is over";
}

// A worker never runs more than nslots chunks ahead of the consumer: the
// slot of chunk c + nslots is the one chunk c still holds.
TEST(BatchRing, WorkersWaitForTheConsumerToReleaseASlot) {
  BatchRing ring = MakeRing(2, 2);
  ring.Start(0, 100);
  EXPECT_EQ(FillAvailable(&ring, 1), 4u) << "two slots of two positions";
  RingSlot* slot = nullptr;
  ASSERT_TRUE(ring.WaitChunk(0, &slot).ok());
  ring.Release(0);
  EXPECT_EQ(FillAvailable(&ring, 1), 2u) << "one slot freed";
  ASSERT_TRUE(ring.WaitChunk(2, &slot).ok());
  EXPECT_EQ(slot->batch, 2u);
}

TEST(BatchRing, AChunkCarriesItsFirstError) {
  BatchRing ring = MakeRing(2, 3);
  ring.Start(0, 6);
  RingRun run;
  ASSERT_TRUE(ring.Take(3, false, &run));
  ring.Finish(run.slot, Status::OK());
  ring.Finish(run.slot, Status::Corruption("first"));
  ring.Finish(run.slot, Status::IOError("second"));
  ASSERT_TRUE(ring.Take(3, false, &run));
  for (int j = 0; j < 3; ++j) ring.Finish(run.slot, Status::OK());
  RingSlot* slot = nullptr;
  Status s = ring.WaitChunk(0, &slot);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message(), "first");
  ring.Release(0);
  EXPECT_TRUE(ring.WaitChunk(1, &slot).ok()) << "the error stays with its chunk";
}

// Resuming at plan position 5 of chunks of 4: chunk 1 is done once its
// three remaining positions are, and no worker is handed position 4 again.
TEST(BatchRing, ARestartMidChunkFillsOnlyTheRest) {
  BatchRing ring = MakeRing(2, 4);
  ring.Start(5, 12);
  RingRun run;
  ASSERT_TRUE(ring.Take(8, false, &run));
  EXPECT_EQ(run.k, 5u);
  EXPECT_EQ(run.n, 3u);
  for (size_t j = 0; j < run.n; ++j) ring.Finish(run.slot, Status::OK());
  RingSlot* slot = nullptr;
  ASSERT_TRUE(ring.WaitChunk(1, &slot).ok());
  EXPECT_EQ(slot->done, 4u);
}

TEST(BatchRing, StopEndsAWorkerWaitingForSpace) {
  BatchRing ring = MakeRing(1, 1);
  ring.Start(0, 10);
  RingRun run;
  ASSERT_TRUE(ring.Take(1, false, &run));  // the only slot, never released
  bool took = true;
  std::thread worker([&] { took = ring.Take(1, false, &run); });  // waits for space
  ring.Stop();
  worker.join();
  EXPECT_FALSE(took);
  EXPECT_FALSE(ring.Take(1, false, &run));
}

// Samples of differing shapes: a chunk gets a staging image per position
// and a buffer for labels only.
TEST(BatchRing, WithoutASampleSizeChunksStageTheirSamples) {
  BatchRing ring(2, 3, 0, BatchPool::Create());
  ring.Start(0, 3);
  RingRun run;
  ASSERT_TRUE(ring.Take(3, false, &run));
  EXPECT_EQ(run.slot->staging.size(), 3u);
  EXPECT_TRUE(run.slot->buffer->images.empty());
  EXPECT_GE(run.slot->buffer->labels.size(), 3u);
}

// Many workers taking runs of varied sizes, one consumer taking chunks in
// order: every position lands once, in its own chunk at its own place.
TEST(BatchRing, ManyWorkersFillEveryPositionOnce) {
  constexpr size_t kBatch = 5, kSlots = 3;
  constexpr uint64_t kEnd = 503;
  BatchRing ring = MakeRing(kSlots, kBatch);
  ring.Start(0, kEnd);
  std::vector<std::thread> workers;
  for (size_t w = 0; w < 4; ++w)
    workers.emplace_back([&ring, w] {
      RingRun run;
      while (ring.Take(1 + w, false, &run)) {
        for (size_t j = 0; j < run.n; ++j) {
          run.slot->buffer->labels[(run.k + j) % kBatch] = static_cast<int64_t>(run.k + j);
          ring.Finish(run.slot, Status::OK());
        }
      }
    });
  uint64_t seen = 0;
  for (uint64_t c = 0; c * kBatch < kEnd; ++c) {
    RingSlot* slot = nullptr;
    ASSERT_TRUE(ring.WaitChunk(c, &slot).ok());
    ASSERT_EQ(slot->batch, c);
    for (size_t i = 0; i < slot->count; ++i, ++seen)
      ASSERT_EQ(slot->buffer->labels[i], static_cast<int64_t>(seen));
    ring.Release(c);
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(seen, kEnd);
}

}  // namespace
}  // namespace ssdfeed
