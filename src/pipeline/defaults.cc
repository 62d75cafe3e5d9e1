#include "ssdfeed/defaults.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

namespace ssdfeed {

std::string DefaultCacheRoot(Env* env) {
  if (auto c = env->GetEnvVar("SSDFEED_CACHE"); c && !c->empty()) return *c;
  auto home = env->GetEnvVar("HOME");
  return (home && !home->empty() ? *home : ".") + "/.cache/ssdfeed";
}

std::string DefaultCacheRoot() { return DefaultCacheRoot(Env::Default()); }

PrepareSpec DefaultPrepareSpec() { return PrepareSpec{}; }

bool IsDefaultPrepareSpec(const PrepareSpec& spec) {
  return spec.Canonical() == DefaultPrepareSpec().Canonical();
}

namespace {

// CPUs the process may run on: the main thread's affinity mask (a worker
// thread started from a framework's pinned thread would see its own mask).
int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(getpid(), sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

// The container's CPU quota, rounded up (0: none): cgroup v2 cpu.max
// ("max 100000" or "200000 100000"), else cgroup v1's cfs files.
int CgroupCpus(Env* env) {
  double quota = -1, period = 0;
  std::string v2, qf, pf;
  env->ReadPseudoFile("/sys/fs/cgroup/cpu.max", &v2).IgnoreError();  // "": not v2
  std::istringstream v2in(v2);
  std::string q;
  if (v2in >> q >> period) {
    if (q == "max") return 0;
    quota = std::atof(q.c_str());
  } else {
    // Missing (no cgroup v1 CPU controller): no quota.
    env->ReadPseudoFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", &qf).IgnoreError();
    env->ReadPseudoFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us", &pf).IgnoreError();
    if (!(std::istringstream(qf) >> quota) || !(std::istringstream(pf) >> period)) return 0;
  }
  if (quota <= 0 || period <= 0) return 0;
  return std::max(1, static_cast<int>(std::ceil(quota / period)));
}

}  // namespace

int DefaultWorkers(Env* env) {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (int a = AffinityCpus(); a > 0) n = a;  // taskset, numactl, Slurm's binding
  if (int c = CgroupCpus(env); c > 0) n = std::min(n, c);
  return std::max(1, n);
}

int DefaultWorkers() { return DefaultWorkers(Env::Default()); }

std::string DescribeSpec(const std::string& canonical) {
  // A Python dataset's items (Source::record_spec): no preparation to show.
  if (canonical.rfind("items", 0) == 0) return "python items";
  // Fields that are off ("=0", "=0x0") and the fixed codec fields are left out.
  std::vector<std::string> kept;
  std::string color = "rgb";
  std::stringstream in(canonical);
  for (std::string f; std::getline(in, f, ';');) {
    if (f == "rgb" || f == "gray") {
      color = f;
      continue;
    }
    auto eq = f.find('=');
    if (eq == std::string::npos) continue;  // the version tag
    std::string key = f.substr(0, eq), value = f.substr(eq + 1);
    if (key == "resample" || key == "jpeg" || value == "0" || value == "0x0") continue;
    kept.push_back(f);
  }
  if (kept.empty()) return canonical.empty() ? "?" : "full-size " + color;
  std::string out;
  for (const auto& k : kept) out += k + " ";
  return out + color;
}

}  // namespace ssdfeed
