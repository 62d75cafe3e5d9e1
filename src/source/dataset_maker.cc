// make-dataset: JPEGs that compress like photographs (not flat colours), so
// decode cost and file sizes resemble ImageNet's (~110 KB mean at q90).
#include <archive.h>
#include <archive_entry.h>

#include <atomic>
#include <cstdio>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "image/cv_call.h"
#include "source/sources.h"
#include "source/tfrecord_format.h"
#include "ssdfeed/dataset.h"
#include "util/hash.h"

namespace ssdfeed {

bool IsCorruptSample(uint64_t seed, uint64_t index, double fraction) {
  if (fraction <= 0) return false;
  double u = static_cast<double>(Mix64(seed * 0x51ed27f3ull + index + 0xc0ffee) >> 11) * 0x1p-53;
  return u < fraction;
}

namespace {

// An ellipse's half-axis: up to a third of the side (at least 10 pixels,
// the draws of the images make-dataset has always made). A side under 30
// once gave uniform(10, side / 3), an empty range: a negative axis, which
// OpenCV refuses with an exception. Those sides now draw from [1, 10).
int HalfAxis(cv::RNG& rng, int side) {
  return side / 3 >= 10 ? rng.uniform(10, side / 3) : rng.uniform(1, 10);
}

void DrawImage(uint64_t seed, uint64_t index, int classes, int min_side, int max_side, Image* out,
               int* label) {
  cv::RNG rng(Mix64(seed ^ Mix64(index + 1)));
  *label = static_cast<int>(Mix64(seed + index * 7919) % static_cast<uint64_t>(classes));
  int h = rng.uniform(min_side, max_side + 1), w = rng.uniform(min_side, max_side + 1);
  // Smooth colour field: a coarse random grid, cubic-upsampled, tinted by class.
  cv::Mat coarse(rng.uniform(3, 7), rng.uniform(3, 7), CV_8UC3);
  rng.fill(coarse, cv::RNG::UNIFORM, cv::Scalar::all(0), cv::Scalar::all(256));
  cv::Mat img;
  cv::resize(coarse, img, cv::Size(w, h), 0, 0, cv::INTER_CUBIC);
  double hue = 360.0 * *label / classes;
  cv::Scalar tint(60 * std::cos(hue * CV_PI / 180), 60 * std::sin(hue * CV_PI / 180), 30);
  img += tint;
  // Shapes with soft edges, like objects.
  int shapes = rng.uniform(4, 12);
  for (int i = 0; i < shapes; ++i) {
    cv::Scalar c(rng.uniform(0, 256), rng.uniform(0, 256), rng.uniform(0, 256));
    cv::Point p(rng.uniform(0, w), rng.uniform(0, h));
    if (rng.uniform(0, 2) == 0) {
      cv::ellipse(img, p, cv::Size(HalfAxis(rng, w), HalfAxis(rng, h)), rng.uniform(0, 180), 0, 360,
                  c, -1, cv::LINE_AA);
    } else {
      cv::line(img, p, cv::Point(rng.uniform(0, w), rng.uniform(0, h)), c, rng.uniform(2, 12),
               cv::LINE_AA);
    }
  }
  // Mid-frequency texture and sensor-like noise.
  cv::Mat tex(h / 4 + 1, w / 4 + 1, CV_16SC3), tex_big;
  rng.fill(tex, cv::RNG::NORMAL, cv::Scalar::all(0), cv::Scalar::all(28));
  cv::resize(tex, tex_big, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
  cv::Mat noise(h, w, CV_16SC3);
  rng.fill(noise, cv::RNG::NORMAL, cv::Scalar::all(0), cv::Scalar::all(22));
  cv::Mat acc;
  img.convertTo(acc, CV_16SC3);
  acc += tex_big + noise;
  out->Reset(h, w, 3);
  cv::Mat dst(h, w, CV_8UC3, out->pixels.data());
  acc.convertTo(dst, CV_8UC3);
}

}  // namespace

Status GenerateImage(uint64_t seed, uint64_t index, int classes, int min_side, int max_side,
                     Image* out, int* label) {
  if (classes < 1 || min_side < 1 || max_side < min_side)
    return Status::InvalidArgument(
        "generate image: need classes >= 1 and 1 <= min side <= max side");
  Status s =
      CvCall("draw", [&] { DrawImage(seed, index, classes, min_side, max_side, out, label); });
  if (s.ok()) return s;
  return s.WithContext("image " + std::to_string(index) + " (sides " + std::to_string(min_side) +
                       " to " + std::to_string(max_side) + ")");
}

namespace {

// The encoded bytes of sample i (deliberately damaged when chosen).
Result<std::string> MakeSample(const MakeDatasetOptions& o, size_t i, int* label, bool* corrupt) {
  Image img;
  Status s = GenerateImage(o.seed, i, o.classes, o.min_side, o.max_side, &img, label);
  std::string jpg;
  if (s.ok()) s = EncodeJpeg(img, o.quality, &jpg);
  if (!s.ok()) return s.WithContext("make-dataset: sample " + std::to_string(i));
  *corrupt = IsCorruptSample(o.seed, i, o.corrupt);
  if (!*corrupt) return jpg;
  switch (Mix64(o.seed + i) % 3) {
    case 0:
      return jpg.substr(0, jpg.size() / 3);  // truncated scan
    case 1:
      return std::string();  // zero bytes
    default: {
      std::string g(jpg.size() / 4, '\0');  // garbage
      for (size_t k = 0; k < g.size(); ++k) g[k] = static_cast<char>(Mix64(i * 131 + k));
      return g;
    }
  }
}

struct Encoded {
  std::string bytes;
  int label = 0;
  bool corrupt = false;
  Status status;  // why bytes could not be made
};

// Generates samples [begin, end) on all threads.
Result<std::vector<Encoded>> MakeRange(const MakeDatasetOptions& o, size_t begin, size_t end) {
  std::vector<Encoded> out(end - begin);
  std::atomic<size_t> next{begin};
  int n = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  Env* env = o.env != nullptr ? o.env : Env::Default();
  std::vector<std::thread> ts;
  for (int t = 0; t < std::max(1, n); ++t) {
    ts.push_back(env->StartThread([&] {
      for (size_t i; (i = next.fetch_add(1)) < end;) {
        Encoded& e = out[i - begin];
        Result<std::string> bytes = MakeSample(o, i, &e.label, &e.corrupt);
        if (bytes.ok()) {
          e.bytes = std::move(bytes).value();
        } else {
          e.status = bytes.status();
        }
      }
    }));
  }
  for (auto& t : ts) t.join();
  for (const auto& e : out) SSDFEED_RETURN_IF_ERROR(e.status);
  return out;
}

std::string Num(size_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*zu", width, v);
  return buf;
}

// libarchive's output goes to an Env file; a failed append is kept to be
// reported instead of libarchive's generic message.
struct TarOutput {
  WritableFile* f;
  Status error;
};

la_ssize_t WriteTarBytes(archive* a, void* user, const void* data, size_t n) {
  auto* out = static_cast<TarOutput*>(user);
  out->error = out->f->Append(data, n);
  if (out->error.ok()) return static_cast<la_ssize_t>(n);
  archive_set_error(a, EIO, "%s", out->error.message().c_str());
  return -1;
}

}  // namespace

Status WriteDatasetFile(Env* env, const std::string& path, const std::string& data) {
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = 0644;
  SSDFEED_ASSIGN_OR_RETURN(auto f, env->NewWritableFile(path, wo));
  SSDFEED_RETURN_IF_ERROR(f->Append(data.data(), data.size()));
  return f->Close();
}

Status WriteTarMembers(Env* env, const std::string& path,
                       const std::vector<std::pair<std::string, std::string>>& members) {
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = 0644;
  SSDFEED_ASSIGN_OR_RETURN(auto f, env->NewWritableFile(path, wo));
  TarOutput out{f.get(), Status::OK()};
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);  // no padding to 10 KiB, as for a file name
  // archive_write_open2 (libarchive 3.6+) where there; the binary wheel is
  // built against Debian 11's libarchive 3.4, which has only _open (no free
  // callback, which this writer does not need either).
#if ARCHIVE_VERSION_NUMBER >= 3006000
  int opened = archive_write_open2(a, &out, nullptr, WriteTarBytes, nullptr, nullptr);
#else
  int opened = archive_write_open(a, &out, nullptr, WriteTarBytes, nullptr);
#endif
  if (opened != ARCHIVE_OK) {
    Status s = Status::IOError(path + ": " + archive_error_string(a));
    archive_write_free(a);
    return s;
  }
  Status s;
  for (size_t k = 0; k < members.size() && s.ok(); ++k) {
    const auto& [name, data] = members[k];
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, 1700000000, 0);  // reproducible bytes
    if (archive_write_header(a, e) != ARCHIVE_OK ||
        archive_write_data(a, data.data(), data.size()) != static_cast<la_ssize_t>(data.size()))
      s = Status::IOError(path + ": " + archive_error_string(a));
    archive_entry_free(e);
  }
  if (archive_write_close(a) != ARCHIVE_OK && s.ok())
    s = Status::IOError(path + ": " + archive_error_string(a));
  archive_write_free(a);
  if (!out.error.ok()) return out.error;
  return s.ok() ? f->Close() : s;
}

