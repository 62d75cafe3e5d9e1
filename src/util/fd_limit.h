// The process's open-file limit. Many concurrent writers leave an entry with
// as many segments; a default soft limit of 1024 descriptors must not make
// that entry unusable.
#pragma once

#include <cstddef>

namespace ssdfeed {

// Raises the soft RLIMIT_NOFILE to the hard limit (as many servers do at
// start): the CLI at start, the library at each entry open or compaction.
// Failing to raise it is no error: readers stay within whatever limit there
// is.
void RaiseFdLimit();

// How many segment files one entry's reader may keep open at once: a share
// of the soft limit, so that several entries, the writer's own files and
// the rest of the process fit together.
size_t SegmentFileBudget();

}  // namespace ssdfeed
