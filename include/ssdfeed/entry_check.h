// Checking a cache entry against its origin, and importing one with its
// records checked against this node's origin: what `ssdfeed cache verify
// [--repair] [--verify-source=content]` and `ssdfeed cache import
// [--check-origin N]` do, as library calls (src/pipeline/entry_check.cc).
// They prepare samples, so they sit above the cache (ssdfeed/cache.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

struct CheckEntryOptions {
  // Prepare the corrupt records again from the origin, which must be
  // unchanged. An entry of Python items has no origin here: its corrupt
  // records (already dropped by the check) are left for the job that uses
  // the entry to compute again. Default false: report only.
  bool repair = false;
  // Also compare every record with its origin sample, read and prepared
  // again (`--verify-source=content`): catches a file rewritten with the
  // same size, mtime and ctime. Default false.
  bool compare_content = false;
  // Threads of that comparison (decoding dominates). Default 0: one per
  // core.
  int threads = 0;
};

// The comparison of every record with its origin sample.
struct ContentCheck {
  uint64_t compared = 0;    // records read from the entry and the origin
  uint64_t mismatched = 0;  // pixels, shape, label or fields differ
  uint64_t unreadable = 0;  // the origin sample cannot be read or decoded
  // "<origin file>: sample <id>: <what differs>", the first 20.
  std::vector<std::string> problems;
  std::string error;  // why the comparison could not run; empty when it ran
};

struct CheckEntryReport {
  VerifyReport records;  // every record's checksum and shape
  // An entry of Python items (ssdfeed.cache, ssdfeed.tf.cache): its origin
  // is a dataset in some job, out of reach, so no source is checked.
  bool items = false;
  // The source stat'ed again against the entry's identity: "unchanged",
  // "changed (entry is stale)" or "unreadable: <why>"; for items
  // "a Python dataset (<uri>): not checked from here".
  std::string source;
  bool stale() const { return source.rfind("changed", 0) == 0; }
  // Set when a repair ran (asked for, and corrupt records found): records
  // stored again (and synced), or for items the records dropped.
  std::optional<uint64_t> repaired, dropped;
  std::optional<ContentCheck> content;  // when compare_content was asked for
};

// Checks entry `info` (from ListEntries) of opts.root: reopened from its
// manifest without refreshing its last use, every record verified, its
// source reopened and stat'ed again, then what `o` asks. A repair of an
// entry whose source changed or cannot be read is InvalidArgument, naming
// the entry and the source's state; a repair whose records cannot be synced
// is the sync's error.
Status CheckEntry(const CacheOptions& opts, const EntryInfo& info, const CheckEntryOptions& o,
                  CheckEntryReport* report);

struct OriginImportOptions {
  // The entry's key as exported is kept: no source is opened here and no
  // record compared (for a node without the dataset). Default false.
  bool keep_identity = false;
  // {OLD, NEW}: the exported source path OLD lives under NEW on this node
  // (whole path components). Default none: the exported path.
  std::vector<std::pair<std::string, std::string>> source_roots;
  // Records compared with what this node's origin prepares, picked at
  // random where the stream's producer cannot predict them; more than the
  // entry holds compares every record; 0 none. A record that differs
  // refuses the whole import. Default 16.
  uint64_t check_origin = 16;
  // Import an entry of Python items, whose records no origin here can
  // check: trusting the stream as one's own code. Default false: refused.
  bool trust_items = false;
};

// ImportEntry of the stream on fd with the entry rebound to this node's
// copy of its source: the source opened here (its identity taken from the
// files here, its sample count the exported one's) and check_origin
// records compared with what it prepares.
Status ImportEntryFromOrigin(const CacheOptions& opts, int fd, const OriginImportOptions& o,
                             TransferReport* report);

// An exported source URI with the first matching {OLD, NEW} root applied
// (whole path components only: /data never rewrites /database).
std::string RewriteSourceUri(const std::string& uri,
                             const std::vector<std::pair<std::string, std::string>>& roots);

}  // namespace ssdfeed
