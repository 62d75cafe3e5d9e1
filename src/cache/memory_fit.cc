#include "cache/memory_fit.h"

#include <cstdlib>
#include <sstream>
#include <string>

namespace ssdfeed {

namespace {

// MemAvailable of /proc/meminfo: what the page cache could give this entry
// without evicting what others need. 0 when unknown (not Linux).
uint64_t MemAvailableBytes(Env* env) {
  std::string text;
  if (!env->ReadPseudoFile("/proc/meminfo", &text).ok()) return 0;
  std::istringstream in(text);
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// The first word of a small pseudo-file; "" when it cannot be read.
std::string FirstWord(Env* env, const std::string& path) {
  std::string text, word;
  if (env->ReadPseudoFile(path, &text).ok()) std::istringstream(text) >> word;
  return word;
}

// The memory limit of this process's cgroup (v2 memory.max, or v1
// memory.limit_in_bytes); 0 when unlimited or unknown. In a container the
// page cache it can fill is bounded by its own limit, not by the host's
// MemAvailable. A container sees its own cgroup either at its path or (with
// a cgroup namespace, or v1 mounted for it) at the mount's root.
uint64_t CgroupMemoryLimit(Env* env) {
  std::string text;
  if (!env->ReadPseudoFile("/proc/self/cgroup", &text).ok()) return 0;
  std::istringstream cg(text);
  std::string line;
  while (std::getline(cg, line)) {
    bool v2 = line.rfind("0::", 0) == 0;
    size_t at = line.find(":memory:");
    if (!v2 && at == std::string::npos) continue;
    std::string path = v2 ? line.substr(3) : line.substr(at + 8);
    std::string base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    std::string file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    for (const std::string& dir : {base + (path == "/" ? "" : path), base}) {
      std::string v = FirstWord(env, dir + file);
      if (v.empty()) continue;
      uint64_t n = v == "max" ? 0 : std::strtoull(v.c_str(), nullptr, 10);
      return n >= (1ull << 60) ? 0 : n;  // v1 says "unlimited" with a huge number
    }
  }
  return 0;
}

}  // namespace

uint64_t AvailableMemoryBytes(Env* env) {
  uint64_t avail = MemAvailableBytes(env), limit = CgroupMemoryLimit(env);
  if (limit > 0 && (avail == 0 || limit < avail)) avail = limit;
  return avail;
}

bool FitsInMemory(Env* env, uint64_t bytes) {
  uint64_t avail = AvailableMemoryBytes(env);
  return avail == 0 || bytes <= avail;
}

bool AutoReadsDirect(uint64_t data_bytes, uint64_t avail_bytes, bool now_direct) {
  if (avail_bytes == 0) return false;
  if (now_direct) return data_bytes > avail_bytes - avail_bytes / 4;
  return data_bytes > avail_bytes;
}

bool UseDirect(Env* env, WarmRead mode, uint64_t data_bytes, bool now_direct) {
  if (mode != WarmRead::kAuto) return mode == WarmRead::kDirect;
  return AutoReadsDirect(data_bytes, AvailableMemoryBytes(env), now_direct);
}

}  // namespace ssdfeed
