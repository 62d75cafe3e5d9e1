// tf.train.Example read and written straight from the protobuf wire format
// (schema in docs/tf_example.proto). Not through libprotobuf: TensorFlow
// loads its own protobuf with RTLD_GLOBAL and exports ~10,000 of its
// symbols, so in a process that imported tensorflow first our calls into a
// second libprotobuf would bind to TensorFlow's copy, of another version.
// Interop with TensorFlow's writer and reader is tested in tests/py.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "source/field_specs.h"
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
      case kFixed32:  // the 4 bytes in *varint (float_list's unpacked values)
        if (static_cast<size_t>(end_ - p_) < 4) return false;
        *varint = 0;
        std::memcpy(varint, p_, 4);  // little endian host (as the record format)
        p_ += 4;
        return true;
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

// Every value of a Feature's float_list (field 2), packed or not.
bool AllFloats(std::string_view feature, std::vector<float>* out) {
  out->clear();
  std::string_view list, packed;
  if (!FeatureList(feature, 2, &list)) return false;
  WireReader l(list);
  uint32_t num, type;
  uint64_t v;
  while (!l.done()) {
    if (!l.Field(&num, &type, &packed, &v)) return false;
    if (num != 1) continue;
    float f;
    if (type == kFixed32) {
      uint32_t bits = static_cast<uint32_t>(v);
      std::memcpy(&f, &bits, 4);
      out->push_back(f);
    } else if (type == kLength) {
      if (packed.size() % 4 != 0) return false;
      for (size_t i = 0; i < packed.size(); i += 4) {
        std::memcpy(&f, packed.data() + i, 4);
        out->push_back(f);
      }
    }
  }
  return true;
}

