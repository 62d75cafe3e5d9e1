// Cache write throughput and CPU cost (fill_write buffered and direct), and
// read throughput (buffered, buffered after the page cache is dropped,
// O_DIRECT) next to the device's sequential O_DIRECT read bandwidth, all
// measured in one run on the same directory.
//   build/bench/cache_bench [--dir DIR] [--samples N] [--side S] [--json]
// Built by `make build` (or `cmake --build build --target cache_bench`);
// needs nothing else. DIR should be on the device the cache will use.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cache/record_format.h"
#include "ssdfeed/cache.h"

using namespace ssdfeed;
namespace cf = cache_format;

namespace {

// A rate over failed calls would be a false number: stop instead.
void OrDie(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

double CpuSeconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec / 1e6;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void DropFromPageCache(const std::string& dir) {
  for (const auto& p : std::filesystem::directory_iterator(dir)) {
    int fd = ::open(p.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

struct Loc {
  std::string dat;
  uint64_t offset;
  uint32_t len;
};

std::vector<Loc> ReadIndex(const std::string& dir) {
  std::vector<Loc> locs;
  for (const auto& p : std::filesystem::directory_iterator(dir)) {
    std::string name = p.path().filename();
    if (name.rfind("seg-", 0) != 0 || p.path().extension() != ".idx") continue;
    std::string dat = p.path().string();
    dat.replace(dat.size() - 4, 4, ".dat");
    FILE* f = std::fopen(p.path().c_str(), "rb");
    char buf[cf::kIndexEntrySize];
    while (std::fread(buf, 1, sizeof(buf), f) == sizeof(buf)) {
      cf::IndexEntry e;
      if (cf::DecodeIndexEntry(buf, &e)) locs.push_back({dat, e.offset, e.record_len});
    }
    std::fclose(f);
  }
  return locs;
}

// Reads every record with O_DIRECT (aligned superset reads), random order.
double DirectReadSeconds(std::vector<Loc> locs, uint64_t* bytes) {
  std::mt19937 rng(1);
  std::shuffle(locs.begin(), locs.end(), rng);
  const size_t kAlign = 4096;
  void* buf = nullptr;
  size_t cap = 8 << 20;
  if (posix_memalign(&buf, kAlign, cap) != 0) return 0;
  int fd = ::open(locs[0].dat.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) {
    std::free(buf);
    return -1;  // filesystem without O_DIRECT (tmpfs)
  }
  *bytes = 0;
  double t0 = Now();
  for (const auto& l : locs) {
    uint64_t start = l.offset / kAlign * kAlign;
    uint64_t end = (l.offset + l.len + kAlign - 1) / kAlign * kAlign;
    ssize_t r = ::pread(fd, buf, end - start, static_cast<off_t>(start));
    if (r < 0) break;
    *bytes += l.len;
  }
  double s = Now() - t0;
  ::close(fd);
  std::free(buf);
  return s;
}

double SequentialDirectMBps(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return -1;
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, 1 << 20) != 0) return -1;
  uint64_t total = 0;
  double t0 = Now();
  for (off_t off = 0;; off += 1 << 20) {
    ssize_t r = ::pread(fd, buf, 1 << 20, off);
    if (r <= 0) break;
    total += static_cast<uint64_t>(r);
  }
  double s = Now() - t0;
  ::close(fd);
  std::free(buf);
  return total / s / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "bench-cache-tmp";
  int samples = 2000, side = 256;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--samples" && i + 1 < argc)
      samples = std::atoi(argv[++i]);
    else if (a == "--side" && i + 1 < argc)
      side = std::atoi(argv[++i]);
    else if (a == "--json")
      json = true;
    else {
      std::fprintf(stderr, "usage: cache_bench [--dir DIR] [--samples N] [--side S] [--json]\n");
      return 2;
    }
  }
  std::string root = dir + "/cache_bench." + std::to_string(::getpid());
  CacheOptions o;
  o.root = root;
  EntryKey key;
  key.source_uri = "bench";
  key.source_identity = "bench";
  key.spec = "bench";
  key.samples_total = static_cast<uint64_t>(samples);
  int h = side, w = side * 4 / 3;
  std::vector<uint8_t> pixels(static_cast<size_t>(h) * w * 3);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  // Fills the entry with each fill_write mode (a fresh root each), timing
  // the puts and the final sync, and the process's CPU seconds meanwhile
  // (the writer thread's and the kernel's work on our behalf included).
  auto fill = [&](FillWrite mode, double* cpu_s) {
    CacheOptions fo = o;
    fo.root = root + (mode == FillWrite::kDirect ? ".direct" : ".buffered");
    fo.fill_write = mode;
    auto f = CacheEntry::Open(fo, key);
    OrDie(f.status(), "cache_bench: open");
    double c0 = CpuSeconds(), t = Now();
    for (int id = 0; id < samples; ++id)
      OrDie((*f)->Put(id, id, pixels.data(), h, w, 3), "cache_bench: put");
    OrDie((*f)->Sync(), "cache_bench: sync");
    t = Now() - t;
    *cpu_s = CpuSeconds() - c0;
    f->reset();
    std::filesystem::remove_all(fo.root);
    return t;
  };
  double buffered_cpu = 0, direct_cpu = 0;
  double buffered_s = fill(FillWrite::kBuffered, &buffered_cpu);
  double direct_write_s = fill(FillWrite::kDirect, &direct_cpu);
  o.fill_write = FillWrite::kBuffered;
  auto e = CacheEntry::Open(o, key);
  if (!e.ok()) {
    std::fprintf(stderr, "cache_bench: %s\n", e.status().ToString().c_str());
    return 1;
  }
  double t0 = Now();
  for (int id = 0; id < samples; ++id)
    OrDie((*e)->Put(id, id, pixels.data(), h, w, 3), "cache_bench: put");
  OrDie((*e)->Sync(), "cache_bench: sync");
  double write_s = Now() - t0;
  double mb = static_cast<double>(pixels.size()) * samples / 1e6;
  std::string entry_dir = (*e)->dir();

  std::vector<uint64_t> order(samples);
  for (int i = 0; i < samples; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(2));
  auto read_all = [&] {
    std::string buf;
    double t = Now();
    for (uint64_t id : order) {
      CachedSample s;
      OrDie((*e)->Get(id, &buf, &s), "cache_bench: get");
    }
    return Now() - t;
  };
  DropFromPageCache(entry_dir);
  double cold_s = read_all();
  double warm_s = read_all();
  DropFromPageCache(entry_dir);
  uint64_t direct_bytes = 0;
  auto locs = ReadIndex(entry_dir);
  double direct_s = DirectReadSeconds(locs, &direct_bytes);
  DropFromPageCache(entry_dir);
  double seq = SequentialDirectMBps(locs[0].dat);
  e->reset();
  std::filesystem::remove_all(root);

  struct Row {
    const char* name;
    double s;
  } rows[] = {{"write, buffered (put + fsync)", buffered_s},
              {"write, direct (put + fsync)", direct_write_s},
              {"read, page cache dropped (random)", cold_s},
              {"read, page cache warm (random)", warm_s},
              {"read, O_DIRECT (random)", direct_s}};
  (void)write_s;  // the read rows' entry, written buffered as buffered_s was
  // CPU milliseconds per 100 MB stored: what a fill costs the cores that
  // would otherwise decode.
  double buffered_cpu_ms = buffered_cpu / mb * 1e5, direct_cpu_ms = direct_cpu / mb * 1e5;
  if (json) {
    std::printf(
        "{\"samples\": %d, \"sample_bytes\": %zu, \"device_seq_mb_s\": %.1f, "
        "\"write_cpu_ms_per_100mb\": {\"buffered\": %.1f, \"direct\": %.1f}, \"rows\": [",
        samples, pixels.size(), seq, buffered_cpu_ms, direct_cpu_ms);
    for (int i = 0; i < 5; ++i)
      std::printf("%s{\"name\": \"%s\", \"mb_s\": %.1f, \"samples_s\": %.1f}", i ? ", " : "",
                  rows[i].name, rows[i].s > 0 ? mb / rows[i].s : -1,
                  rows[i].s > 0 ? samples / rows[i].s : -1);
    std::printf("]}\n");
    return 0;
  }
  std::printf("%d samples of %dx%dx3 (%.0f KB each) in %s, one thread\n", samples, h, w,
              pixels.size() / 1e3, dir.c_str());
  std::printf("%-36s %10s %12s\n", "operation", "MB/s", "samples/s");
  for (const auto& r : rows) {
    if (r.s <= 0) {
      std::printf("%-36s %10s %12s\n", r.name, "n/a", "n/a");
      continue;
    }
    std::printf("%-36s %10.1f %12.1f\n", r.name, mb / r.s, samples / r.s);
  }
  std::printf("%-36s %10.1f\n", "device sequential read, O_DIRECT 1MiB", seq);
  std::printf(
      "CPU per 100 MB stored (puts, writer thread, kernel): buffered %.0f ms, direct %.0f ms\n",
      buffered_cpu_ms, direct_cpu_ms);
  return 0;
}
