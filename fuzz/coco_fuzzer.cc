// COCO annotations over arbitrary bytes: the json parse, the category map,
// crowd filtering, boxes and the fields on request of every sample (via a
// temp file, as the source reads the annotations by name). Images are
// absent: reads fail cleanly.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ssdfeed/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = "/tmp/ssdfeed-coco-fuzz-" + std::to_string(getpid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  static const std::string path = dir + "/ann.json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  for (auto policy : {ssdfeed::OnError::kRaise, ssdfeed::OnError::kSkip}) {
    ssdfeed::SourceOptions o;
    o.on_error = policy;
    o.coco_crowd = policy == ssdfeed::OnError::kSkip;
    // The skip pass also asks for the fields given on request.
    std::string extra =
        policy == ssdfeed::OnError::kSkip ? "&fields=image_id,iscrowd,area,masks" : "";
    auto src = ssdfeed::OpenSource("coco:" + dir + "?annotations=" + path + extra, o);
    if (!src.ok()) continue;
    for (size_t i = 0; i < (*src)->size() && i < 64; ++i) {
      ssdfeed::EncodedSample s;
      (void)(*src)->Read(i, &s);
    }
  }
  return 0;
}
