// Uses only the installed public headers: generates a small dataset, reads
// it twice through the loader with a cache, and checks the second epoch is
// served from the cache. Exits non-zero with the reason otherwise.
#include <cstdio>
#include <string>

#include "ssdfeed/dataset.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/warm.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "ssdfeed_consumer: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail("usage: ssdfeed_consumer WORKDIR");
  const std::string work = argv[1];

  ssdfeed::MakeDatasetOptions make;
  make.dir = work + "/data";
  make.count = 24;
  make.min_side = 48;
  make.max_side = 96;
  ssdfeed::MakeDatasetReport report;
  if (auto st = ssdfeed::MakeDataset(make, &report); !st.ok()) return Fail(st.ToString());

  ssdfeed::LoaderOptions opts;
  opts.source = report.uri;
  opts.cache.root = work + "/cache";
  opts.prepare.resize_h = opts.prepare.resize_w = 32;
  opts.batch_size = 8;
  opts.shuffle = true;
  auto loader = ssdfeed::Loader::Open(opts);
  if (!loader.ok()) return Fail(loader.status().ToString());

  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    (*loader)->SetEpoch(epoch);
    size_t samples = 0;
    ssdfeed::Batch batch;
    for (;;) {
      auto more = (*loader)->Next(&batch);
      if (!more.ok()) return Fail(more.status().ToString());
      if (!*more) break;
      if (batch.shape[1] != 32 || batch.shape[2] != 32 || batch.shape[3] != 3)
        return Fail("unexpected batch shape");
      samples += batch.size;
    }
    if (samples != make.count) return Fail("epoch served " + std::to_string(samples) + " samples");
  }
  const ssdfeed::LoaderStats stats = (*loader)->stats();
  if (stats.cache_hits < make.count) {
    return Fail("second epoch not served from the cache: " + std::to_string(stats.cache_hits) +
                " hits");
  }
  // The warm-up `ssdfeed warm` runs, through the installed header.
  ssdfeed::WarmOptions w;
  w.cache.root = work + "/warm-cache";
  w.prepare = opts.prepare;
  ssdfeed::WarmResult warmed;
  if (auto st = ssdfeed::Warm(report.uri, w, &warmed); !st.ok()) return Fail(st.ToString());
  if (!warmed.complete())
    return Fail("warm stored " + std::to_string(warmed.samples_present) + " samples");
  std::printf("ssdfeed %s consumer: 2 epochs of %zu samples, %llu cache hits\n", SSDFEED_VERSION,
              make.count, static_cast<unsigned long long>(stats.cache_hits));
  return 0;
}
