#include "util/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>

#include "ssdfeed/cache.h"  // RaiseFdLimit, defined here

namespace ssdfeed {

// Two system calls, on every open of an entry: cheap, and unlike a
// once-per-process flag right in a forked child that lowered its limit.
void RaiseFdLimit() {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &r);  // best effort: see the header
}

size_t SegmentFileBudget() {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 1024;
  // An eighth of the limit: 8 under a limit of 64, 128 under 1024; never
  // more than 1024, however high the limit.
  return std::clamp<size_t>(static_cast<size_t>(r.rlim_cur / 8), 4, 1024);
}

}  // namespace ssdfeed
