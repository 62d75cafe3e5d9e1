// coco:IMAGES_DIR?annotations=FILE.json[&crowd=1][&fields=image_id,iscrowd,area,masks]
// — COCO object detection. Fields: image (IMAGES_DIR/file_name), boxes
// (bbox [x,y,w,h] as float32 xyxy in the image's pixels) and classes
// (category ids mapped to 0..K-1 in id order; the map is part of the
// identity and categories() gives it); on request (fields=, or
// SourceOptions::fields by COCO key) image_id (a label: the image's id),
// iscrowd (one int64 per box, dropped with its box, as classes), area
// (one float32 per box, as the json gives it: box_floats) and masks (each
// box's segmentation rasterised as pycocotools' annToMask does, at the
// json's height x width: instance_masks, dropped with its box).
// Samples are the json's images sorted by file_name (then id): canonical
// whatever order the json lists them in. An image without annotations stays
// with zero boxes; iscrowd boxes are left out unless crowd=1 (or
// SourceOptions::coco_crowd). Boxes of an image keep the json's order.
// Images are read through links only while they stay inside IMAGES_DIR
// (follow_links=1: anywhere); the annotations file is read as named.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "source/coco_masks.h"
#include "source/field_specs.h"
#include "source/origin_root.h"
#include "source/shard_files.h"
#include "source/sources.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

namespace {

using json = nlohmann::json;

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  std::vector<float> boxes;  // xyxy
  std::vector<int64_t> classes;
  std::vector<int64_t> iscrowd;                 // one per box
  std::vector<float> area;                      // one per box, when asked for
  int64_t height = 0, width = 0;                // the json's, read when masks are asked for
  std::vector<CocoSegmentation> segmentations;  // one per box, when asked for
};

// What the json is read for beyond boxes and classes.
struct CocoWants {
  bool area = false;
  bool masks = false;
};

// The fields a coco: source gives on request, by COCO key, and their kind.
struct CocoExtra {
  const char* key;
  FieldKind kind;
};
constexpr CocoExtra kCocoExtras[] = {{"image_id", FieldKind::kLabel},
                                     {"iscrowd", FieldKind::kClasses},
                                     {"area", FieldKind::kBoxFloats},
                                     {"masks", FieldKind::kInstanceMasks}};

std::string CocoExtraKeys() {
  std::string s;
  for (const auto& e : kCocoExtras) s.append(s.empty() ? "" : ", ").append(e.key);
  return s;
}

// The image's instance masks as an encoded instance_masks field: its
// height and width (so preparation can check them against the image's),
// then one height x width plane of 0/1 per box, in box order.
void RasteriseMasks(const CocoImage& im, std::string* out) {
  const size_t plane = static_cast<size_t>(im.height) * static_cast<size_t>(im.width);
  const uint32_t dims[2] = {static_cast<uint32_t>(im.height), static_cast<uint32_t>(im.width)};
  out->assign(reinterpret_cast<const char*>(dims), sizeof dims);
  out->resize(sizeof dims + plane * im.segmentations.size());
  for (size_t k = 0; k < im.segmentations.size(); ++k)
    RasteriseCocoSegmentation(im.segmentations[k], im.height, im.width,
                              reinterpret_cast<uint8_t*>(out->data()) + sizeof dims + k * plane);
}

