// The one table of the counters a job publishes. Every other listing is
// derived from it: the Ctr slots (the stats file's layout), the Prometheus
// families, the fields of LoaderStats and CacheCounters, the keys of
// Loader.stats() and `ssdfeed bench loader --json`, and the Python
// attributes. tests/cc/counters_test.cc and tests/py/test_metrics.py walk it.
// Below it, the table of the times a job accounts (SSDFEED_TIMERS: pipeline
// stages, busy and step time), from which the stats file's time region, the
// time families and LoaderStats::times derive likewise
// (tests/cc/stage_time_test.cc walks it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ssdfeed {

// X(slot, stats key, Prometheus name, help, owner). The row order is the
// on-disk order of a stats file: append only (a new row keeps the file
// version; reordering needs a new one). owner says who counts it:
// LOADER (the fetcher and loader add to the job's block), CACHE(member)
// (CacheCounters::member, copied into the block after stores and at
// stats()), PROCESS (a process-wide total, copied likewise). The stats key
// is also the LoaderStats field, so it is a C++ identifier.
#define SSDFEED_COUNTERS(X)                                                                       \
  X(kCacheHits, cache_hits, "ssdfeed_cache_hits_total", "Samples served from the cache.", LOADER) \
  X(kCacheMisses, cache_misses, "ssdfeed_cache_misses_total",                                     \
    "Samples not in the cache (read from the origin and prepared).", LOADER)                      \
  X(kCacheHitBytes, cache_bytes, "ssdfeed_cache_hit_bytes_total",                                 \
    "Prepared bytes served from the cache.", LOADER)                                              \
  X(kCacheMissBytes, cache_miss_bytes, "ssdfeed_cache_miss_bytes_total",                          \
    "Prepared bytes of the samples that missed the cache.", LOADER)                               \
  X(kOriginBytes, origin_bytes, "ssdfeed_origin_read_bytes_total",                                \
    "Bytes read from the origin (slow storage): what an s3:// server sent, index reads "          \
    "included; elsewhere the encoded bytes of the samples read.",                                 \
    LOADER)                                                                                       \
  X(kPrepared, prepared, "ssdfeed_samples_prepared_total", "Samples decoded and prepared.",       \
    LOADER)                                                                                       \
  X(kSamplesServed, samples, "ssdfeed_samples_served_total",                                      \
    "Samples handed to the consumer in batches.", LOADER)                                         \
  X(kBatchesServed, batches, "ssdfeed_batches_served_total", "Batches handed to the consumer.",   \
    LOADER)                                                                                       \
  X(kDecodeErrors, decode_errors, "ssdfeed_decode_errors_total", "Samples whose decode failed.",  \
    LOADER)                                                                                       \
  X(kCorruptRecords, corrupt_records, "ssdfeed_corrupt_records_total",                            \
    "Cache records that failed their checks when read.", LOADER)                                  \
  X(kCorruptRepaired, corrupt_repaired, "ssdfeed_corrupt_records_repaired_total",                 \
    "Corrupt cache records stored again from the origin.", LOADER)                                \
  X(kSkipped, skipped, "ssdfeed_samples_skipped_total", "Bad samples dropped (on_error=skip).",   \
    LOADER)                                                                                       \
  X(kClaimWaits, claim_waits, "ssdfeed_claim_waits_total",                                        \
    "Waits for another process preparing the same sample.", LOADER)                               \
  X(kCachePuts, cache_puts, "ssdfeed_cache_puts_total", "Records stored into the cache.",         \
    CACHE(puts))                                                                                  \
  X(kCachePutBytes, cache_put_bytes, "ssdfeed_cache_put_bytes_total",                             \
    "Bytes of the records stored into the cache.", CACHE(put_bytes))                              \
  X(kCacheWriteErrors, cache_write_errors, "ssdfeed_cache_write_errors_total",                    \
    "Cache writes or syncs that failed (ENOSPC, EIO).", CACHE(write_errors))                      \
  X(kCacheCapacityDenied, cache_capacity_denied, "ssdfeed_cache_capacity_denied_total",           \
    "Cache stores refused because the root's capacity is reached.", CACHE(capacity_denied))       \
  X(kEvictions, evictions, "ssdfeed_evictions_total", "Unused entries evicted to make room.",     \
    CACHE(evictions))                                                                             \
  X(kCacheDirectReads, cache_direct_reads, "ssdfeed_cache_direct_reads_total",                    \
    "Cache records read with O_DIRECT, bypassing the page cache (warm_read).",                    \
    CACHE(direct_reads))                                                                          \
  X(kCacheDirectWrites, cache_direct_writes, "ssdfeed_cache_direct_writes_total",                 \
    "Cache records written with O_DIRECT by the writer thread (fill_write).",                     \
    CACHE(direct_writes))                                                                         \
  X(kCacheLockTimeouts, cache_lock_timeouts, "ssdfeed_cache_lock_timeouts_total",                 \
    "Reservations that gave up waiting for the root's capacity lock (its holder stopped?).",      \
    PROCESS)                                                                                      \
  X(kPeerRecordsReceived, peer_records_received, "ssdfeed_peer_records_received_total",           \
    "Prepared records received from peer nodes, checked and stored (peer fill).", LOADER)         \
  X(kPeerBytesReceived, peer_bytes_received, "ssdfeed_peer_received_bytes_total",                 \
    "Bytes of the record batches received from peer nodes (peer fill).", LOADER)                  \
  X(kPeerRecordsSent, peer_records_sent, "ssdfeed_peer_records_sent_total",                       \
    "Prepared records sent to peer nodes (peer fill).", LOADER)                                   \
  X(kPeerBytesSent, peer_bytes_sent, "ssdfeed_peer_sent_bytes_total",                             \
    "Bytes of the record batches sent to peer nodes (peer fill).", LOADER)                        \
  X(kPeerRecordsRefused, peer_records_refused, "ssdfeed_peer_records_refused_total",              \
    "Records received from peers that failed their checks: not stored, sent again.", LOADER)      \
  X(kPeerFillCompleteMs, peer_fill_complete_ms, "ssdfeed_peer_fill_complete_milliseconds_total",  \
    "Milliseconds from the start of a peer fill to this node's entry being complete.", LOADER)    \
  X(kOriginRequests, origin_requests, "ssdfeed_origin_requests_total",                            \
    "Requests sent to an s3:// origin (listings, index reads, sample reads, retries).", LOADER)

