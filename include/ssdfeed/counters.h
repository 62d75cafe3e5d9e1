// The one table of the counters a job publishes. Every other listing is
// derived from it: the Ctr slots (the stats file's layout), the Prometheus
// families, the fields of LoaderStats and CacheCounters, the keys of
// Loader.stats() and `ssdfeed bench loader --json`, and the Python
// attributes. tests/cc/counters_test.cc and tests/py/test_metrics.py walk it.
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
    "Encoded bytes read from the origin (slow storage).", LOADER)                                 \
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
    "Milliseconds from the start of a peer fill to this node's entry being complete.", LOADER)

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
