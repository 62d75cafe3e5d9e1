#include "util/units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ssdfeed {

Result<uint64_t> ParseSize(const std::string& t) {
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || v < 0) return Status::InvalidArgument("bad size '" + t + "'");
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && unit.back() == 'i') unit.pop_back();
  double mult = 1;
  if (unit == "K" || unit == "k")
    mult = 1024.0;
  else if (unit == "M" || unit == "m")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return Status::InvalidArgument("bad size unit in '" + t + "' (K, M, G, T)");
  return static_cast<uint64_t>(std::llround(v * mult));
}

Result<int64_t> ParseDurationSeconds(const std::string& t) {
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || v < 0) return Status::InvalidArgument("bad duration '" + t + "'");
  std::string unit(end);
  double mult = 1;
  if (unit == "m")
    mult = 60;
  else if (unit == "h")
    mult = 3600;
  else if (unit == "d")
    mult = 86400;
  else if (unit == "w")
    mult = 7 * 86400;
  else if (!unit.empty() && unit != "s")
    return Status::InvalidArgument("bad duration unit in '" + t + "' (s, m, h, d, w)");
  return static_cast<int64_t>(std::llround(v * mult));
}

std::string FormatBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace ssdfeed
