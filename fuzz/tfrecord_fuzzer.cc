// TFRecord framing and tf.train.Example parsing over arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "source/tfrecord_format.h"
#include "util/string_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  auto f = NewStringFile(std::string(reinterpret_cast<const char*>(data), size), "fuzz.tfrecord");
  std::vector<RecordSpan> spans;
  size_t skipped = 0;
  (void)ScanTFRecordFile(*f, OnError::kSkip, &spans, &skipped);
  for (size_t i = 0; i < spans.size(); ++i) {
    std::string rec;
    if (!ReadTFRecord(*f, spans[i], i, &rec).ok()) continue;
    EncodedSample s;
    (void)ParseExample(rec, {}, &s);
  }
  EncodedSample s;
  (void)ParseExample(std::string_view(reinterpret_cast<const char*>(data), size), {}, &s);
  return 0;
}
