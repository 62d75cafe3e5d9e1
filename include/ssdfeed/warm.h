// Warm-up: fills the cache entry of (source, preparation) before training,
// on a pool of worker threads, resumably (a rerun prepares only what is
// missing). `ssdfeed warm`, Python's ssdfeed.warm() and C++ callers share it.
//
//   ssdfeed::WarmOptions o;
//   o.prepare.resize_short = 256;
//   ssdfeed::WarmResult r;
//   ssdfeed::Status s = ssdfeed::Warm("folder:/data/train", o, &r);
//   if (s.ok() && !r.complete()) ... // the cache filled, or progress said stop
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// What filling an entry will cost, known before filling it: `ssdfeed warm`
// prints it so that nobody stores 900 MiB of full-size pixels by surprise.
// Samples probed when no count is given: enough for a size within a few
// percent on ImageNet-like data, fast enough to print before a warm-up.
constexpr int kDefaultEstimateProbes = 32;

// Per sample on disk besides its pixels: a 40-byte record header in the
// .dat, a 48-byte index entry in the .idx and a u32 in the claims file
// (docs/cache-format.md).
constexpr uint64_t kEntryBytesPerSample = 40 + 48 + 4;
// Per entry: the claims header and the small files (manifest.json,
// status.json, skipped.json, last_used, locks), generously.
constexpr uint64_t kEntryBytesFixed = 64 + 4096;

struct EntryEstimate {
  uint64_t samples = 0;       // in the source
  uint64_t tried = 0;         // samples read for the estimate
  uint64_t probed = 0;        // ... of which decoded and prepared
  uint64_t origin_bytes = 0;  // encoded bytes of the probed samples
  uint64_t pixel_bytes = 0;   // prepared pixels of the probed samples
  // Their field sections (masks, boxes, arrays...) as records hold them.
  uint64_t field_bytes = 0;
  // The whole entry on disk: the probed records' payloads (pixels and
  // fields) scaled to the source, plus the format's overhead (0 when nothing
  // could be probed). `ssdfeed warm`, `ssdfeed plan` and Python's cold-cache
  // log line all print this.
  uint64_t entry_bytes() const {
    if (!probed) return 0;
    return (pixel_bytes + field_bytes) * samples / probed + samples * kEntryBytesPerSample +
           kEntryBytesFixed;
  }
};

// Reads and prepares (as a cache miss would) up to `probes` samples spread evenly over the source
// (ids i*N/n, so every class and shard is represented). Samples that fail
// to read or decode are left out of the estimate (tried - probed of them).
EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec,
                            int probes = kDefaultEstimateProbes);

struct WarmProgress {
  uint64_t done = 0;   // samples visited (stored, found present, or failed)
  uint64_t total = 0;  // samples to visit: the source's, or WarmOptions::ids'

  double seconds = 0;  // since the workers started
};

struct WarmOptions {
  // How the source is opened, when Warm is given a URI; its on_error also
  // decides what a bad sample does: kRaise (the default) stops the warm-up
  // and returns the sample's error, kSkip records it in WarmResult::skipped
  // and, once every sample has been visited, in the entry's skipped.json (so
  // listings say "complete (N skipped)" rather than "partial").
  SourceOptions source;
  // The preparation. Default: PrepareSpec{} (full-size RGB), as everywhere.
  PrepareSpec prepare;
  // The cache root and its policy. Default: CacheOptions{} (root "" is
  // DefaultCacheRoot()).
  CacheOptions cache;
  // Worker threads. Default 0: DefaultWorkers() (one per usable CPU).
  int workers = 0;
  // Only these sample ids (each below the source's size; a peer fill's
  // share of a node). Default empty: every sample.
  std::vector<uint64_t> ids;
  // Called on the calling thread once before the workers start and then
  // about every 100 ms while they run; returning false stops them (the entry is synced and keeps
  // what was stored: a rerun resumes). Default: none.
  std::function<bool(const WarmProgress&)> progress;
};

struct WarmSkipped {
  uint64_t id = 0;
  std::string sample;  // Source::Describe(id): the origin file (and record)
  std::string error;
};

struct WarmResult {
  std::string dir;   // the entry's directory (empty: no entry was opened)
  std::string spec;  // PrepareSpec::Canonical()
  uint64_t samples_total = 0;
  uint64_t samples_present = 0;  // in the entry after the warm-up
  uint64_t samples_visited = 0;
  uint64_t prepared = 0;        // prepared and stored by this call
  uint64_t cache_hits = 0;      // already present
  uint64_t claim_waits = 0;     // waited for another process preparing the same sample
  uint64_t errors = 0;          // samples that failed to read or prepare
  uint64_t bytes_prepared = 0;  // prepared bytes of the samples that missed
  // Read from the origin: what an s3:// server sent (index reads
  // included), elsewhere the samples' encoded bytes; and requests (s3://).
  uint64_t origin_bytes = 0;
  uint64_t origin_requests = 0;
  std::vector<WarmSkipped> skipped;  // with on_error kSkip, sorted by id
  bool cache_full = false;           // the cache stopped admitting before the end
  bool interrupted = false;          // progress returned false
  bool started = false;              // the workers ran (false: an error came first)
  double seconds = 0;
  std::string warning;                // the entry's: why admission stopped
  std::vector<std::string> warnings;  // others (metrics file, skipped.json)
  // Every sample is in the entry or was skipped.
  bool complete() const { return samples_present + skipped.size() >= samples_total; }
};

// Opens the source at uri (options.source) and warms its entry.
Status Warm(const std::string& uri, const WarmOptions& options, WarmResult* result);
// The same for a source already open (not owned; options.source.on_error
// still applies, and must be what the source was opened with: it is part of
// the entry's key).
Status Warm(const Source& source, const WarmOptions& options, WarmResult* result);
// Error statuses: the source or the entry cannot be opened (NoSpace when the
// root has no room even for a new entry), the entry belongs to another user
// (InvalidArgument), a sample failed under kRaise (its error), or the final
// sync failed. A full cache or a stop by progress is not an error: see
// result->complete(), cache_full and interrupted. *result is filled as far
// as the work went, also on error.

}  // namespace ssdfeed
