// The stats file: one page, little-endian, mapped MAP_SHARED by the process
// that owns it (which holds flock(LOCK_SH) on it while alive) and read by the
// exporter. Layout (byte offsets):
//   0  magic "SSDFSTAT"        8  u32 version, u32 size (bytes of the block)
//   16 id (16 random bytes)    32 i64 start time, unix microseconds
//   40 entry short id (16 bytes, NUL padded)   56 u64 admission (Admission)
//   64 u32 counter slots, u32 histogram slots, u32 bounds per histogram
//   128 u64 counters[kCounterSlots]
//   384 histograms[kHistSlots]: u64 buckets[kHistBounds + 1], count, sum_ns
//   1792 u64 times_ns[kTimeSlots] (Tmr slots; zeros in files written before
//        they were added, which read as no time accounted)
// Ended processes' totals live in ended-<entry>.stats: the same block,
// followed by u32 n and the n ids folded into it by the last fold (so a fold
// interrupted between writing the totals and deleting the files is not
// counted twice).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "ssdfeed/metrics.h"

namespace ssdfeed::metrics {

inline constexpr char kMagic[8] = {'S', 'S', 'D', 'F', 'S', 'T', 'A', 'T'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kBlockBytes = 4096;
inline constexpr uint32_t kCounterSlots = 32;
inline constexpr uint32_t kHistSlots = 8;
inline constexpr uint32_t kHistWords = kHistBounds + 3;
inline constexpr size_t kAdmissionOffset = 56;
// Most ids one fold lists in an ended file (a fold takes at most this many
// ended files of an entry; the rest wait for the next): bounds what a
// reader of an ended file allocates.
inline constexpr uint32_t kMaxFoldedIds = 1 << 16;
inline constexpr size_t kCountersOffset = 128;
inline constexpr size_t kHistsOffset = kCountersOffset + kCounterSlots * 8;
inline constexpr uint32_t kTimeSlots = 24;
inline constexpr size_t kTimesOffset = kHistsOffset + kHistSlots * kHistWords * 8;
// Words are stored in native byte order; the layout above is little endian.
static_assert(std::endian::native == std::endian::little,
              "the stats file is written in native byte order: little-endian hosts only");
static_assert(static_cast<uint32_t>(Ctr::kCount) <= kCounterSlots);
static_assert(static_cast<uint32_t>(Hist::kCount) <= kHistSlots);
static_assert(static_cast<uint32_t>(Tmr::kCount) <= kTimeSlots);
static_assert(kTimesOffset + kTimeSlots * 8 <= kBlockBytes);

struct BlockHeader {
  std::string id;  // 32 hex digits
  std::string entry;
  int64_t start_us = 0;
};

// Fills a fresh block's header.
void InitBlock(uint8_t* block, const std::string& id_raw16, const std::string& entry,
               int64_t start_us);
// Checks magic, version and size; a message naming what is wrong otherwise.
Status ValidateBlock(const uint8_t* block, size_t size, BlockHeader* header);
// Checks an ended file's first `got` bytes (its block and u32 count of
// folded ids, read together) and that the file is `file_size` bytes: the
// block, the count and exactly that many ids, at most kMaxFoldedIds.
Status CheckEnded(const uint8_t* b, size_t got, uint64_t file_size, uint32_t* n);
// Reads counters with atomic loads (the owner may be writing).
StatsSnapshot ReadBlock(const uint8_t* block);
// Writes a snapshot's totals into a block (for ended-<entry>.stats).
void WriteBlock(const StatsSnapshot& s, uint8_t* block);

// 16 raw bytes <-> 32 lowercase hex digits (stats file ids).
std::string HexId(const std::string& raw);
std::string RawId(const std::string& hex);

inline std::string StatsDir(const std::string& root) { return root + "/stats"; }

// Folds ended processes' files into their entries' ended-<entry>.stats.
// blocking=false gives up when another process is folding (job start).
Status FoldEnded(Env* env, const CacheOptions& cache, bool blocking,
                 std::vector<std::string>* warnings);

}  // namespace ssdfeed::metrics
