// Decode + prepare throughput on one core, next to the raw libjpeg-turbo
// full-decode bound, over the encoded samples of a source held in memory.
//   decode_bench --source URI [--resize-short 256] [--rounds 3] [--limit N] [--json]
// Rates are per CPU-second of the one thread that decodes (see Now()).
#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

using namespace ssdfeed;

namespace {

// A rate over failed calls would be a false number: stop instead.
void OrDie(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

// This thread's CPU time: on a shared machine a neighbour's burst takes
// wall time from a round, not CPU time, so rates per CPU-second hold still.
double Now() {
  struct timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct Row {
  const char* name;
  double images_per_s;
  double mpix_per_s;  // source megapixels per second
};

template <typename Fn>
Row Measure(const char* name, const std::vector<std::string>& files, double mpix, int rounds,
            Fn fn) {
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    double t0 = Now();
    for (const auto& f : files) fn(f);
    rates.push_back(files.size() / (Now() - t0));
  }
  std::sort(rates.begin(), rates.end());
  double med = rates[rates.size() / 2];
  return {name, med, med * mpix / files.size()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string uri;
  int resize_short = 256, rounds = 3;
  size_t limit = 0;  // the first N samples only; 0: all
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--source" && i + 1 < argc)
      uri = argv[++i];
    else if (a == "--resize-short" && i + 1 < argc)
      resize_short = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--limit" && i + 1 < argc)
      limit = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--json")
      json = true;
    else {
      std::fprintf(stderr,
                   "usage: decode_bench --source URI [--resize-short S] [--rounds N] [--limit N] "
                   "[--json]\n");
      return 2;
    }
  }
  auto src = OpenSource(uri);
  if (!src.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", src.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> files;
  double mpix = 0;
  Decoder dec;
  Image img;
  size_t n = limit > 0 ? std::min(limit, (*src)->size()) : (*src)->size();
  for (size_t i = 0; i < n; ++i) {
    EncodedSample s;
    if (!(*src)->Read(i, &s).ok() || !dec.Decode(s.bytes, false, 0, 0, &img).ok()) continue;
    mpix += img.height * img.width / 1e6;
    files.push_back(std::move(s.bytes));
  }
  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> buf;
  Row raw =
      Measure("libjpeg-turbo full decode (bound)", files, mpix, rounds, [&](const std::string& f) {
        int w, h, ss, cs;
        auto* p = reinterpret_cast<const unsigned char*>(f.data());
        tjDecompressHeader3(tj, p, f.size(), &w, &h, &ss, &cs);
        buf.resize(static_cast<size_t>(w) * h * 3);
        tjDecompress2(tj, p, f.size(), buf.data(), w, 0, h, TJPF_RGB, 0);
      });
  PrepareSpec spec;
  spec.resize_short = resize_short;
  Row full =
      Measure("full decode + antialiased resize", files, mpix, rounds, [&](const std::string& f) {
        OrDie(dec.Decode(f, false, 0, 0, &img), "decode_bench: decode");
        Image out;
        OrDie(PrepareDecoded(img, spec, &out), "decode_bench: prepare");
      });
  Row ours = Measure("ssdfeed decode+prepare (DCT scaling)", files, mpix, rounds,
                     [&](const std::string& f) {
                       OrDie(dec.DecodeAndPrepare(f, spec, &img), "decode_bench: decode+prepare");
                     });
  tjDestroy(tj);
  if (json) {
    std::printf("{\"images\": %zu, \"resize_short\": %d, \"rows\": [", files.size(), resize_short);
    const Row* rows[] = {&raw, &full, &ours};
    for (int i = 0; i < 3; ++i)
      std::printf("%s{\"name\": \"%s\", \"images_per_s\": %.1f, \"mpix_per_s\": %.2f}",
                  i ? ", " : "", rows[i]->name, rows[i]->images_per_s, rows[i]->mpix_per_s);
    std::printf("]}\n");
    return 0;
  }
  std::printf("%zu images, %.2f MP mean, resize_short=%d, 1 thread, median of %d rounds\n",
              files.size(), mpix / files.size(), resize_short, rounds);
  std::printf("%-40s %12s %10s\n", "path", "images/s", "MP/s");
  for (const Row* r : {&raw, &full, &ours})
    std::printf("%-40s %12.1f %10.2f\n", r->name, r->images_per_s, r->mpix_per_s);
  return 0;
}
