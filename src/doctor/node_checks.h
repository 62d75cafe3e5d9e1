// The checks behind `ssdfeed doctor`: is this node fit to hold a cache root
// and feed training from it? Each check has an id, a severity and a one-line
// fix, and is a small function of the node's facts, gathered once.
//
// The facts come from the kernel's files (/proc/self/mountinfo,
// /proc/self/limits, /sys/dev/block/..., statfs of /dev/shm), read under a
// sysroot: "/" on a node, a directory of fixtures in a test, or a copy taken
// from another node. The root itself (its mode, owner, free space) is always
// the real directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"

namespace ssdfeed::doctor {

// What doctor is asked about: the root and the training jobs it feeds.
struct DoctorInput {
  CacheOptions cache;                  // root, capacity_bytes (0: none given), group_shared
  std::string sysroot;                 // Where /proc, /sys and /dev/shm are read. Default "" (= /).
  int workers = 8;                     // DataLoader worker processes of one job. Default 8.
  int prefetch = 2;                    // Batches in flight per worker (prefetch_factor). Default 2.
  uint64_t batch_bytes = 64ull << 20;  // Bytes of one collated batch. Default 64 MiB.
};

// The node's side of the mount table (a line of mountinfo).
struct MountFacts {
  bool found = false;
  std::string point, fstype, source, options;  // options: the per-mount ones (rw,noatime,...)
};

// A resource limit as /proc/self/limits states it; kUnlimited for "unlimited".
struct Limit {
  static constexpr uint64_t kUnlimited = UINT64_MAX;
  bool found = false;
  uint64_t soft = 0, hard = 0;
};

struct NodeFacts {
  // The root, or before the first warm its nearest existing parent.
  bool root_exists = false;
  std::string fs_path;
  dev_t dev = 0;
  uint32_t root_mode = 0;
  uid_t root_uid = 0;
  gid_t root_gid = 0;
  MountFacts mount;
  // The block device under the root ("" when none: a virtual filesystem,
  // or /sys does not say).
  std::string disk;
  std::string rotational;  // "0", "1" or "" (unknown)
  std::string scheduler;   // the active one, as [bracketed] in queue/scheduler
  bool space_known = false;
  uint64_t free_bytes = 0, total_bytes = 0, held_bytes = 0;
  Limit nofile, memlock;
  bool shm_found = false;
  uint64_t shm_bytes = 0;
};

// Gathers the facts for `in`; an error only when the root is unusable as a
// path (not a directory, no existing parent), which doctor reports as bad
// arguments. Facts it cannot read stay unknown and their checks are skipped.
Result<NodeFacts> GatherFacts(const DoctorInput& in);

// Parsers of the kernel's files, exposed for tests.
MountFacts FindMount(const std::string& mountinfo, const std::string& real_path, dev_t dev);
Limit ParseLimit(const std::string& limits, const std::string& name);  // e.g. "Max open files"
// Fills disk, rotational and scheduler from sys (a sysfs root) for dev.
void ReadDisk(const std::string& sys, dev_t dev, NodeFacts* f);

enum class Severity { kBlocking, kWarning };
enum class Outcome { kPass, kFail, kSkip };

struct Finding {
  Outcome outcome = Outcome::kPass;
  std::string value;  // what was seen, one line
  std::string fix;    // a fix naming this node's paths; empty: the check's own
};

struct Check {
  const char* id;
  Severity severity;
  const char* fix;  // one line
  Finding (*run)(const DoctorInput&, const NodeFacts&);
};

// Every check, in the order doctor prints them.
const std::vector<Check>& AllChecks();

struct CheckResult {
  const Check* check;
  Finding finding;
  std::string fix() const { return finding.fix.empty() ? check->fix : finding.fix; }
};

std::vector<CheckResult> RunChecks(const DoctorInput& in, const NodeFacts& facts);

// 0: every check passed (or was skipped); 1: a warning failed; 2: a
// blocking check failed.
int ExitCode(const std::vector<CheckResult>& results);

const char* SeverityName(Severity s);  // "blocking" | "warning"
const char* OutcomeName(Outcome o);    // "pass" | "fail" | "skip"

}  // namespace ssdfeed::doctor
