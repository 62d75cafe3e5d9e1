// What filling an entry will cost, known before filling it: `ssdfeed warm`
// prints it so that nobody stores 900 MiB of full-size pixels by surprise.
#pragma once

#include <cstdint>

#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

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
  uint64_t pixel_bytes = 0;   // prepared bytes of the probed samples
  // The whole entry on disk: the probed pixels scaled to the source, plus
  // the format's overhead (0 when nothing could be probed). `ssdfeed warm`,
  // `ssdfeed plan` and Python's cold-cache log line all print this.
  uint64_t entry_bytes() const {
    if (!probed) return 0;
    return pixel_bytes * samples / probed + samples * kEntryBytesPerSample + kEntryBytesFixed;
  }
};

// Decodes and prepares up to `probes` samples spread evenly over the source
// (ids i*N/n, so every class and shard is represented). Samples that fail
// to read or decode are left out of the estimate (tried - probed of them).
EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec,
                            int probes = kDefaultEstimateProbes);

}  // namespace ssdfeed