class CocoSource final : public Source {
 public:
  CocoSource(std::string uri, std::string annotations, std::vector<CocoImage> images,
             std::vector<InputFile> files, std::vector<Category> categories,
             std::vector<FieldSpec> extras, bool crowd, size_t skipped,
             std::vector<std::string> reasons, RandomAccessFileOptions read, Env* env)
      : uri_(std::move(uri)),
        annotations_(std::move(annotations)),
        images_(std::move(images)),
        files_(std::move(files)),
        categories_(std::move(categories)),
        extras_(std::move(extras)),
        skipped_(skipped),
        reasons_(std::move(reasons)),
        read_(std::move(read)),
        env_(env) {
    std::string extra = FieldsIdentity(fields()) + (crowd ? "|crowd" : "|nocrowd") + "|categories";
    for (size_t k = 0; k < categories_.size(); ++k) {
      const auto& c = categories_[k];
      extra.append("|").append(std::to_string(k)).append(":").append(std::to_string(c.id));
      extra.append(":").append(std::to_string(c.name.size())).append(":").append(c.name);
    }
    identity_ = IdentityDigest("coco", files_, extra);
  }
  size_t size() const override { return images_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    const CocoImage& im = images_[id];
    out->label = -1;
    out->fields.clear();
    // The image first: masks are rasterised only for a sample that is there.
    SSDFEED_RETURN_IF_ERROR(env_->ReadFileToString(files_[id + 1].path, &out->bytes, read_));
    std::string origin = annotations_ + " image id " + std::to_string(im.id);
    EncodedField boxes{"boxes", FieldKind::kBoxes, {}, false, origin};
    boxes.bytes.resize(im.boxes.size() * sizeof(float));
    if (!im.boxes.empty()) std::memcpy(boxes.bytes.data(), im.boxes.data(), boxes.bytes.size());
    EncodedField classes{"classes", FieldKind::kClasses, {}, false, origin};
    for (int64_t c : im.classes) AppendInt64(c, &classes.bytes);
    out->fields.push_back(std::move(boxes));
    out->fields.push_back(std::move(classes));
    for (const FieldSpec& f : extras_) {
      EncodedField e{f.name, f.kind, {}, false, origin};
      if (f.key == "image_id") {
        AppendInt64(im.id, &e.bytes);
      } else if (f.key == "iscrowd") {
        for (int64_t c : im.iscrowd) AppendInt64(c, &e.bytes);
      } else if (f.key == "area") {
        e.bytes.assign(reinterpret_cast<const char*>(im.area.data()),
                       im.area.size() * sizeof(float));
      } else {
        RasteriseMasks(im, &e.bytes);
      }
      out->fields.push_back(std::move(e));
    }
    return Status::OK();
  }
  std::string Describe(size_t id) const override {
    return files_[id + 1].path + " (" + annotations_ + " image id " +
           std::to_string(images_[id].id) + ")";
  }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  size_t skipped() const override { return skipped_; }
  std::vector<std::string> skipped_reasons() const override { return reasons_; }
  std::vector<Category> categories() const override { return categories_; }
  std::vector<FieldSpec> fields() const override {
    std::vector<FieldSpec> out = {{"image", FieldKind::kImage, ""},
                                  {"boxes", FieldKind::kBoxes, "bbox"},
                                  {"classes", FieldKind::kClasses, "category_id"}};
    out.insert(out.end(), extras_.begin(), extras_.end());
    return out;
  }

 private:
  std::string uri_;
  std::string annotations_;
  std::vector<CocoImage> images_;
  std::vector<InputFile> files_;  // the annotations file, then one per image
  std::vector<Category> categories_;
  std::vector<FieldSpec> extras_;  // asked for beyond image, boxes, classes
  size_t skipped_;
  std::vector<std::string> reasons_;
  RandomAccessFileOptions read_;
  Env* env_;
  std::string identity_;
};

struct CocoQuery {
  std::string annotations;
  bool crowd = false;
  bool follow_links = false;
  std::vector<std::string> fields;  // fields=KEY,KEY
};

Status ParseCocoQuery(const std::string& uri, const std::string& query, CocoQuery* q) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (!query.empty()) SSDFEED_RETURN_IF_ERROR(ParseQuery(query, uri, &pairs));
  for (const auto& [k, v] : pairs) {
    if (k == "annotations") {
      q->annotations = v;
    } else if (k == "crowd" && (v == "0" || v == "1" || v == "true" || v == "false")) {
      q->crowd = v == "1" || v == "true";
    } else if (k == "follow_links" && (v == "0" || v == "1" || v == "true" || v == "false")) {
      q->follow_links = v == "1" || v == "true";
    } else if (k == "fields") {
      for (size_t at = 0; at <= v.size();) {
        size_t comma = std::min(v.find(',', at), v.size());
        if (comma > at) q->fields.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      return Status::InvalidArgument(
          uri + ": unknown or bad option '" + k + "=" + v +
          "' (annotations=FILE.json, crowd=0|1, follow_links=0|1, fields=KEY,...)");
    }
  }
  if (q->annotations.empty())
    return Status::InvalidArgument(uri +
                                   ": no annotations file (coco:IMAGES_DIR?annotations=FILE.json)");
  return Status::OK();
}

