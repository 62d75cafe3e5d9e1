// The manifest parser (every lister reads every entry's manifest.json,
// hand-written, imported or damaged) over arbitrary bytes: never a crash or
// an exception, and what it accepts is within the bounds readers size
// tables by.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cache/entry_files.h"
#include "pipeline/entry_key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto key = ParseEntryKey(text, "manifest.json");
  if (!key.ok()) {
    if (key.status().message().find("manifest.json") == std::string::npos) std::abort();
    return 0;
  }
  if (key->samples_total > kMaxSamplesTotal) std::abort();
  (void)key->fingerprint();
  // What `cache verify --repair` and an import do next with it.
  PrepareSpec spec;
  SourceOptions so;
  (void)ParsePrepareJson(key->prepare_json, &spec, &so);
  return 0;
}
