#include "pipeline/fetcher.h"
#include "ssdfeed/warm.h"

namespace ssdfeed {

EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec, int probes) {
  EntryEstimate e;
  e.samples = source.size();
  if (e.samples == 0 || probes <= 0) return e;
  uint64_t n = std::min<uint64_t>(e.samples, static_cast<uint64_t>(probes));
  // The origin path the fetcher stores from, so that fields (masks, boxes,
  // arrays) are prepared and counted as a record holds them.
  SampleFetcher origin(&source, spec, nullptr, 0, nullptr, /*time_stages=*/false);
  FetchScratch scratch;
  CachedSample prepared;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id = i * e.samples / n;
    e.tried++;
    if (!origin.Fetch(id, &scratch, &prepared).ok()) continue;
    e.probed++;
    e.origin_bytes += scratch.encoded.bytes.size();
    e.pixel_bytes += prepared.bytes();
    e.field_bytes += prepared.fields.size();
  }
  return e;
}

}  // namespace ssdfeed
