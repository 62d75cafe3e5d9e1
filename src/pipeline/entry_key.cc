#include "pipeline/entry_key.h"

#include <nlohmann/json.hpp>

namespace ssdfeed {

EntryKey MakeEntryKey(const Source& source, const SourceOptions& so, const PrepareSpec& spec) {
  EntryKey k;
  k.source_uri = source.uri();
  k.source_identity = source.identity();
  k.spec = spec.Canonical();
  k.samples_total = source.size();
  if (!source.record_spec().empty()) {
    // No preparation: nothing for `cache verify --repair` to rebuild.
    k.spec = source.record_spec();
    return k;
  }
  // The spec's own object plus the source keys that reopen the source.
  nlohmann::json j = nlohmann::json::parse(spec.ToJson());
  j["image_key"] = so.image_key;
  j["label_key"] = so.label_key;
  j["allow_empty_classes"] = so.allow_empty_classes;
  // Only when set, so the keys of classic sources stay what they were.
  if (!so.fields.empty()) {
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& f : so.fields) fields.push_back({f.name, static_cast<int>(f.kind), f.key});
    j["fields"] = fields;
  }
  if (so.coco_crowd) j["coco_crowd"] = true;
  if (so.follow_links) j["follow_links"] = true;
  if (!so.stems.empty()) j["stems"] = so.stems;
  k.prepare_json = j.dump();
  return k;
}

Status ParsePrepareJson(const std::string& text, PrepareSpec* spec, SourceOptions* so) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Status::Corruption("manifest has no readable 'prepare' object");
  Result<PrepareSpec> parsed = PrepareSpec::FromJson(text);
  if (!parsed.ok())
    return Status::Corruption("manifest 'prepare' object: " + parsed.status().message());
  *spec = *parsed;
  try {  // nlohmann throws on a field of the wrong type: a damaged manifest
    so->image_key = j.value("image_key", "");
    so->label_key = j.value("label_key", "");
    so->allow_empty_classes = j.value("allow_empty_classes", false);
    so->coco_crowd = j.value("coco_crowd", false);
    so->follow_links = j.value("follow_links", false);
    so->stems = j.value("stems", std::vector<std::string>());
    so->fields.clear();
    for (const auto& f : j.value("fields", nlohmann::json::array())) {
      int kind = f.at(1).get<int>();
      if (kind < 0 || kind > static_cast<int>(FieldKind::kInstanceMasks))
        return Status::Corruption("manifest 'prepare' object: field kind " + std::to_string(kind));
      so->fields.push_back(
          {f.at(0).get<std::string>(), static_cast<FieldKind>(kind), f.at(2).get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("manifest 'prepare' object: ") + e.what());
  }
  return Status::OK();
}

}  // namespace ssdfeed
