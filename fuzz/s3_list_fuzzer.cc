// ListObjectsV2 pages as a hostile or broken S3 endpoint may send them: the
// parser returns an error or entries that are safe to put into a URL, an
// If-Match header and a message (a key of 1-1024 bytes and an ETag without
// control characters or quotes), never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "source/s3_client.h"

namespace {

bool Clean(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string xml(reinterpret_cast<const char*>(data), size);
  std::vector<ssdfeed::s3::ObjectInfo> out;
  std::string next;
  ssdfeed::Status s = ssdfeed::s3::ParseListPage(xml, "s3://fuzz/ (listing)", &out, &next);
  if (!s.ok()) return 0;
  for (const auto& o : out) {
    if (o.key.empty() || o.key.size() > 1024 || !Clean(o.key)) __builtin_trap();
    if (!Clean(o.etag) || o.etag.find('"') != std::string::npos) __builtin_trap();
  }
  return 0;
}
