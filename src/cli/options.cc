#include "cli/options.h"

#include <cstdio>

#include "util/units.h"

namespace ssdfeed::cli {

Status ParseHxW(const std::string& t, int* h, int* w) {
  char x = 0;
  if (std::sscanf(t.c_str(), "%d%c%d", h, &x, w) != 3 || (x != 'x' && x != 'X') || *h <= 0 ||
      *w <= 0)
    return Status::InvalidArgument("expected HxW (e.g. 224x224), got '" + t + "'");
  return Status::OK();
}

void PrepareArgs::Add(CLI::App* c) {
  c->add_option("--resize-short", resize_short, "Resize so the shorter side is S pixels");
  c->add_option("--resize", resize, "Resize to exactly HxW");
  c->add_option("--max-long", max_long, "Cap the longer side (with --resize-short)");
  c->add_option("--center-crop", center_crop, "Centre crop HxW after resizing");
  c->add_flag("--gray", gray, "Decode to one gray channel");
}

Status PrepareArgs::ToSpec(PrepareSpec* s) const {
  *s = PrepareSpec{};
  s->resize_short = resize_short;
  s->max_long = max_long;
  s->gray = gray;
  if (!resize.empty()) SSDFEED_RETURN_IF_ERROR(ParseHxW(resize, &s->resize_h, &s->resize_w));
  if (!center_crop.empty()) SSDFEED_RETURN_IF_ERROR(ParseHxW(center_crop, &s->crop_h, &s->crop_w));
  return s->Validate();
}

void CacheArgs::Add(CLI::App* c, bool with_capacity) {
  c->add_option("--cache", cache, "Cache root (default $SSDFEED_CACHE, then ~/.cache/ssdfeed)");
  if (with_capacity)
    c->add_option("--capacity", capacity,
                  "Most bytes the cache root may hold (default: now + 80% of free space)");
  c->add_flag("--group-shared", group_shared, "Create files for group sharing (0660/02770)");
}

Status CacheArgs::ToOptions(CacheOptions* o) const {
  o->root = cache.empty() ? DefaultCacheDir() : cache;
  o->group_shared = group_shared;
  if (!capacity.empty()) {
    SSDFEED_ASSIGN_OR_RETURN(o->capacity_bytes, ParseSize(capacity));
  }
  return Status::OK();
}

}  // namespace ssdfeed::cli
