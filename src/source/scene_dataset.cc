// make-dataset --format voc|coco|wds-seg: colour-coded scenes whose masks,
// boxes and pixels agree, in the layouts segmentation and detection data is
// published in, so tests, examples and benchmarks need no download.
#include <spng.h>

#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "image/cv_call.h"
#include "source/sources.h"
#include "ssdfeed/dataset.h"
#include "util/hash.h"

namespace ssdfeed {

void SceneColour(int cls, uint8_t rgb[3]) {
  // Pascal VOC's palette: the bits of the class spread over the colours' top bits.
  rgb[0] = rgb[1] = rgb[2] = 0;
  for (int j = 0, c = cls; j < 8; ++j, c >>= 3) {
    rgb[0] |= static_cast<uint8_t>(((c >> 0) & 1) << (7 - j));
    rgb[1] |= static_cast<uint8_t>(((c >> 1) & 1) << (7 - j));
    rgb[2] |= static_cast<uint8_t>(((c >> 2) & 1) << (7 - j));
  }
}

int64_t SceneCategoryId(int cls) { return static_cast<int64_t>(cls) * (cls + 1) / 2; }

Status EncodePng8(const uint8_t* pixels, int height, int width, bool palette, std::string* out) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(SPNG_CTX_ENCODER), spng_ctx_free);
  if (!ctx) return Status::IOError("libspng could not be initialised");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(width);
  ihdr.height = static_cast<uint32_t>(height);
  ihdr.bit_depth = 8;
  ihdr.color_type = palette ? SPNG_COLOR_TYPE_INDEXED : SPNG_COLOR_TYPE_GRAYSCALE;
  int err = spng_set_ihdr(ctx.get(), &ihdr);
  if (err == 0 && palette) {
    spng_plte plte{};
    plte.n_entries = 256;
    for (int i = 0; i < 256; ++i) {
      uint8_t rgb[3];
      SceneColour(i, rgb);
      plte.entries[i] = {rgb[0], rgb[1], rgb[2], 0};
    }
    err = spng_set_plte(ctx.get(), &plte);
  }
  size_t n = static_cast<size_t>(height) * width;
  if (err == 0) err = spng_encode_image(ctx.get(), pixels, n, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  size_t len = 0;
  void* buf = err == 0 ? spng_get_png_buffer(ctx.get(), &len, &err) : nullptr;
  if (buf == nullptr) return Status::IOError(std::string("PNG encode: ") + spng_strerror(err));
  out->assign(static_cast<const char*>(buf), len);
  std::free(buf);
  return Status::OK();
}

