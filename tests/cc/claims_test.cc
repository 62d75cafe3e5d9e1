// Claims alone, two writers (slots 0 and 1) on one claims file: a live
// owner's claim is refused, a released or dead one's is taken and says so,
// a reused slot drops its predecessor's claims, and the record sequence is
// shared and never behind what is on disk.
#include "cache/claims.h"

#include <gtest/gtest.h>

#include <atomic>

#include "test_util.h"

namespace ssdfeed {
namespace {

class ClaimsPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Open(&a_, 0).ok());
    ASSERT_TRUE(Open(&b_, 1).ok());
  }
  Status Open(Claims* c, uint32_t slot) {
    return c->Open(Env::Default(), dir_.Sub("claims"), kN, 0600, slot,
                   [this](uint32_t s) { return s == 0 ? a_alive_.load() : true; });
  }
  static constexpr uint64_t kN = 100;
  test::TempDir dir_;
  std::atomic<bool> a_alive_{true};
  Claims a_, b_;
};

TEST_F(ClaimsPair, ALiveOwnersClaimIsRefusedUntilReleased) {
  bool released = true;
  EXPECT_TRUE(a_.TryClaim(7, &released));
  EXPECT_FALSE(released) << "nobody held it before";
  EXPECT_FALSE(b_.TryClaim(7));
  a_.Release(7);
  EXPECT_TRUE(b_.TryClaim(7, &released));
  EXPECT_TRUE(released) << "a may have stored it: look again";
  EXPECT_FALSE(a_.TryClaim(7));
}

TEST_F(ClaimsPair, ADeadOwnersClaimIsTakenOver) {
  ASSERT_TRUE(a_.TryClaim(3));
  ASSERT_FALSE(b_.TryClaim(3));
  a_alive_ = false;
  bool released = false;
  EXPECT_TRUE(b_.TryClaim(3, &released));
  EXPECT_TRUE(released);
}

TEST_F(ClaimsPair, AReusedSlotDropsItsPredecessorsClaims) {
  ASSERT_TRUE(a_.TryClaim(5));
  Claims again;  // slot 0's next writer (a_ still believed alive)
  ASSERT_TRUE(Open(&again, 0).ok());
  bool released = false;
  EXPECT_TRUE(b_.TryClaim(5, &released)) << "the stale claim was dropped";
  EXPECT_TRUE(released);
}

TEST_F(ClaimsPair, TheSequenceIsSharedAndNeverBehindTheDisk) {
  uint64_t s1 = a_.NextSeq(0), s2 = b_.NextSeq(0);
  EXPECT_LT(s1, s2);
  EXPECT_GT(a_.NextSeq(1000), 1000u) << "a claims file rebuilt after a crash catches up";
  EXPECT_GT(b_.NextSeq(0), 1001u);
}

TEST(Claims, UnmappedEveryClaimSucceeds) {
  test::TempDir dir;
  Claims c;
  // A directory where the file should be: Open fails, and the entry fills
  // without coordination.
  ASSERT_TRUE(Env::Default()->CreateDir(dir.Sub("claims")).ok());
  EXPECT_FALSE(c.Open(Env::Default(), dir.Sub("claims"), 10, 0600, 0, nullptr).ok());
  EXPECT_FALSE(c.mapped());
  EXPECT_TRUE(c.TryClaim(1));
  EXPECT_TRUE(c.TryClaim(1));
  EXPECT_EQ(c.NextSeq(41), 42u);
}

}  // namespace
}  // namespace ssdfeed
