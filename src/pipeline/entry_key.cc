#include "pipeline/entry_key.h"

#include <nlohmann/json.hpp>

namespace ssdfeed {

EntryKey MakeEntryKey(const Source& source, const SourceOptions& so, const PrepareSpec& spec) {
  EntryKey k;
  k.source_uri = source.uri();
  k.source_identity = source.identity();
  k.spec = spec.Canonical();
  k.samples_total = source.size();
  nlohmann::json j = {{"resize_short", spec.resize_short},
                      {"max_long", spec.max_long},
                      {"resize_h", spec.resize_h},
                      {"resize_w", spec.resize_w},
                      {"crop_h", spec.crop_h},
                      {"crop_w", spec.crop_w},
                      {"gray", spec.gray},
                      {"image_key", so.image_key},
                      {"label_key", so.label_key},
                      {"allow_empty_classes", so.allow_empty_classes}};
  k.prepare_json = j.dump();
  return k;
}

Status ParsePrepareJson(const std::string& text, PrepareSpec* spec, SourceOptions* so) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Status::Corruption("manifest has no readable 'prepare' object");
  try {  // nlohmann throws on a field of the wrong type: a damaged manifest
    spec->resize_short = j.value("resize_short", 0);
    spec->max_long = j.value("max_long", 0);
    spec->resize_h = j.value("resize_h", 0);
    spec->resize_w = j.value("resize_w", 0);
    spec->crop_h = j.value("crop_h", 0);
    spec->crop_w = j.value("crop_w", 0);
    spec->gray = j.value("gray", false);
    so->image_key = j.value("image_key", "");
    so->label_key = j.value("label_key", "");
    so->allow_empty_classes = j.value("allow_empty_classes", false);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("manifest 'prepare' object: ") + e.what());
  }
  return spec->Validate();
}

}  // namespace ssdfeed
