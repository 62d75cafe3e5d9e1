#include "cli/options.h"

#include <cstdio>
#include <cstdlib>

#include "ssdfeed/cache.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/sample.h"
#include "util/units.h"

namespace ssdfeed::cli {

Status ParseHxW(const std::string& t, int* h, int* w) {
  char x = 0;
  if (std::sscanf(t.c_str(), "%d%c%d", h, &x, w) != 3 || (x != 'x' && x != 'X') || *h <= 0 ||
      *w <= 0)
    return Status::InvalidArgument("expected HxW with H, W >= 1 (e.g. 224x224), got '" + t + "'");
  return Status::OK();
}

CLI::Validator AtLeast(long long min, const std::string& note) {
  std::string range = "must be an integer >= " + std::to_string(min) + note;
  return CLI::Validator(
      [min, range](std::string& v) -> std::string {
        char* end = nullptr;
        long long x = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || x < min) return range + ", got '" + v + "'";
        return "";
      },
      ">=" + std::to_string(min));
}

void FieldArgs::Add(CLI::App* c) {
  c->add_option("--field", fields,
                "A sample field NAME=KEY or NAME:KIND=KEY, repeatable (tar: member extension, "
                "e.g. mask=seg.png; tfrecord: feature key; default: the layout's own fields)");
}

Status FieldArgs::ToFields(std::vector<FieldSpec>* out) const {
  out->clear();
  for (const auto& f : fields) {
    auto spec = ParseFieldSpec(f);
    if (!spec.ok()) return Status::InvalidArgument("--field: " + spec.status().message());
    out->push_back(std::move(*spec));
  }
  return Status::OK();
}

void PrepareArgs::Add(CLI::App* c) {
  c->add_option("--resize-short", resize_short,
                "Resize so the shorter side is S pixels (default: no resize, full size)")
      ->check(AtLeast(1));
  c->add_option("--resize", resize, "Resize to exactly HxW (default: off)");
  c->add_option("--max-long", max_long, "Cap the longer side (with --resize-short; default: off)")
      ->check(AtLeast(1));
  c->add_option("--center-crop", center_crop, "Centre crop HxW after resizing (default: off)");
  c->add_flag("--gray", gray, "Decode to one gray channel (default: RGB)");
  c->add_option("--codec", codec,
                "How cache records store the pixels: raw (as they are; the default), zstd "
                "(lossless: a row filter, then zstd; served pixels equal raw's), jpeg (lossy: "
                "re-encoded at --quality; served pixels are its decode) or yuv420 (BT.601 YCbCr, "
                "half-resolution chroma: 0.5x raw, lossy in chroma only)")
      ->check(CLI::IsMember(EnumNames<RecordCodec>()));
  c->add_option("--quality", quality, "JPEG quality of --codec jpeg, 1-100 (default 90)")
      ->check(CLI::Range(1, 100));
}

bool PrepareArgs::given() const {
  return resize_short > 0 || !resize.empty() || max_long > 0 || !center_crop.empty() || gray;
}

Status PrepareArgs::ToSpec(PrepareSpec* s) const {
  *s = DefaultPrepareSpec();
  s->resize_short = resize_short;
  s->max_long = max_long;
  s->gray = gray;
  SSDFEED_ASSIGN_OR_RETURN(s->codec, ParseEnum<RecordCodec>(codec, "--codec"));
  s->quality = quality;
  if (!resize.empty()) {
    Status st = ParseHxW(resize, &s->resize_h, &s->resize_w);
    if (!st.ok()) return Status::InvalidArgument("--resize: " + st.message());
  }
  if (!center_crop.empty()) {
    Status st = ParseHxW(center_crop, &s->crop_h, &s->crop_w);
    if (!st.ok()) return Status::InvalidArgument("--center-crop: " + st.message());
  }
  return s->Validate();
}

void CacheArgs::Add(CLI::App* c, bool with_capacity, bool fills) {
  c->add_option("--cache", cache, "Cache root (default $SSDFEED_CACHE, then ~/.cache/ssdfeed)");
  if (with_capacity)
    c->add_option("--capacity", capacity,
                  "Most bytes the cache root may hold, e.g. 500G (default: now + 80% of free "
                  "space)");
  if (fills)
    c->add_option("--fill-write", fill_write,
                  "How a fill writes records: direct (O_DIRECT from one writer thread, off the "
                  "workers' cores), buffered (write(2) from the workers) or auto (direct when the "
                  "entry will not fit in available memory; the default)")
        ->check(CLI::IsMember(EnumNames<FillWrite>()));
  c->add_flag("--group-shared", group_shared, "Create files for group sharing (0660/02770)");
}

Status CacheArgs::ToOptions(CacheOptions* o) const {
  o->root = cache.empty() ? DefaultCacheRoot() : cache;
  o->group_shared = group_shared;
  if (!fill_write.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(o->fill_write, ParseEnum<FillWrite>(fill_write, "--fill-write"));
  }
  if (!capacity.empty()) {
    auto r = ParseSize(capacity);
    if (!r.ok() || *r == 0)
      return Status::InvalidArgument("--capacity: expected a size > 0 such as 500G or 2T, got '" +
                                     capacity + "'");
    o->capacity_bytes = *r;
  }
  return Status::OK();
}

Status CacheArgs::ToExistingRoot(CacheOptions* o) const {
  SSDFEED_RETURN_IF_ERROR(ToOptions(o));
  auto st = Env::Default()->Stat(o->root);
  if (st.ok() && st->is_dir) return Status::OK();
  const char* env = std::getenv("SSDFEED_CACHE");
  std::string from = !cache.empty()                     ? "given by --cache"
                     : (env != nullptr && *env != '\0') ? "from $SSDFEED_CACHE"
                                                        : "the default; nothing warmed yet?";
  return Status::InvalidArgument("cache root " + o->root + " " +
                                 (st.ok() ? "is not a directory" : "does not exist") + " (" + from +
                                 ")");
}

}  // namespace ssdfeed::cli
