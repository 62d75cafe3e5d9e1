// What filling an entry will cost, known before filling it: `ssdfeed warm`
// prints it so that nobody stores 900 MiB of full-size pixels by surprise.
#pragma once

#include <cstdint>

#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

struct EntryEstimate {
  uint64_t samples = 0;       // in the source
  uint64_t probed = 0;        // samples decoded for the estimate
  uint64_t origin_bytes = 0;  // encoded bytes of the probed samples
  uint64_t pixel_bytes = 0;   // prepared bytes of the probed samples
  // Scaled to the whole source (0 when nothing could be probed).
  uint64_t entry_bytes() const { return probed ? pixel_bytes * samples / probed : 0; }
};

// Decodes and prepares up to `probes` samples spread evenly over the source.
// Samples that fail to read or decode are left out of the estimate.
EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec, int probes = 32);

}  // namespace ssdfeed