namespace {

Status WriteTar(Env* env, const std::string& path, size_t first,
                const std::vector<Encoded>& items) {
  std::vector<std::pair<std::string, std::string>> members;
  for (size_t k = 0; k < items.size(); ++k) {
    std::string key = "sample_" + Num(first + k, 8);
    members.emplace_back(key + ".jpg", items[k].bytes);
    members.emplace_back(key + ".cls", std::to_string(items[k].label) + "\n");
  }
  return WriteTarMembers(env, path, members);
}

Status WriteChunk(const MakeDatasetOptions& o, Env* env, size_t first, size_t shard, size_t shards,
                  const std::vector<Encoded>& items) {
  if (o.format == "folder") {
    for (size_t k = 0; k < items.size(); ++k) {
      std::string cdir = JoinPath(o.dir, "class_" + Num(items[k].label, 4));
      SSDFEED_RETURN_IF_ERROR(env->CreateDir(cdir, 0755));
      SSDFEED_RETURN_IF_ERROR(WriteDatasetFile(
          env, JoinPath(cdir, "img_" + Num(first + k, 8) + ".jpg"), items[k].bytes));
    }
    return Status::OK();
  }
  std::string stem = "train-" + Num(shard, 5) + "-of-" + Num(shards, 5);
  if (o.format == "tar")
    return WriteTar(env, JoinPath(o.dir, "shard-" + Num(shard, 6) + ".tar"), first, items);
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = 0644;
  SSDFEED_ASSIGN_OR_RETURN(auto f, env->NewWritableFile(JoinPath(o.dir, stem + ".tfrecord"), wo));
  for (const auto& it : items)
    SSDFEED_RETURN_IF_ERROR(AppendTFRecord(f.get(), SerializeExample(it.bytes, it.label)));
  return f->Close();
}

}  // namespace

