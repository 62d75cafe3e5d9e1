// Warm on an entry already open: what Warm does after opening it, for a
// caller that keeps its own handle of the entry (peer fill). Two handles of
// one entry in one process would each hold a capacity reservation, so the
// second could find the root full while the first holds room unused.
#pragma once

#include "ssdfeed/warm.h"

namespace ssdfeed {

// As Warm(source, options, result), into `entry` (not owned; the entry of
// source and options.prepare under options.cache).
Status WarmEntry(const Source& source, const WarmOptions& options, CacheEntry* entry,
                 WarmResult* result);

}  // namespace ssdfeed
