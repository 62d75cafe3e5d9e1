#include "ssdfeed/defaults.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

namespace ssdfeed {

std::string DefaultCacheRoot() {
  if (const char* c = std::getenv("SSDFEED_CACHE"); c != nullptr && *c != '\0') return c;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.cache/ssdfeed";
}

PrepareSpec DefaultPrepareSpec() { return PrepareSpec{}; }

bool IsDefaultPrepareSpec(const PrepareSpec& spec) {
  return spec.Canonical() == DefaultPrepareSpec().Canonical();
}

int DefaultWorkers() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

std::string DescribeSpec(const std::string& canonical) {
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
