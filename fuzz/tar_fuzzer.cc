// Tar listing and WebDataset grouping over arbitrary bytes (via a temp file,
// since libarchive reads the shard by name as the source does).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ssdfeed/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string path = "/tmp/ssdfeed-tar-fuzz-" + std::to_string(getpid()) + ".tar";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  for (auto policy : {ssdfeed::OnError::kRaise, ssdfeed::OnError::kSkip}) {
    ssdfeed::SourceOptions o;
    o.on_error = policy;
    auto src = ssdfeed::OpenSource("tar:" + path, o);
    if (!src.ok()) continue;
    for (size_t i = 0; i < (*src)->size(); ++i) {
      ssdfeed::EncodedSample s;
      (void)(*src)->Read(i, &s);
    }
  }
  return 0;
}
