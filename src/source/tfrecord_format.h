// TFRecord framing: [u64 length][u32 masked crc32c(length)][data]
// [u32 masked crc32c(data)], little endian; and tf.train.Example parsing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/env.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

struct RecordSpan {
  uint64_t data_offset = 0;  // where the payload starts
  uint64_t length = 0;
};

// Walks the record headers of f (checking each length CRC) and lists where
// each payload lies. A bad length CRC or a record cut short is Corruption
// naming the file and record index; under kSkip the rest of the file is left
// out instead and *skipped says how many files were cut.
Status ScanTFRecordFile(const RandomAccessFile& f, OnError on_error, std::vector<RecordSpan>* out,
                        size_t* skipped);

// Reads one payload and checks its data CRC.
Status ReadTFRecord(const RandomAccessFile& f, const RecordSpan& span, size_t index,
                    std::string* out);

struct ExampleKeys {
  std::string image_key;  // empty: "image/encoded", then "image"
  std::string label_key;  // empty: "image/class/label", then "label"
};

// Extracts the image bytes and label (-1 when absent) of a tf.train.Example.
Status ParseExample(std::string_view serialized, const ExampleKeys& keys, EncodedSample* out);
std::string SerializeExample(std::string_view image, int64_t label);

// As ParseExample, then each of fields (resolved kinds) from its feature
// key: image and the field "label" as ParseExample finds them (the label in
// EncodedSample::label; -1 when not asked for); label: the first int64;
// classes: every int64 (absent: none); boxes: a key ending in '/' names the
// object detection API's KEY{xmin,ymin,xmax,ymax} float lists (normalised,
// absent: no boxes), another key one float list of 4 pixel coordinates per
// box; mask, array and bytes: the first bytes value. A field absent from
// the Example is Corruption naming the key and the field.
Status ParseExampleFields(std::string_view serialized, const ExampleKeys& keys,
                          const std::vector<FieldSpec>& fields, EncodedSample* out);

// The fields of a TF object detection API or DeepLab Example (image, label
// if it has one, boxes + classes, mask); empty for any other Example.
std::vector<FieldSpec> DetectExampleFields(std::string_view serialized);

// One feature of an Example to write (tests and make-dataset).
struct ExampleFeature {
  enum Type { kBytes, kFloat, kInt64 } type = kBytes;
  std::string key;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};
// A tf.train.Example holding these features (keys sorted, lists packed).
std::string SerializeFeatures(const std::vector<ExampleFeature>& features);

// Appends one framed record.
Status AppendTFRecord(WritableFile* f, std::string_view data);

}  // namespace ssdfeed
