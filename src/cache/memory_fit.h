// How much of an entry the page cache could hold for this process, and the
// warm_read=auto decision made from it: read direct once the records cannot
// all stay in the page cache (then every epoch reads the device anyway, and
// buffered reads only add a copy and evict other jobs' pages), buffered while
// they fit. The numbers come through the Env (its pseudo-files), so a test
// can give chosen ones.
#pragma once

#include <cstdint>

#include "ssdfeed/cache.h"
#include "ssdfeed/env.h"

namespace ssdfeed {

// The memory this process's page cache may use: the lesser of MemAvailable
// and its cgroup's memory limit. 0 when unknown (not Linux).
uint64_t AvailableMemoryBytes(Env* env);

// False when bytes exceed AvailableMemoryBytes(env) (known and non-zero).
bool FitsInMemory(Env* env, uint64_t bytes);

// warm_read=auto's choice for an entry of data_bytes with avail_bytes
// available (0: unknown, read buffered), given the current one. Going back
// to buffered needs a quarter to spare: an entry near the limit would
// otherwise flip at every look (each flip back refills the page cache with
// it, evicting other jobs' pages, until the next look flips it again).
bool AutoReadsDirect(uint64_t data_bytes, uint64_t avail_bytes, bool now_direct);

// The warm read mode for an entry of data_bytes: kDirect and kBuffered as
// asked; kAuto by AutoReadsDirect with the memory available now.
bool UseDirect(Env* env, WarmRead mode, uint64_t data_bytes, bool now_direct);

}  // namespace ssdfeed
