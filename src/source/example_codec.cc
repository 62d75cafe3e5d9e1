// tf.train.Example read and written straight from the protobuf wire format
// (schema in docs/tf_example.proto). Not through libprotobuf: TensorFlow
// loads its own protobuf with RTLD_GLOBAL and exports ~10,000 of its
// symbols, so in a process that imported tensorflow first our calls into a
// second libprotobuf would bind to TensorFlow's copy, of another version.
// Interop with TensorFlow's writer and reader is tested in tests/py.
#include <cstring>

#include "source/tfrecord_format.h"

namespace ssdfeed {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

// A bounds-checked reader over one message's bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      uint8_t byte = static_cast<uint8_t>(*p_++);
      *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;  // more than 10 bytes
  }
  // Next field: number, wire type, and for kLength its bytes.
  bool Field(uint32_t* number, uint32_t* type, std::string_view* bytes, uint64_t* varint) {
    uint64_t tag;
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<uint32_t>(tag & 7);
    switch (*type) {
      case kVarint:
        return Varint(varint);
      case kFixed64:
        return Skip(8);
      case kFixed32:
        return Skip(4);
      case kLength: {
        uint64_t n;
        if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
        *bytes = std::string_view(p_, n);
        p_ += n;
        return true;
      }
      default:
        return false;  // groups are not used by tf.train.Example
    }
  }

 private:
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const char* p_;
  const char* end_;
};

struct Found {
  std::string_view feature;  // serialized Feature message
  bool present = false;
};

// Walks Example.features (field 1, maybe repeated) and their map entries,
// keeping the last value of each wanted key, as protobuf's map parsing does.
bool FindFeatures(std::string_view example, const std::vector<std::string>& wanted,
                  std::vector<Found>* out) {
  out->assign(wanted.size(), Found{});
  WireReader ex(example);
  while (!ex.done()) {
    uint32_t num, type;
    std::string_view bytes;
    uint64_t v;
    if (!ex.Field(&num, &type, &bytes, &v)) return false;
    if (num != 1 || type != kLength) continue;
    WireReader features(bytes);
    while (!features.done()) {
      std::string_view entry;
      if (!features.Field(&num, &type, &entry, &v)) return false;
      if (num != 1 || type != kLength) continue;
      std::string_view key, value;
      WireReader e(entry);
      while (!e.done()) {
        std::string_view b;
        if (!e.Field(&num, &type, &b, &v)) return false;
        if (type == kLength && num == 1) key = b;
        if (type == kLength && num == 2) value = b;
      }
      for (size_t i = 0; i < wanted.size(); ++i)
        if (key == wanted[i]) (*out)[i] = {value, true};
    }
  }
  return true;
}

// The list message in field `kind` of a Feature (1 bytes_list, 3 int64_list).
bool FeatureList(std::string_view feature, uint32_t kind, std::string_view* list) {
  WireReader f(feature);
  uint32_t num, type;
  uint64_t v;
  while (!f.done()) {
    if (!f.Field(&num, &type, list, &v)) return false;
    if (num == kind && type == kLength) return true;
  }
  return false;
}

bool FirstBytes(std::string_view feature, std::string_view* out) {
  std::string_view list;
  if (!FeatureList(feature, 1, &list)) return false;
  WireReader l(list);
  uint32_t num, type;
  uint64_t v;
  while (!l.done()) {
    if (!l.Field(&num, &type, out, &v)) return false;
    if (num == 1 && type == kLength) return true;
  }
  return false;
}

bool FirstInt64(std::string_view feature, int64_t* out) {
  std::string_view list, packed;
  if (!FeatureList(feature, 3, &list)) return false;
  WireReader l(list);
  uint32_t num, type;
  uint64_t v;
  while (!l.done()) {
    if (!l.Field(&num, &type, &packed, &v)) return false;
    if (num != 1) continue;
    if (type == kVarint) {  // unpacked
      *out = static_cast<int64_t>(v);
      return true;
    }
    WireReader p(packed);
    if (type == kLength && !p.done() && p.Varint(&v)) {
      *out = static_cast<int64_t>(v);
      return true;
    }
  }
  return false;
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutLength(uint32_t field, std::string_view bytes, std::string* out) {
  PutVarint((field << 3) | kLength, out);
  PutVarint(bytes.size(), out);
  out->append(bytes);
}

std::string MapEntry(std::string_view key, const std::string& feature) {
  std::string e;
  PutLength(1, key, &e);
  PutLength(2, feature, &e);
  return e;
}

std::string BytesFeature(std::string_view value) {
  std::string list, feature;
  PutLength(1, value, &list);
  PutLength(1, list, &feature);
  return feature;
}

}  // namespace

Status ParseExample(std::string_view serialized, const ExampleKeys& keys, EncodedSample* out) {
  std::vector<std::string> image_keys = keys.image_key.empty()
                                            ? std::vector<std::string>{"image/encoded", "image"}
                                            : std::vector<std::string>{keys.image_key};
  std::vector<std::string> label_keys = keys.label_key.empty()
                                            ? std::vector<std::string>{"image/class/label", "label"}
                                            : std::vector<std::string>{keys.label_key};
  std::vector<std::string> wanted = image_keys;
  wanted.insert(wanted.end(), label_keys.begin(), label_keys.end());
  std::vector<Found> found;
  if (!FindFeatures(serialized, wanted, &found))
    return Status::Corruption("not a tf.train.Example (bad protobuf wire format)");
  std::string_view image;
  bool have_image = false;
  for (size_t i = 0; i < image_keys.size() && !have_image; ++i) {
    if (!found[i].present) continue;
    if (!FirstBytes(found[i].feature, &image)) break;  // present but not bytes: stop
    have_image = true;
  }
  if (!have_image)
    return Status::Corruption(
        "Example has no image bytes under " +
        (keys.image_key.empty() ? std::string("image/encoded or image") : keys.image_key));
  out->bytes.assign(image.data(), image.size());
  out->label = -1;
  for (size_t i = 0; i < label_keys.size(); ++i) {
    const Found& f = found[image_keys.size() + i];
    if (f.present) {
      FirstInt64(f.feature, &out->label);
      break;
    }
  }
  return Status::OK();
}

std::string SerializeExample(std::string_view image, int64_t label) {
  // Keys in sorted order, as protobuf's deterministic serialization writes maps.
  std::string ints, int_list, label_feature;
  PutVarint(static_cast<uint64_t>(label), &ints);
  PutLength(1, ints, &int_list);  // packed repeated int64
  PutLength(3, int_list, &label_feature);
  std::string features;
  PutLength(1, MapEntry("image/class/label", label_feature), &features);
  PutLength(1, MapEntry("image/encoded", BytesFeature(image)), &features);
  PutLength(1, MapEntry("image/format", BytesFeature("jpeg")), &features);
  std::string example;
  PutLength(1, features, &example);
  return example;
}

}  // namespace ssdfeed