// Counter slots, in table order.
enum class Ctr : uint32_t {
#define SSDFEED_CTR_ENUM(slot, key, name, help, owner) slot,
  SSDFEED_COUNTERS(SSDFEED_CTR_ENUM)
#undef SSDFEED_CTR_ENUM
      kCount
};

constexpr size_t kNumCounters = static_cast<size_t>(Ctr::kCount);
using CounterArray = std::array<uint64_t, kNumCounters>;

struct CounterInfo {
  Ctr slot;
  std::string_view key;   // Loader.stats() key, LoaderStats field, Python attribute
  std::string_view name;  // Prometheus metric
  std::string_view help;  // Prometheus HELP text
};

inline constexpr CounterInfo kCounters[] = {
#define SSDFEED_CTR_INFO(slot, key, name, help, owner) {Ctr::slot, #key, name, help},
    SSDFEED_COUNTERS(SSDFEED_CTR_INFO)
#undef SSDFEED_CTR_INFO
};
static_assert(std::size(kCounters) == kNumCounters);

constexpr const CounterInfo& Counter(Ctr c) { return kCounters[static_cast<size_t>(c)]; }

}  // namespace ssdfeed

namespace ssdfeed {

// X(slot, stats key, Prometheus name, stage label, help): the times a job
// accounts, in nanoseconds in the stats file's time region (after the
// histograms; append only, as counters). Rows sharing a Prometheus name are
// one family told apart by label stage="..."; an empty label: no label.
// The stats key of a stage row is the key in Loader.stats()["stages"];
// LoaderStatsFields lists each as "<key>_seconds".
//
// Worker stages, each sample's busy time cut at the boundaries below (they
// add up to the worker's busy time): on a miss origin_read, decode, prepare
// and cache_write; on a hit cache_read and record_decode (the cache codec);
// on both augment (crop, flip, dtype and layout into the batch) and handoff
// (the sample finished into its batch's slot). Consumer stages, per batch:
// collate (the batch's other fields and unequal-shape images) and handoff
// (the finished batch to the caller).
#define SSDFEED_TIMERS(X)                                                                         \
  X(kOriginRead, origin_read, "ssdfeed_stage_seconds_total", "origin_read",                       \
    "Time spent per stage of the input pipeline (workers and consumer).")                         \
  X(kDecode, decode, "ssdfeed_stage_seconds_total", "decode", "")                                 \
  X(kPrepare, prepare, "ssdfeed_stage_seconds_total", "prepare", "")                              \
  X(kCacheWrite, cache_write, "ssdfeed_stage_seconds_total", "cache_write", "")                   \
  X(kCacheRead, cache_read, "ssdfeed_stage_seconds_total", "cache_read", "")                      \
  X(kRecordDecode, record_decode, "ssdfeed_stage_seconds_total", "record_decode", "")             \
  X(kAugment, augment, "ssdfeed_stage_seconds_total", "augment", "")                              \
  X(kCollate, collate, "ssdfeed_stage_seconds_total", "collate", "")                              \
  X(kHandoff, handoff, "ssdfeed_stage_seconds_total", "handoff", "")                              \
  X(kWorkerBusy, worker_busy, "ssdfeed_worker_busy_seconds_total", "",                            \
    "Time the loader's workers spent on samples (not waiting for room), summed over workers.")    \
  X(kStep, step, "ssdfeed_step_seconds_total", "",                                                \
    "Time from one batch handed to the consumer to the next: the training step, data wait "       \
    "included.")                                                                                  \
  X(kRankMaxWait, rank_max_wait, "ssdfeed_rank_max_wait_seconds_total", "",                       \
    "Sum over steps of the slowest rank's data wait (torch.distributed, rank 0 of the job only; " \
    "see rank_wait_every).")

enum class Tmr : uint32_t {
#define SSDFEED_TMR_ENUM(slot, key, name, stage, help) slot,
  SSDFEED_TIMERS(SSDFEED_TMR_ENUM)
#undef SSDFEED_TMR_ENUM
      kCount
};

constexpr size_t kNumTimers = static_cast<size_t>(Tmr::kCount);
using TimerArray = std::array<uint64_t, kNumTimers>;  // nanoseconds

struct TimerInfo {
  Tmr slot;
  std::string_view key;    // Loader.stats() key (stages: in "stages")
  std::string_view name;   // Prometheus metric
  std::string_view stage;  // label stage="..."; empty: none
  std::string_view help;   // HELP text (the family's first row carries it)
  bool is_stage() const { return !stage.empty(); }
};

inline constexpr TimerInfo kTimers[] = {
#define SSDFEED_TMR_INFO(slot, key, name, stage, help) {Tmr::slot, #key, name, stage, help},
    SSDFEED_TIMERS(SSDFEED_TMR_INFO)
#undef SSDFEED_TMR_INFO
};
static_assert(std::size(kTimers) == kNumTimers);

constexpr const TimerInfo& Timer(Tmr t) { return kTimers[static_cast<size_t>(t)]; }

}  // namespace ssdfeed
