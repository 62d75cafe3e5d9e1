// Node labels for cache-aware placement: one label per cache entry a node
// holds, so a Job can prefer the nodes that already hold its data.
#pragma once

#include <string>

namespace ssdfeed::cli {

// Every label ssdfeed sets starts with this; `node-labels --apply` removes
// labels under it that the cache no longer backs.
inline constexpr const char* kLabelPrefix = "ssdfeed.io/e-";

// The entry's fingerprint (32 hex digits) is already a hash of the source
// identity and the spec, so the label's name part ("e-" + 32) stays within
// Kubernetes' 63-character limit whatever the dataset's path or spec.
inline std::string NodeLabelKey(const std::string& fingerprint) {
  return kLabelPrefix + fingerprint;
}

}  // namespace ssdfeed::cli
