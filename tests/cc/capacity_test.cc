// Capacity alone: the ledger's text format, and two writers' reservations
// under one root's capacity (the second refused while the first holds its
// grant, granted once the first lets go).
#include "cache/capacity.h"

#include <gtest/gtest.h>

#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

TEST(CapacityLedger, ParsesRowsSkipsAnythingElseAndFormatsBack) {
  std::string text = "w3 4096\ngarbage\nw 12\nw7 -1\nw12 99999999999\nw5 1x\n\nw1 0";
  std::vector<LedgerRow> rows = ParseLedger(text);
  EXPECT_EQ(rows, (std::vector<LedgerRow>{{3, 4096}, {12, 99999999999ull}, {1, 0}}));
  EXPECT_EQ(ParseLedger(FormatLedger(rows)), rows);
  EXPECT_TRUE(ParseLedger("").empty());
}

TEST(Capacity, ASecondWriterIsRefusedUntilTheFirstLetsGo) {
  test::TempDir root;
  CacheOptions o;
  o.root = root.path();
  o.capacity_bytes = 1 << 20;
  o.env = Env::Default();  // Capacity takes options as resolved (Open fills this in)
  o.reserve_chunk = 4096;
  // The root's layout, and an entry in use (never evicted) for the writers.
  auto e = CacheEntry::Open(o, test::FakeKey(10));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  CacheCounters counters;
  Capacity first(o, (*e)->dir(), &counters), second(o, (*e)->dir(), &counters);
  auto a = first.Reserve(600 << 10);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_GE(*a, uint64_t{600 << 10});
  auto b = second.Reserve(600 << 10);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().IsNoSpace()) << b.status().ToString();
  EXPECT_NE(b.status().message().find(root.path()), std::string::npos) << "names the root";
  EXPECT_FALSE(second.lock_timed_out());
  first.Release();
  b = second.Reserve(600 << 10);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
}

}  // namespace
}  // namespace ssdfeed
