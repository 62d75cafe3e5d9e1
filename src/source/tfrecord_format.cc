#include "source/tfrecord_format.h"

#include <cstring>

#include "source/shard_files.h"
#include "util/crc32c.h"

namespace ssdfeed {

namespace {

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // TFRecord is little endian, as are our targets
  return v;
}
uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::string Where(const RandomAccessFile& f, size_t index) {
  return f.path() + " record " + std::to_string(index);
}

}  // namespace

Status ScanTFRecordFile(const RandomAccessFile& f, OnError on_error, std::vector<RecordSpan>* out,
                        size_t* skipped) {
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  uint64_t off = 0;
  for (size_t index = 0; off < size; ++index) {
    Status bad;
    char hdr[12];
    if (size - off < sizeof(hdr)) {
      bad = Status::Corruption(Where(f, index) + ": cut short inside the record header");
    } else {
      SSDFEED_RETURN_IF_ERROR(ReadExact(f, off, sizeof(hdr), hdr));
      uint64_t len = Load64(hdr);
      if (crc32c::Mask(crc32c::Value(hdr, 8)) != Load32(hdr + 8)) {
        bad = Status::Corruption(Where(f, index) + ": bad length CRC at offset " +
                                 std::to_string(off));
      } else if (len > size - off - sizeof(hdr) || size - off - sizeof(hdr) - len < 4) {
        bad = Status::Corruption(Where(f, index) + ": cut short (record of " + std::to_string(len) +
                                 " bytes, file ends first)");
      } else {
        out->push_back({off + sizeof(hdr), len});
        off += sizeof(hdr) + len + 4;
        continue;
      }
    }
    // Framing is lost past a bad header: nothing after it can be trusted.
    if (on_error == OnError::kRaise) return bad;
    ++*skipped;
    break;
  }
  return Status::OK();
}

Status ReadTFRecord(const RandomAccessFile& f, const RecordSpan& span, size_t index,
                    std::string* out) {
  out->resize(span.length + 4);
  SSDFEED_RETURN_IF_ERROR(ReadExact(f, span.data_offset, span.length + 4, out->data()));
  uint32_t want = Load32(out->data() + span.length);
  out->resize(span.length);
  if (crc32c::Mask(crc32c::Value(out->data(), span.length)) != want)
    return Status::Corruption(Where(f, index) + ": bad data CRC");
  return Status::OK();
}

Status AppendTFRecord(WritableFile* f, std::string_view data) {
  char hdr[12];
  uint64_t len = data.size();
  std::memcpy(hdr, &len, 8);
  uint32_t lc = crc32c::Mask(crc32c::Value(hdr, 8));
  std::memcpy(hdr + 8, &lc, 4);
  uint32_t dc = crc32c::Mask(crc32c::Value(data.data(), data.size()));
  SSDFEED_RETURN_IF_ERROR(f->Append(hdr, sizeof(hdr)));
  SSDFEED_RETURN_IF_ERROR(f->Append(data.data(), data.size()));
  return f->Append(&dc, 4);
}

}  // namespace ssdfeed
