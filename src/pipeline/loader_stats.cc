#include "ssdfeed/loader.h"

namespace ssdfeed {

std::vector<std::pair<std::string, double>> LoaderStatsFields(const LoaderStats& s) {
  std::vector<std::pair<std::string, double>> out;
  out.reserve(kNumCounters + 1);
  for (const auto& c : kCounters) out.emplace_back(c.key, static_cast<double>(s[c.slot]));
  out.emplace_back("wait_seconds", s.wait_seconds);
  return out;
}

}  // namespace ssdfeed
