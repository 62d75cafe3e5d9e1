// The prepare spec parser (a manifest's "prepare" object, read back by
// `cache verify --repair` and `cache import`) over arbitrary bytes: never a
// crash or an exception; a spec it accepts reads back as itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "pipeline/entry_key.h"
#include "ssdfeed/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  std::string text(reinterpret_cast<const char*>(data), size);
  PrepareSpec spec;
  SourceOptions so;
  if (!ParsePrepareJson(text, &spec, &so).ok()) return 0;
  auto again = PrepareSpec::FromJson(spec.ToJson());
  if (!again.ok() || again->Canonical() != spec.Canonical()) std::abort();
  return 0;
}
