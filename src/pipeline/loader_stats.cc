#include "ssdfeed/loader.h"

namespace ssdfeed {

std::vector<std::pair<std::string, double>> LoaderStatsFields(const LoaderStats& s) {
  std::vector<std::pair<std::string, double>> out;
  out.reserve(kNumCounters + 5 + kNumTimers);
  for (const auto& c : kCounters) out.emplace_back(c.key, static_cast<double>(s[c.slot]));
  out.emplace_back("wait_seconds", s.wait_seconds);
  out.emplace_back("step_wait_last_seconds", s.step_wait_last);
  out.emplace_back("step_wait_p50_seconds", s.step_wait_p50);
  out.emplace_back("step_wait_p99_seconds", s.step_wait_p99);
  out.emplace_back("step_wait_steps", static_cast<double>(s.step_wait_steps));
  for (const auto& t : kTimers) out.emplace_back(std::string(t.key) + "_seconds", s[t.slot]);
  return out;
}

}  // namespace ssdfeed