// Every value of a Feature's int64_list (field 3), packed or not.
bool AllInt64(std::string_view feature, std::vector<int64_t>* out) {
  out->clear();
  std::string_view list, packed;
  if (!FeatureList(feature, 3, &list)) return false;
  WireReader l(list);
  uint32_t num, type;
  uint64_t v;
  while (!l.done()) {
    if (!l.Field(&num, &type, &packed, &v)) return false;
    if (num != 1) continue;
    if (type == kVarint) {
      out->push_back(static_cast<int64_t>(v));
    } else if (type == kLength) {
      WireReader p(packed);
      while (!p.done()) {
        if (!p.Varint(&v)) return false;
        out->push_back(static_cast<int64_t>(v));
      }
    }
  }
  return true;
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

namespace {

// The feature keys field f reads: boxes under a prefix ending in '/' are the
// object detection API's four lists; every other field reads one key.
std::vector<std::string> KeysOf(const FieldSpec& f) {
  if (f.kind == FieldKind::kBoxes && !f.key.empty() && f.key.back() == '/')
    return {f.key + "xmin", f.key + "ymin", f.key + "xmax", f.key + "ymax"};
  return {f.key};
}

Status Missing(const FieldSpec& f, const std::string& key) {
  return Status::Corruption("Example has no feature '" + key + "' (field '" + f.name + "')");
}

Status WrongType(const FieldSpec& f, const std::string& key, const char* want) {
  return Status::Corruption("feature '" + key + "' (field '" + f.name + "') is not a " + want);
}

// Boxes from the four normalised lists (xyxy interleaved) or one list of
// 4K pixel coordinates; absent lists are an image without objects.
Status ReadBoxes(const FieldSpec& f, const std::vector<std::string>& keys, const Found* found,
                 EncodedField* out) {
  std::vector<std::vector<float>> lists(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    if (found[i].present && !AllFloats(found[i].feature, &lists[i]))
      return WrongType(f, keys[i], "float list");
  size_t k = lists[0].size();
  for (size_t i = 1; i < keys.size(); ++i)
    if (lists[i].size() != k)
      return Status::Corruption("field '" + f.name + "': " + keys[0] + " has " + std::to_string(k) +
                                " values but " + keys[i] + " has " +
                                std::to_string(lists[i].size()));
  if (keys.size() == 1 && k % 4 != 0)
    return Status::Corruption("feature '" + keys[0] + "' (field '" + f.name + "') holds " +
                              std::to_string(k) + " values, not 4 per box");
  out->normalized = keys.size() == 4;
  size_t boxes = keys.size() == 4 ? k : k / 4;
  out->bytes.resize(boxes * 4 * sizeof(float));
  for (size_t b = 0; b < boxes; ++b)
    for (size_t c = 0; c < 4; ++c) {
      float v = keys.size() == 4 ? lists[c][b] : lists[0][b * 4 + c];
      std::memcpy(out->bytes.data() + (b * 4 + c) * sizeof(float), &v, sizeof(float));
    }
  return Status::OK();
}

// One non-image field from its feature(s).
Status ReadField(const FieldSpec& f, const std::vector<std::string>& keys, const Found* found,
                 EncodedField* out) {
  if (f.kind == FieldKind::kBoxes) return ReadBoxes(f, keys, found, out);
  if (f.kind == FieldKind::kBoxFloats) {         // one float per box: a float_list
    if (!found[0].present) return Status::OK();  // no objects
    std::vector<float> values;
    if (!AllFloats(found[0].feature, &values)) return WrongType(f, keys[0], "float list");
    out->bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    return Status::OK();
  }
  std::vector<int64_t> ints;
  if (f.kind == FieldKind::kClasses || f.kind == FieldKind::kLabel) {
    if (!found[0].present) {
      if (f.kind == FieldKind::kClasses) return Status::OK();  // no objects
      return Missing(f, keys[0]);
    }
    if (!AllInt64(found[0].feature, &ints)) return WrongType(f, keys[0], "int64 list");
    if (f.kind == FieldKind::kLabel && ints.empty()) return Missing(f, keys[0]);
    if (f.kind == FieldKind::kLabel) ints.resize(1);
    for (int64_t v : ints) AppendInt64(v, &out->bytes);
    return Status::OK();
  }
  std::string_view bytes;
  if (!found[0].present) return Missing(f, keys[0]);
  if (!FirstBytes(found[0].feature, &bytes)) return WrongType(f, keys[0], "bytes list");
  out->bytes.assign(bytes.data(), bytes.size());
  return Status::OK();
}

}  // namespace

Status ParseExampleFields(std::string_view serialized, const ExampleKeys& keys,
                          const std::vector<FieldSpec>& fields, EncodedSample* out) {
  SSDFEED_RETURN_IF_ERROR(ParseExample(serialized, keys, out));
  out->fields.clear();
  bool want_label = false;
  std::vector<std::string> wanted;
  std::vector<size_t> first;  // index in wanted of each field's first key
  for (const auto& f : fields) {
    first.push_back(wanted.size());
    if (f.kind == FieldKind::kImage) continue;
    if (f.kind == FieldKind::kLabel && f.name == "label") {
      want_label = true;
      continue;
    }
    for (auto& k : KeysOf(f)) wanted.push_back(std::move(k));
  }
  if (!want_label) out->label = -1;
  std::vector<Found> found;
  if (!FindFeatures(serialized, wanted, &found))
    return Status::Corruption("not a tf.train.Example (bad protobuf wire format)");
  size_t boxes = SIZE_MAX, classes = SIZE_MAX;
  for (size_t j = 0; j < fields.size(); ++j) {
    const FieldSpec& f = fields[j];
    if (f.kind == FieldKind::kImage || (f.kind == FieldKind::kLabel && f.name == "label")) continue;
    std::vector<std::string> fkeys = KeysOf(f);
    EncodedField ef{f.name, f.kind, {}, false, {}};
    SSDFEED_RETURN_IF_ERROR(ReadField(f, fkeys, found.data() + first[j], &ef));
    if (f.kind == FieldKind::kBoxes) boxes = ef.bytes.size() / 16;
    if (f.kind == FieldKind::kClasses) classes = ef.bytes.size() / 8;
    out->fields.push_back(std::move(ef));
  }
  if (boxes != SIZE_MAX && classes != SIZE_MAX && boxes != classes)
    return Status::Corruption("Example has " + std::to_string(boxes) + " boxes but " +
                              std::to_string(classes) + " classes");
  if (want_label && out->label == -1)
    return Status::Corruption(
        "Example has no int64 label under " +
        (keys.label_key.empty() ? std::string("image/class/label or label") : keys.label_key));
  return Status::OK();
}

std::vector<FieldSpec> DetectExampleFields(std::string_view serialized) {
  std::vector<std::string> keys = {"image/object/bbox/xmin", "image/segmentation/class/encoded",
                                   "image/class/label", "label"};
  std::vector<Found> found;
  if (!FindFeatures(serialized, keys, &found) || (!found[0].present && !found[1].present))
    return {};
  std::vector<FieldSpec> out = {{"image", FieldKind::kImage, ""}};
  if (found[2].present || found[3].present) out.push_back({"label", FieldKind::kLabel, ""});
  if (found[0].present) {
    out.push_back({"boxes", FieldKind::kBoxes, "image/object/bbox/"});
    out.push_back({"classes", FieldKind::kClasses, "image/object/class/label"});
  }
  if (found[1].present)
    out.push_back({"mask", FieldKind::kMask, "image/segmentation/class/encoded"});
  return out;
}

std::string SerializeFeatures(const std::vector<ExampleFeature>& features) {
  std::vector<const ExampleFeature*> sorted;
  for (const auto& f : features) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(),
            [](const ExampleFeature* a, const ExampleFeature* b) { return a->key < b->key; });
  std::string all;
  for (const ExampleFeature* f : sorted) {
    std::string values, list, feature;
    if (f->type == ExampleFeature::kBytes) {
      for (const auto& b : f->bytes) PutLength(1, b, &list);
      PutLength(1, list, &feature);
    } else if (f->type == ExampleFeature::kFloat) {
      values.resize(f->floats.size() * 4);
      if (!values.empty()) std::memcpy(values.data(), f->floats.data(), values.size());
      PutLength(1, values, &list);  // packed
      PutLength(2, list, &feature);
    } else {
      for (int64_t v : f->ints) PutVarint(static_cast<uint64_t>(v), &values);
      PutLength(1, values, &list);  // packed
      PutLength(3, list, &feature);
    }
    PutLength(1, MapEntry(f->key, feature), &all);
  }
  std::string example;
  PutLength(1, all, &example);
  return example;
}

}  // namespace ssdfeed
