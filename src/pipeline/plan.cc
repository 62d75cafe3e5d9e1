#include "ssdfeed/warm.h"

namespace ssdfeed {

EntryEstimate EstimateEntry(const Source& source, const PrepareSpec& spec, int probes) {
  EntryEstimate e;
  e.samples = source.size();
  if (e.samples == 0 || probes <= 0) return e;
  uint64_t n = std::min<uint64_t>(e.samples, static_cast<uint64_t>(probes));
  Decoder decoder;
  EncodedSample encoded;
  Image image;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t id = i * e.samples / n;
    e.tried++;
    if (!source.Read(id, &encoded).ok()) continue;
    if (!decoder.DecodeAndPrepare(encoded.bytes, spec, &image).ok()) continue;
    e.probed++;
    e.origin_bytes += encoded.bytes.size();
    e.pixel_bytes += image.bytes();
  }
  return e;
}

}  // namespace ssdfeed