namespace {

// One object in its quarter q (0..3) of a w x h scene, a margin inside it.
SceneObject PlaceObject(cv::RNG& rng, int q, int w, int h, int classes) {
  int cw = w / 2, ch = h / 2, cx = (q % 2) * cw, cy = (q / 2) * ch;
  int mx = std::max(1, cw / 10), my = std::max(1, ch / 10);
  int aw = std::max(2, cw - 2 * mx), ah = std::max(2, ch - 2 * my);
  int bw = rng.uniform(std::max(2, aw / 3), aw + 1), bh = rng.uniform(std::max(2, ah / 3), ah + 1);
  int x0 = cx + mx + rng.uniform(0, aw - bw + 1), y0 = cy + my + rng.uniform(0, ah - bh + 1);
  SceneObject o;
  o.cls = rng.uniform(1, classes + 1);
  o.x0 = static_cast<float>(x0);
  o.y0 = static_cast<float>(y0);
  o.x1 = static_cast<float>(x0 + bw);
  o.y1 = static_cast<float>(y0 + bh);
  return o;
}

// Fills the object into image (its colour) and mask (its class), hard
// edged (LINE_8: no blended pixel of two classes). An ellipse keeps to
// its box: half-axes of (side - 1) / 2 around the box's centre pixel, and
// the box becomes the ellipse's extent.
void DrawObject(SceneObject* o, bool ellipse, cv::Mat& img, cv::Mat& mask) {
  uint8_t rgb[3];
  SceneColour(o->cls, rgb);
  cv::Scalar colour(rgb[0], rgb[1], rgb[2]), id(o->cls);
  int x0 = static_cast<int>(o->x0), y0 = static_cast<int>(o->y0);
  int x1 = static_cast<int>(o->x1) - 1, y1 = static_cast<int>(o->y1) - 1;
  cv::Point centre((x0 + x1) / 2, (y0 + y1) / 2);
  cv::Size axes((x1 - x0) / 2, (y1 - y0) / 2);
  for (cv::Mat* m : {&img, &mask}) {
    const cv::Scalar& c = m == &img ? colour : id;
    if (ellipse)
      cv::ellipse(*m, centre, axes, 0, 0, 360, c, cv::FILLED, cv::LINE_8);
    else
      cv::rectangle(*m, cv::Point(x0, y0), cv::Point(x1, y1), c, cv::FILLED, cv::LINE_8);
  }
  if (!ellipse) return;
  o->x0 = static_cast<float>(centre.x - axes.width);
  o->y0 = static_cast<float>(centre.y - axes.height);
  o->x1 = static_cast<float>(centre.x + axes.width + 1);
  o->y1 = static_cast<float>(centre.y + axes.height + 1);
}

void DrawScene(uint64_t seed, uint64_t index, int classes, int min_side, int max_side, Scene* out) {
  cv::RNG rng(Mix64(seed ^ Mix64(index + 0x5ce4e)));
  int h = rng.uniform(min_side, max_side + 1), w = rng.uniform(min_side, max_side + 1);
  out->image.Reset(h, w, 3);
  out->mask.assign(static_cast<size_t>(h) * w, 0);
  out->objects.clear();
  cv::Mat img(h, w, CV_8UC3, out->image.pixels.data()), mask(h, w, CV_8UC1, out->mask.data());
  img.setTo(cv::Scalar(0, 0, 0));  // class 0's colour
  int n = index % 7 == 6 ? 0 : rng.uniform(1, 5);
  int quarters[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(quarters[i], quarters[rng.uniform(0, i + 1)]);
  for (int i = 0; i < n; ++i) {
    SceneObject o = PlaceObject(rng, quarters[i], w, h, classes);
    o.crowd = index % 5 == 2 && n >= 2 && i == n - 1;
    DrawObject(&o, rng.uniform(0, 2) == 1, img, mask);
    out->objects.push_back(o);
  }
}

}  // namespace

Status GenerateScene(uint64_t seed, uint64_t index, int classes, int min_side, int max_side,
                     Scene* out) {
  if (classes < 1 || classes > 255 || min_side < 16 || max_side < min_side)
    return Status::InvalidArgument(
        "scene: need 1 <= classes <= 255 and 16 <= min side <= max side");
  Status s = CvCall("scene", [&] { DrawScene(seed, index, classes, min_side, max_side, out); });
  return s.ok() ? s : s.WithContext("scene " + std::to_string(index));
}

namespace {

// A small .npy per sample: float32 (2,3) or (4,), or int16 (3,), so arrays
// of one dataset differ in shape and dtype.
std::string MakeNpy(uint64_t index) {
  std::string descr = index % 3 == 2 ? "<i2" : "<f4";
  std::string shape = index % 3 == 0 ? "(2, 3)" : index % 3 == 1 ? "(4,)" : "(3,)";
  size_t count = index % 3 == 0 ? 6 : index % 3 == 1 ? 4 : 3;
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ').append("\n");
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  for (size_t k = 0; k < count; ++k) {
    if (descr == "<i2") {
      auto v = static_cast<int16_t>(static_cast<int64_t>(index) * 3 - static_cast<int64_t>(k));
      out.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      float v = static_cast<float>(index) + 0.5f * static_cast<float>(k);
      out.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  return out;
}

struct SceneFiles {
  std::string jpg, png, npy;
  std::vector<SceneObject> objects;
  int height = 0, width = 0;
  int label = 0;  // the class of the largest object (0: none)
  Status status;
};

std::string Name(size_t i) {
  char b[32];
  std::snprintf(b, sizeof b, "scene_%08zu", i);
  return b;
}

SceneFiles MakeScene(const MakeDatasetOptions& o, size_t i) {
  SceneFiles f;
  Scene sc;
  f.status = GenerateScene(o.seed, i, o.classes, o.min_side, o.max_side, &sc);
  if (f.status.ok()) f.status = EncodeJpeg(sc.image, std::max(o.quality, 95), &f.jpg);
  if (f.status.ok())
    f.status =
        EncodePng8(sc.mask.data(), sc.image.height, sc.image.width, o.format == "voc", &f.png);
  f.height = sc.image.height;
  f.width = sc.image.width;
  float best = 0;
  for (const auto& ob : sc.objects) {
    float area = (ob.x1 - ob.x0) * (ob.y1 - ob.y0);
    if (area > best) best = area, f.label = ob.cls;
  }
  f.objects = std::move(sc.objects);
  if (o.format == "wds-seg") f.npy = MakeNpy(i);
  return f;
}

Result<std::vector<SceneFiles>> MakeScenes(const MakeDatasetOptions& o, Env* env, size_t begin,
                                           size_t end) {
  std::vector<SceneFiles> out(end - begin);
  std::atomic<size_t> next{begin};
  int n = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (int t = 0; t < std::max(1, n); ++t)
    ts.push_back(env->StartThread([&] {
      for (size_t i; (i = next.fetch_add(1)) < end;) out[i - begin] = MakeScene(o, i);
    }));
  for (auto& t : ts) t.join();
  for (const auto& f : out) SSDFEED_RETURN_IF_ERROR(f.status);
  return out;
}

nlohmann::json SceneMeta(size_t i, const SceneFiles& f) {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& ob : f.objects) classes.push_back(ob.cls);
  return {{"index", i}, {"height", f.height}, {"width", f.width}, {"classes", classes}};
}

// COCO image ids in an order other than the file names' (readers must sort).
int64_t ImageId(size_t i) { return static_cast<int64_t>((i * 7919) % 1000003) + 1; }

void AddCoco(size_t i, const SceneFiles& f, nlohmann::json* images, nlohmann::json* anns) {
  images->push_back({{"id", ImageId(i)},
                     {"file_name", Name(i) + ".jpg"},
                     {"height", f.height},
                     {"width", f.width}});
  for (const auto& ob : f.objects) {
    double w = ob.x1 - ob.x0, h = ob.y1 - ob.y0;
    nlohmann::json poly = {ob.x0, ob.y0, ob.x1, ob.y0, ob.x1, ob.y1, ob.x0, ob.y1};
    anns->push_back({{"id", anns->size() + 1},
                     {"image_id", ImageId(i)},
                     {"category_id", SceneCategoryId(ob.cls)},
                     {"bbox", {ob.x0, ob.y0, w, h}},
                     {"area", w * h},
                     {"segmentation", {poly}},
                     {"iscrowd", ob.crowd ? 1 : 0}});
  }
}

Status WriteChunk(const MakeDatasetOptions& o, Env* env, size_t first, size_t shard,
                  const std::vector<SceneFiles>& items, nlohmann::json* images,
                  nlohmann::json* anns) {
  if (o.format == "wds-seg") {
    std::vector<std::pair<std::string, std::string>> m;
    for (size_t k = 0; k < items.size(); ++k) {
      std::string key = Name(first + k);
      m.emplace_back(key + ".jpg", items[k].jpg);
      m.emplace_back(key + ".seg.png", items[k].png);
      m.emplace_back(key + ".cls", std::to_string(items[k].label) + "\n");
      m.emplace_back(key + ".npy", items[k].npy);
      m.emplace_back(key + ".json", SceneMeta(first + k, items[k]).dump());
    }
    char name[32];
    std::snprintf(name, sizeof name, "shard-%06zu.tar", shard);
    return WriteTarMembers(env, JoinPath(o.dir, name), m);
  }
  std::string img_dir = JoinPath(o.dir, o.format == "voc" ? "JPEGImages" : "images");
  for (size_t k = 0; k < items.size(); ++k) {
    std::string key = Name(first + k);
    SSDFEED_RETURN_IF_ERROR(WriteDatasetFile(env, JoinPath(img_dir, key + ".jpg"), items[k].jpg));
    if (o.format == "voc")
      SSDFEED_RETURN_IF_ERROR(WriteDatasetFile(
          env, JoinPath(o.dir, "SegmentationClass/" + key + ".png"), items[k].png));
    else
      AddCoco(first + k, items[k], images, anns);
  }
  return Status::OK();
}

Status WriteCocoJson(const MakeDatasetOptions& o, Env* env, nlohmann::json images,
                     nlohmann::json anns) {
  nlohmann::json cats = nlohmann::json::array();
  for (int c = 1; c <= o.classes; ++c)
    cats.push_back({{"id", SceneCategoryId(c)}, {"name", "class_" + std::to_string(c)}});
  nlohmann::json doc = {{"info", {{"description", "ssdfeed make-dataset scenes"}}},
                        {"images", std::move(images)},
                        {"annotations", std::move(anns)},
                        {"categories", std::move(cats)}};
  return WriteDatasetFile(env, JoinPath(o.dir, "annotations.json"), doc.dump());
}

std::string SceneUri(const MakeDatasetOptions& o, size_t shards) {
  if (o.format == "voc")
    return "files:" + o.dir + "?image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png";
  if (o.format == "coco")
    return "coco:" + o.dir + "/images?annotations=" + o.dir + "/annotations.json";
  char range[64];
  std::snprintf(range, sizeof range, "shard-{%06d..%06zu}.tar", 0, shards - 1);
  return "tar:" + o.dir + "/" + range + "?image=jpg&mask=seg.png&label=cls&depth=npy&meta=json";
}

}  // namespace

Status MakeSceneDataset(const MakeDatasetOptions& o, Env* env, MakeDatasetReport* report) {
  if (o.classes > 255)
    return Status::InvalidArgument("make-dataset: scenes take at most 255 classes");
  if (o.corrupt > 0)
    return Status::InvalidArgument("make-dataset: --corrupt is for folder, tfrecord and tar");
  for (const char* d : {"JPEGImages", "SegmentationClass"})
    if (o.format == "voc") SSDFEED_RETURN_IF_ERROR(CreateDirs(env, JoinPath(o.dir, d), 0755));
  if (o.format == "coco") SSDFEED_RETURN_IF_ERROR(CreateDirs(env, JoinPath(o.dir, "images"), 0755));
  size_t shards = (o.count + o.shard_size - 1) / o.shard_size;
  nlohmann::json images = nlohmann::json::array(), anns = nlohmann::json::array();
  *report = {};
  for (size_t s = 0; s < shards; ++s) {
    size_t begin = s * o.shard_size, end = std::min(o.count, begin + o.shard_size);
    SSDFEED_ASSIGN_OR_RETURN(auto items, MakeScenes(o, env, begin, end));
    SSDFEED_RETURN_IF_ERROR(WriteChunk(o, env, begin, s, items, &images, &anns));
    for (const auto& it : items) report->bytes += it.jpg.size() + it.png.size() + it.npy.size();
  }
  if (o.format == "coco") SSDFEED_RETURN_IF_ERROR(WriteCocoJson(o, env, images, anns));
  report->samples = o.count;
  report->uri = SceneUri(o, shards);
  return Status::OK();
}

}  // namespace ssdfeed
