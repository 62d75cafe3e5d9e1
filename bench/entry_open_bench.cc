// What a job pays to open a big entry: wall time of CacheEntry::Open (which
// reads every index entry) and the memory it then holds, for an entry of N
// small samples (default 1,000,000). Each open runs in a fresh process (this
// program re-executed with --open), so nothing is shared between runs; the
// median of --runs is printed.
//   entry_open_bench [--dir DIR] [--samples N] [--runs R]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"

using namespace ssdfeed;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

EntryKey Key(uint64_t n) {
  EntryKey k;
  k.source_uri = "bench:open";
  k.source_identity = "bench-open-" + std::to_string(n);
  k.spec = "8x8 rgb";
  k.samples_total = n;
  return k;
}

CacheOptions Opts(const std::string& dir) {
  CacheOptions o;
  o.root = dir;
  o.capacity_bytes = 64ull << 30;
  return o;
}

int Fill(const std::string& dir, uint64_t n) {
  auto e = CacheEntry::Open(Opts(dir), Key(n));
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 1;
  if ((*e)->samples_present() == n) return 0;
  std::vector<uint8_t> px(8 * 8 * 3);
  double t0 = Now();
  for (uint64_t id = 0; id < n; ++id) {
    if ((*e)->Contains(id)) continue;
    px[0] = static_cast<uint8_t>(id);
    if (!(*e)->Put(id, id % 1000, px.data(), 8, 8, 3).ok()) return 1;
  }
  std::printf("filled %llu samples in %.1f s\n", static_cast<unsigned long long>(n), Now() - t0);
  return 0;
}

// Child: open, report "seconds rss_before_kib rss_after_kib present".
int OpenOnce(const std::string& dir, uint64_t n) {
  long before = RssKiB();
  double t0 = Now();
  auto e = CacheEntry::Open(Opts(dir), Key(n));
  double secs = Now() - t0;
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 1;
  std::printf("%.6f %ld %ld %llu\n", secs, before, RssKiB(),
              static_cast<unsigned long long>((*e)->samples_present()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/ssdfeed-open-bench";
  uint64_t n = 1000000;
  int runs = 5;
  bool open_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--samples" && i + 1 < argc)
      n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--open")
      open_only = true;
    else
      return std::fprintf(stderr, "usage: %s [--dir DIR] [--samples N] [--runs R]\n", argv[0]), 2;
  }
  if (open_only) return OpenOnce(dir, n);
  if (Fill(dir, n) != 0) return 1;
  std::vector<double> secs, rss;
  for (int r = 0; r < runs; ++r) {
    std::string cmd =
        std::string(argv[0]) + " --open --dir " + dir + " --samples " + std::to_string(n);
    FILE* p = ::popen(cmd.c_str(), "r");
    double s = 0;
    long before = 0, after = 0;
    unsigned long long present = 0;
    if (p == nullptr || std::fscanf(p, "%lf %ld %ld %llu", &s, &before, &after, &present) != 4)
      return std::fprintf(stderr, "open run failed\n"), 1;
    ::pclose(p);
    secs.push_back(s);
    rss.push_back((after - before) / 1024.0);
  }
  std::sort(secs.begin(), secs.end());
  std::sort(rss.begin(), rss.end());
  std::printf(
      "entry of %llu samples: open %.3f s (median of %d, min %.3f, max %.3f), "
      "memory held %.1f MiB (%.1f bytes/sample)\n",
      static_cast<unsigned long long>(n), secs[secs.size() / 2], runs, secs.front(), secs.back(),
      rss[rss.size() / 2], rss[rss.size() / 2] * 1048576.0 / n);
  return 0;
}
