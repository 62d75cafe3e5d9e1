// skipped.json (written by `warm --on-error skip`, read by every lister to
// call an entry complete) over arbitrary bytes: never a crash or an
// exception, and never more samples skipped than the entry has.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/entry_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  std::string text(reinterpret_cast<const char*>(data), size);
  // The entry's own samples_total is what the reader passes; take the one
  // the file declares (so a real file parses) and a small fixed one.
  auto j = nlohmann::json::parse(text, nullptr, false);
  uint64_t declared =
      j.is_object() && j.contains("samples_total") && j["samples_total"].is_number_unsigned()
          ? j["samples_total"].get<uint64_t>()
          : 0;
  for (uint64_t total : {declared % (kMaxSamplesTotal + 1), uint64_t{16}}) {
    auto n = ParseSkipped(text, total, "skipped.json");
    if (n.ok() && *n > total) std::abort();
  }
  return 0;
}
