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

// Appends one framed record.
Status AppendTFRecord(WritableFile* f, std::string_view data);

}  // namespace ssdfeed
