// The defaults every tool shares -- `ssdfeed warm`, `ssdfeed bench loader`,
// `ssdfeed cache ...`, the Python package and C++ callers -- defined once so
// that the same call without options keys the same cache entry everywhere.
#pragma once

#include <string>

#include "ssdfeed/env.h"
#include "ssdfeed/image.h"

namespace ssdfeed {

// The cache root when none is given: $SSDFEED_CACHE if set and non-empty,
// else $HOME/.cache/ssdfeed (./.cache/ssdfeed without $HOME). The variables
// come from env (Env::Default(): the process's).
std::string DefaultCacheRoot(Env* env);
std::string DefaultCacheRoot();

// The preparation when none is given: decode to RGB at full size, no resize,
// no crop (PrepareSpec{}). Chosen because it is the only spec that loses no
// information, so it is right for any model; it is also the largest (a
// 500x375 JPEG of ~110 KB becomes 550 KiB of pixels), which is why `warm`
// says what it is about to store when no spec is given.
PrepareSpec DefaultPrepareSpec();
bool IsDefaultPrepareSpec(const PrepareSpec& spec);

// Worker threads when 0 is given: one per CPU the process may use (its
// affinity mask, capped by the cgroup CPU quota read through env), at least 1.
int DefaultWorkers(Env* env);
int DefaultWorkers();

// A short human form of a PrepareSpec::Canonical() text, for listings:
// "full-size rgb", "short=256 rgb", "exact=224x224 crop=200x200 gray";
// "python items" for the record spec of Python items ("items1").
std::string DescribeSpec(const std::string& canonical);

}  // namespace ssdfeed
