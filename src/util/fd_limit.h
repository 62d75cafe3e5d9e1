// The process's open-file limit. Many concurrent writers leave an entry with
// as many segments; a default soft limit of 1024 descriptors must not make
// that entry unusable.
#pragma once

#include <cstddef>

namespace ssdfeed {

// RaiseFdLimit() is public (ssdfeed/cache.h, defined in fd_limit.cc): the
// CLI calls it at start. This header includes nothing of the cache: util
// sits below it (fd_limit.cc includes cache.h for the declaration).

// How many segment files one entry's reader may keep open at once: a share
// of the soft limit, so that several entries, the writer's own files and
// the rest of the process fit together.
size_t SegmentFileBudget();

}  // namespace ssdfeed
