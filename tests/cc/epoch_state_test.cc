// The loader's epoch state on its own: where a pass starts, what a saved
// state holds, and which states load.
#include "pipeline/epoch_state.h"

#include <gtest/gtest.h>

namespace ssdfeed {
namespace {

LoaderOptions Opts(int rank = 0, int world_size = 1) {
  LoaderOptions o;
  o.batch_size = 3;
  o.shuffle = true;
  o.seed = 9;
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

TEST(EpochState, ASavedStateLoadsBackToTheSamePlace) {
  EpochState a(Opts(), 20);
  a.SetEpoch(4);
  a.Replan();
  EXPECT_EQ(a.order(), EpochOrder(20, true, 9, 4, 0, 1, false));
  EXPECT_EQ(a.num_batches(), 7u);
  LoaderState s = a.Save(8, 2);
  EXPECT_EQ(s.epoch, 4u);
  EXPECT_EQ(s.position, 8u);
  EXPECT_EQ(s.batches_consumed, 2u);
  EXPECT_EQ(s.num_samples, 20u);
  EpochState b(Opts(), 20);
  ASSERT_TRUE(b.Check(s).ok());
  b.Load(s);
  EXPECT_EQ(b.epoch(), 4u);
  EXPECT_EQ(b.start_pos(), 8u);
  EXPECT_EQ(b.start_batch(), 2u);
  EXPECT_EQ(b.order(), a.order());
  b.SetEpoch(5);
  EXPECT_EQ(b.start_pos(), 0u) << "a new epoch starts at its first batch";
  EXPECT_EQ(b.start_batch(), 0u);
}

// An older state without a position had no skips: batches * batch_size;
// and a position past the plan is clamped to its end.
TEST(EpochState, LoadFillsInAMissingPositionAndClampsOne) {
  EpochState e(Opts(), 20);
  LoaderState s = e.Save(0, 3);
  e.Load(s);
  EXPECT_EQ(e.start_pos(), 9u);
  s = e.Save(500, 500);
  e.Load(s);
  EXPECT_EQ(e.start_batch(), 7u);
  EXPECT_EQ(e.start_pos(), 20u);
}

TEST(EpochState, RefusesAStateOfAnotherLoader) {
  EpochState e(Opts(1, 2), 20);
  LoaderState s = e.Save(0, 0);
  s.seed = 10;
  Status st = e.Check(s);
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("does not match this loader"), std::string::npos) << st.message();
  s = EpochState(Opts(0, 2), 20).Save(0, 0);
  st = e.Check(s);
  EXPECT_NE(st.message().find("state of rank 0 of 2 does not match this loader's rank 1 of 2"),
            std::string::npos)
      << st.message();
}

// Every old rank read its whole share of epoch 0: the merged state loads
// into a loader of another world size at the start of epoch 1.
TEST(EpochState, AMergedStateOfAFinishedEpochLoadsAtTheNextOne) {
  std::vector<LoaderState> states;
  for (int r = 0; r < 2; ++r) states.push_back(EpochState(Opts(r, 2), 20).Save(10, 4));
  auto merged = MergeStates(states);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EpochState e(Opts(0, 1), 20);
  ASSERT_TRUE(e.Check(*merged).ok());
  e.Load(*merged);
  EXPECT_EQ(e.epoch(), 1u);
  EXPECT_EQ(e.start_pos(), 0u);
  EXPECT_EQ(e.order().size(), 20u);
}

}  // namespace
}  // namespace ssdfeed
