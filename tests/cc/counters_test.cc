// The counter table (ssdfeed/counters.h) is the one list of counters: these
// tests walk it and check each listing derived from it (the stats-file
// slots, LoaderStats, Loader.stats()'s keys, the exporter, CacheCounters),
// so a counter added to one listing by hand and not another cannot pass.
#include "ssdfeed/counters.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "metrics/families.h"
#include "ssdfeed/augment.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/source.h"

namespace ssdfeed {
namespace {

// Each slot's value in the snapshots below: distinct per slot, so a listing
// that reads the wrong slot shows.
uint64_t ValueOf(size_t slot) { return 1000 + 7 * slot; }

CounterArray DistinctCounters() {
  CounterArray c{};
  for (size_t i = 0; i < kNumCounters; ++i) c[i] = ValueOf(i);
  return c;
}

TEST(CounterTable, RowsAreTheirSlotsWithUniqueNames) {
  std::set<std::string_view> keys, names;
  for (size_t i = 0; i < kNumCounters; ++i) {
    const CounterInfo& c = kCounters[i];
    EXPECT_EQ(static_cast<size_t>(c.slot), i) << c.key;
    EXPECT_TRUE(keys.insert(c.key).second) << "duplicate stats key " << c.key;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate metric " << c.name;
    EXPECT_TRUE(c.name.starts_with("ssdfeed_") && c.name.ends_with("_total")) << c.name;
    EXPECT_FALSE(c.help.empty()) << c.name;
  }
}

// Stats files on disk are read by other processes (the exporter, jobs of
// another build): a slot's position is the file format, so reordering or
// renaming a row must fail here (and then bump the stats file's version).
TEST(CounterTable, StatsFileSlotOrderIsPinned) {
  const char* on_disk[] = {
      "cache_hits",
      "cache_misses",
      "cache_bytes",
      "cache_miss_bytes",
      "origin_bytes",
      "prepared",
      "samples",
      "batches",
      "decode_errors",
      "corrupt_records",
      "corrupt_repaired",
      "skipped",
      "claim_waits",
      "cache_puts",
      "cache_put_bytes",
      "cache_write_errors",
      "cache_capacity_denied",
      "evictions",
      "cache_direct_reads",
      "cache_direct_writes",
      "cache_lock_timeouts",
  };
  ASSERT_GE(kNumCounters, std::size(on_disk));  // appending a row is fine
  for (size_t i = 0; i < std::size(on_disk); ++i) EXPECT_EQ(kCounters[i].key, on_disk[i]) << i;
}

TEST(CounterTable, EveryCounterIsALoaderStatsField) {
  LoaderStats s;
  s.SetCounters(DistinctCounters());
  std::map<std::string, double> fields;
  for (const auto& [k, v] : LoaderStatsFields(s)) {
    EXPECT_TRUE(fields.emplace(k, v).second) << "duplicate field " << k;
  }
  for (const auto& c : kCounters) {
    size_t i = static_cast<size_t>(c.slot);
    EXPECT_EQ(s[c.slot], ValueOf(i)) << c.key;
    ASSERT_TRUE(fields.count(std::string(c.key))) << c.key << " missing from LoaderStatsFields";
    EXPECT_EQ(fields[std::string(c.key)], static_cast<double>(ValueOf(i))) << c.key;
  }
  EXPECT_EQ(fields.size(), kNumCounters + 5 + kNumTimers);  // + wait_seconds, step_wait_*, times
  EXPECT_TRUE(fields.count("wait_seconds"));
}

TEST(CounterTable, EveryCounterIsAnExportedFamily) {
  StatsSnapshot snap;
  snap.counters = DistinctCounters();
  metrics::Families families;
  metrics::AddStatsFamilies({{"0123456789ab", snap}}, &families);
  std::map<std::string, const prometheus::MetricFamily*> by_name;
  for (const auto& f : families) by_name[f.name] = &f;
  for (const auto& c : kCounters) {
    auto it = by_name.find(std::string(c.name));
    ASSERT_NE(it, by_name.end()) << c.name << " not exported";
    const auto& f = *it->second;
    EXPECT_EQ(f.help, c.help);
    EXPECT_EQ(f.type, prometheus::MetricType::Counter);
    ASSERT_EQ(f.metric.size(), 1u);
    EXPECT_EQ(f.metric[0].counter.value, static_cast<double>(ValueOf(static_cast<size_t>(c.slot))));
  }
}

TEST(CounterTable, CacheCountersMapToDistinctSlots) {
  CacheCounters cc;
  std::set<const std::atomic<uint64_t>*> seen;
  size_t n = 0;
  for (size_t i = 0; i < kNumCounters; ++i) {
    auto m = kCacheCounterOf[i];
    if (m == nullptr) continue;
    ++n;
    EXPECT_TRUE(seen.insert(&(cc.*m)).second) << kCounters[i].key;
  }
  // puts, put_bytes, write_errors, capacity_denied, evictions, direct reads
  // and writes: what the entry counts and SyncCacheCounters copies.
  EXPECT_EQ(n, 7u);
  EXPECT_EQ(kCacheCounterOf[static_cast<size_t>(Ctr::kCachePuts)], &CacheCounters::puts);
  EXPECT_EQ(kCacheCounterOf[static_cast<size_t>(Ctr::kCacheHits)], nullptr);
}

// Each spelling parses back to its value and names it; a bad one is an
// InvalidArgument naming the option, the value given and every allowed one.
template <typename E>
void ExpectRoundTrip(const std::string& bad_message) {
  std::set<std::string> seen;
  for (const auto& s : Spellings<E>()) {
    EXPECT_TRUE(seen.insert(s.name).second) << s.name;
    auto parsed = ParseEnum<E>(s.name);
    ASSERT_TRUE(parsed.ok()) << s.name;
    EXPECT_EQ(*parsed, s.value);
    EXPECT_STREQ(EnumName(s.value), s.name);
  }
  auto bad = ParseEnum<E>("bogus");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_EQ(bad.status().message(), bad_message);
}

TEST(EnumTable, SpellingsRoundTripAndBadOnesNameTheAllowed) {
  ExpectRoundTrip<OnError>("on_error must be 'raise' or 'skip', not 'bogus'");
  ExpectRoundTrip<ShardMode>("shard must be 'global', 'sticky' or 'rotate', not 'bogus'");
  ExpectRoundTrip<WarmRead>("warm_read must be 'auto', 'buffered' or 'direct', not 'bogus'");
  ExpectRoundTrip<FillWrite>("fill_write must be 'auto', 'buffered' or 'direct', not 'bogus'");
  ExpectRoundTrip<DType>("dtype must be 'uint8', 'float32' or 'float16', not 'bogus'");
  ExpectRoundTrip<Layout>("layout must be 'NHWC' or 'NCHW', not 'bogus'");
  EXPECT_EQ(ParseEnum<FillWrite>("x", "--fill-write").status().message(),
            "--fill-write must be 'auto', 'buffered' or 'direct', not 'x'");
}

}  // namespace
}  // namespace ssdfeed
