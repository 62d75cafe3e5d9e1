// TFRecord framing and tf.train.Example parsing over arbitrary bytes, with
// the object detection API's and DeepLab's fields as well as the classic
// image and label.
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
  std::string_view whole(reinterpret_cast<const char*>(data), size);
  EncodedSample s;
  (void)ParseExample(whole, {}, &s);
  static const std::vector<FieldSpec> kFields = {
      {"image", FieldKind::kImage, "image/encoded"},
      {"boxes", FieldKind::kBoxes, "image/object/bbox/"},
      {"classes", FieldKind::kClasses, "image/object/class/label"},
      {"mask", FieldKind::kMask, "image/segmentation/class/encoded"},
      {"label", FieldKind::kLabel, "image/class/label"}};
  (void)ParseExampleFields(whole, {}, kFields, &s);
  (void)ParseExampleFields(whole, {}, DetectExampleFields(whole), &s);
  return 0;
}