bool SafeRelative(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    if (name.compare(start, slash == std::string::npos ? std::string::npos : slash - start, "..") ==
        0)
      return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// json numbers as the C++ types they become. A cast of NaN, infinity or a
// value beyond the type's range (1e30 to int64, 1e300 to float) is
// undefined behaviour, so such values are refused instead of converted.
// An id may be a float with a whole value (1.0), as Python writes them.
bool ToInt64(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v.get<uint64_t>());
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  // 2^63 is exact as a double; NaN fails both comparisons.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != std::trunc(d))
    return false;
  *out = static_cast<int64_t>(d);
  return true;
}

bool ToFloat(double d, float* out) {
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) return false;
  *out = static_cast<float>(d);
  return true;
}

// member `key` of object `o` as an int64, or Corruption naming `what`.
Status IdOf(const json& o, const char* key, const std::string& where, const std::string& what,
            int64_t* out) {
  const json& v = o.at(key);
  if (ToInt64(v, out)) return Status::OK();
  return Status::Corruption(where + ": " + what + " " + v.dump() +
                            " is not an integer that int64 holds");
}

// The annotation's bbox [x, y, w, h] as float32 xyxy.
Status BoxOf(const json& a, const std::string& where, const std::string& ann, float xyxy[4]) {
  const json& b = a.at("bbox");
  if (!b.is_array() || b.size() != 4 || !b[0].is_number() || !b[1].is_number() ||
      !b[2].is_number() || !b[3].is_number())
    return Status::Corruption(where + ": " + ann + " bbox is not [x, y, width, height]");
  double x = b[0].get<double>(), y = b[1].get<double>(), w = b[2].get<double>(),
         h = b[3].get<double>();
  const double v[4] = {x, y, x + w, y + h};
  for (int k = 0; k < 4; ++k)
    if (!ToFloat(v[k], &xyxy[k]))
      return Status::Corruption(where + ": " + ann + " bbox " + b.dump() +
                                " is not finite in float32 (each of x, y, x+width, y+height "
                                "within +-3.4e38)");
  return Status::OK();
}

// The annotation's area as float32 (asked for: it must be there).
Status AreaOf(const json& a, const std::string& where, const std::string& ann, float* out) {
  if (!a.contains("area") || !a["area"].is_number())
    return Status::Corruption(where + ": " + ann + " has no area (a number)");
  if (!ToFloat(a["area"].get<double>(), out))
    return Status::Corruption(where + ": " + ann + " area " + a["area"].dump() +
                              " is not finite in float32");
  return Status::OK();
}

// The image's height and width as the json gives them (masks need them).
Status SizeOf(const json& im, const std::string& where, CocoImage* c) {
  std::string what = where + ": image id " + std::to_string(c->id);
  for (const char* key : {"height", "width"}) {
    if (!im.contains(key) || !im[key].is_number_integer() || im[key].get<int64_t>() <= 0 ||
        im[key].get<int64_t>() > (1 << 16))
      return Status::Corruption(what + " has no " + key +
                                " (a whole number of pixels, 1 to 65536), which masks need");
  }
  c->height = im["height"].get<int64_t>();
  c->width = im["width"].get<int64_t>();
  // Each mask is a plane of this size: no larger than an image may decode.
  if (static_cast<uint64_t>(c->height * c->width) > DecodeLimits().max_pixels)
    return Status::Corruption(what + " of " + std::to_string(c->width) + "x" +
                              std::to_string(c->height) + " exceeds the decode limit of " +
                              std::to_string(DecodeLimits().max_pixels) + " pixels");
  return Status::OK();
}