Status MakeDataset(const MakeDatasetOptions& in, MakeDatasetReport* report) {
  MakeDatasetOptions o = in;
  Env* env = o.env != nullptr ? o.env : Env::Default();
  bool scenes = o.format == "voc" || o.format == "coco" || o.format == "wds-seg";
  if (o.format != "folder" && o.format != "tfrecord" && o.format != "tar" && !scenes)
    return Status::InvalidArgument("unknown format '" + o.format +
                                   "' (folder, tfrecord, tar, voc, coco or wds-seg)");
  if (o.count == 0 || o.classes <= 0 || o.shard_size == 0 || o.min_side < 16 ||
      o.max_side < o.min_side || o.corrupt < 0 || o.corrupt > 1)
    return Status::InvalidArgument(
        "make-dataset: count, classes and sizes must be positive, "
        "corrupt in [0, 1]");
  SSDFEED_RETURN_IF_ERROR(CreateDirs(env, o.dir, 0755));
  if (scenes) return MakeSceneDataset(o, env, report);
  size_t shards = (o.count + o.shard_size - 1) / o.shard_size;
  *report = {};
  for (size_t s = 0; s < shards; ++s) {
    size_t begin = s * o.shard_size, end = std::min(o.count, begin + o.shard_size);
    SSDFEED_ASSIGN_OR_RETURN(std::vector<Encoded> items, MakeRange(o, begin, end));
    SSDFEED_RETURN_IF_ERROR(WriteChunk(o, env, begin, s, shards, items));
    for (const auto& it : items) {
      report->bytes += it.bytes.size();
      report->corrupt += it.corrupt;
    }
  }
  report->samples = o.count;
  if (o.format == "folder") report->uri = "folder:" + o.dir;
  if (o.format == "tfrecord") report->uri = "tfrecord:" + o.dir + "/train-*.tfrecord";
  if (o.format == "tar")
    report->uri = "tar:" + o.dir + "/shard-{" + Num(0, 6) + ".." + Num(shards - 1, 6) + "}.tar";
  return Status::OK();
}

}  // namespace ssdfeed