// Parses the json's three lists into images (with their boxes) and the
// category map; what does not fit COCO's schema is Corruption naming it.
// wants: what each kept annotation gives beyond its box and class.
Status ParseCoco(const json& doc, const std::string& where, bool crowd, CocoWants wants,
                 std::vector<CocoImage>* images, std::vector<Source::Category>* categories) {
  if (!doc.is_object() || !doc.contains("images") || !doc["images"].is_array())
    return Status::Corruption(where + ": no \"images\" list (not COCO annotations)");
  for (const auto& c : doc.value("categories", json::array())) {
    Source::Category cat{0, c.value("name", std::string())};
    SSDFEED_RETURN_IF_ERROR(IdOf(c, "id", where, "category id", &cat.id));
    categories->push_back(std::move(cat));
  }
  std::sort(categories->begin(), categories->end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::map<int64_t, int64_t> cat_index;
  for (size_t k = 0; k < categories->size(); ++k)
    if (!cat_index.emplace((*categories)[k].id, static_cast<int64_t>(k)).second)
      return Status::Corruption(where + ": category id " + std::to_string((*categories)[k].id) +
                                " is listed twice");
  std::map<int64_t, size_t> by_id;
  for (const auto& im : doc["images"]) {
    CocoImage c;
    SSDFEED_RETURN_IF_ERROR(IdOf(im, "id", where, "image id", &c.id));
    c.file_name = im.at("file_name").get<std::string>();
    if (!SafeRelative(c.file_name))
      return Status::Corruption(where + ": image id " + std::to_string(c.id) + " file_name '" +
                                c.file_name + "' is not a relative path inside IMAGES_DIR");
    if (wants.masks) SSDFEED_RETURN_IF_ERROR(SizeOf(im, where, &c));
    if (!by_id.emplace(c.id, images->size()).second)
      return Status::Corruption(where + ": image id " + std::to_string(c.id) + " is listed twice");
    images->push_back(std::move(c));
  }
  for (const auto& a : doc.value("annotations", json::array())) {
    std::string ann = "annotation id " + (a.contains("id") ? a["id"].dump() : std::string("?"));
    int64_t iscrowd = 0, image_id = 0, category_id = 0;
    if (a.contains("iscrowd"))
      SSDFEED_RETURN_IF_ERROR(IdOf(a, "iscrowd", where, ann + " iscrowd", &iscrowd));
    if (iscrowd != 0 && !crowd) continue;
    SSDFEED_RETURN_IF_ERROR(IdOf(a, "image_id", where, ann + " image_id", &image_id));
    auto im = by_id.find(image_id);
    if (im == by_id.end())
      return Status::Corruption(where + ": " + ann + " names image id " + a["image_id"].dump() +
                                ", which is not in \"images\"");
    SSDFEED_RETURN_IF_ERROR(IdOf(a, "category_id", where, ann + " category_id", &category_id));
    auto cat = cat_index.find(category_id);
    if (cat == cat_index.end())
      return Status::Corruption(where + ": " + ann + " names category id " +
                                a["category_id"].dump() + ", which is not in \"categories\"");
    float xyxy[4];
    SSDFEED_RETURN_IF_ERROR(BoxOf(a, where, ann, xyxy));
    CocoImage& dst = (*images)[im->second];
    dst.boxes.insert(dst.boxes.end(), xyxy, xyxy + 4);
    dst.classes.push_back(cat->second);
    dst.iscrowd.push_back(iscrowd);
    if (wants.area) {
      float area = 0;
      SSDFEED_RETURN_IF_ERROR(AreaOf(a, where, ann, &area));
      dst.area.push_back(area);
    }
    if (wants.masks) {
      CocoSegmentation s;
      SSDFEED_RETURN_IF_ERROR(ParseCocoSegmentation(a, dst.height, dst.width, where, ann, &s));
      dst.segmentations.push_back(std::move(s));
    }
  }
  std::sort(images->begin(), images->end(), [](const CocoImage& a, const CocoImage& b) {
    return a.file_name != b.file_name ? a.file_name < b.file_name : a.id < b.id;
  });
  return Status::OK();
}

Status LoadCoco(Env* env, const std::string& path, bool crowd, CocoWants wants,
                std::vector<CocoImage>* images, std::vector<Source::Category>* categories) {
  std::string text;
  SSDFEED_RETURN_IF_ERROR(env->ReadFileToString(path, &text, OriginReadOptions()));
  try {
    json doc = json::parse(text);
    return ParseCoco(doc, path, crowd, wants, images, categories);
  } catch (const json::exception& e) {
    return Status::Corruption(path + ": not COCO annotations (" + e.what() + ")");
  }
}

// The fields asked for beyond image, boxes and classes: the URI's
// fields=KEY,... (named by their key), else SourceOptions::fields, each
// naming a COCO key (the name when the key is empty). An unknown key, a
// kind other than the key's, or a name given twice is InvalidArgument.
Result<std::vector<FieldSpec>> CocoExtras(const std::string& uri, const CocoQuery& q,
                                          const std::vector<FieldSpec>& given) {
  std::vector<FieldSpec> asked;
  for (const auto& k : q.fields) asked.push_back({k, FieldKind::kAuto, k});
  if (q.fields.empty()) asked = given;
  std::vector<FieldSpec> out;
  std::vector<std::string> names = {"image", "boxes", "classes"};
  for (FieldSpec f : asked) {
    if (f.key.empty()) f.key = f.name;
    const CocoExtra* e = nullptr;
    for (const auto& x : kCocoExtras)
      if (f.key == x.key) e = &x;
    if (e == nullptr)
      return Status::InvalidArgument(uri + ": field '" + f.name + "' asks for COCO key '" + f.key +
                                     "'; coco: gives image, boxes and classes, and on request " +
                                     CocoExtraKeys());
    if (f.kind != FieldKind::kAuto && f.kind != e->kind)
      return Status::InvalidArgument(uri + ": field '" + f.name + "' (" + f.key + ") is a " +
                                     std::string(EnumName(e->kind)) + " field, not " +
                                     std::string(EnumName(f.kind)));
    if (std::find(names.begin(), names.end(), f.name) != names.end())
      return Status::InvalidArgument(uri + ": field '" + f.name + "' is given twice");
    names.push_back(f.name);
    out.push_back({f.name, e->kind, f.key});
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Source>> OpenCocoSource(const std::string& uri, const std::string& spec,
                                               const SourceOptions& opts) {
  size_t q = spec.find('?');
  std::string dir = spec.substr(0, q);
  CocoQuery query;
  query.crowd = opts.coco_crowd;
  query.follow_links = opts.follow_links;
  SSDFEED_RETURN_IF_ERROR(
      ParseCocoQuery(uri, q == std::string::npos ? "" : spec.substr(q + 1), &query));
  SSDFEED_ASSIGN_OR_RETURN(std::vector<FieldSpec> extras, CocoExtras(uri, query, opts.fields));
  Env* env = opts.env;
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Stat(dir));
  if (!root.is_dir) return Status::InvalidArgument(dir + ": not a directory");
  SSDFEED_ASSIGN_OR_RETURN(OriginRoot origin, OriginRoot::Open(env, dir, query.follow_links));
  std::vector<CocoImage> found;
  std::vector<Source::Category> categories;
  CocoWants wants;
  for (const FieldSpec& f : extras) {
    wants.area |= f.key == "area";
    wants.masks |= f.key == "masks";
  }
  SSDFEED_RETURN_IF_ERROR(
      LoadCoco(env, query.annotations, query.crowd, wants, &found, &categories));
  SSDFEED_ASSIGN_OR_RETURN(InputFile ann, StatInput(env, query.annotations));
  std::vector<InputFile> files{ann};
  std::vector<CocoImage> images;
  std::vector<std::string> reasons;
  for (auto& im : found) {
    std::string path = JoinPath(dir, im.file_name);
    Status inside = origin.Check(path);
    if (!inside.ok())  // never skipped: the user must see it
      return inside.WithContext(query.annotations + ": image id " + std::to_string(im.id));
    auto f = StatInput(env, path);
    if (!f.ok()) {
      Status why = Status::NotFound(query.annotations + ": image id " + std::to_string(im.id) +
                                    ": " + f.status().message());
      if (opts.on_error == OnError::kRaise) return why;
      reasons.push_back(why.message());
      continue;
    }
    files.push_back(*f);
    images.push_back(std::move(im));
  }
  if (images.empty()) return Status::NotFound(uri + ": no images");
  size_t skipped = reasons.size();
  return std::unique_ptr<Source>(new CocoSource(
      uri, query.annotations, std::move(images), std::move(files), std::move(categories),
      std::move(extras), query.crowd, skipped, std::move(reasons), origin.ReadOptions(), env));
}

}  // namespace ssdfeed
