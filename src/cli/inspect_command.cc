// ssdfeed inspect --source URI [--field NAME=KEY]... [--samples N] [--json]:
// what a source holds as ssdfeed reads it (size, fields, the category map,
// what was skipped, and per sample its boxes and classes), to check a
// layout's URI before warming it, and for tests against reference parsers.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"

namespace ssdfeed::cli {

namespace {

struct InspectArgs {
  std::string source, on_error = "raise";
  FieldArgs fields;
  long long samples = 3;  // -1: all
  bool json = false;
};

template <typename T>
nlohmann::json Values(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// instance_masks (uint32 H, uint32 W, then K planes of H*W bytes, 0/1):
// their shape [K, H, W] and each instance's area in pixels, which a reader
// can check against the annotations, where the planes' byte count says
// nothing. Bytes that do not make whole planes are said as such.
void AddInstanceMasks(const std::string& bytes, nlohmann::json* j) {
  uint32_t hw[2] = {0, 0};
  if (bytes.size() < sizeof hw) {
    (*j)["malformed"] = "shorter than its 8-byte height and width";
    return;
  }
  std::memcpy(hw, bytes.data(), sizeof hw);
  size_t plane = static_cast<size_t>(hw[0]) * hw[1], body = bytes.size() - sizeof hw;
  if (plane == 0 ? body != 0 : body % plane != 0) {
    (*j)["malformed"] = std::to_string(body) + " bytes of planes are not whole " +
                        std::to_string(hw[0]) + "x" + std::to_string(hw[1]) + " planes";
    return;
  }
  size_t k = plane == 0 ? 0 : body / plane;
  nlohmann::json areas = nlohmann::json::array();
  for (size_t i = 0; i < k; ++i) {
    const char* p = bytes.data() + sizeof hw + i * plane;
    areas.push_back(plane - static_cast<size_t>(std::count(p, p + plane, '\0')));
  }
  (*j)["shape"] = {k, hw[0], hw[1]};
  (*j)["areas"] = areas;
}

// A field as JSON: boxes and classes by value, instance masks decoded to
// their shape and areas, the rest by size and origin.
nlohmann::json FieldJson(const EncodedField& f) {
  nlohmann::json j = {{"kind", EnumName(f.kind)}, {"bytes", f.bytes.size()}, {"origin", f.origin}};
  if (f.kind == FieldKind::kBoxes) {
    j["boxes"] = Values<float>(f.bytes);
    j["normalized"] = f.normalized;
  }
  if (f.kind == FieldKind::kBoxFloats) j["values"] = Values<float>(f.bytes);
  if (f.kind == FieldKind::kClasses || f.kind == FieldKind::kLabel)
    j["values"] = Values<int64_t>(f.bytes);
  if (f.kind == FieldKind::kInstanceMasks) AddInstanceMasks(f.bytes, &j);
  return j;
}

Result<nlohmann::json> SampleJson(const Source& src, size_t id) {
  EncodedSample s;
  SSDFEED_RETURN_IF_ERROR(src.Read(id, &s));
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& f : s.fields) fields[f.name] = FieldJson(f);
  return nlohmann::json{{"id", id},
                        {"where", src.Describe(id)},
                        {"image_bytes", s.bytes.size()},
                        {"label", s.label},
                        {"fields", fields}};
}

nlohmann::json SourceJson(const Source& src) {
  nlohmann::json fields = nlohmann::json::array(), cats = nlohmann::json::array();
  for (const auto& f : src.fields())
    fields.push_back({{"name", f.name}, {"kind", EnumName(f.kind)}, {"key", f.key}});
  for (const auto& c : src.categories()) cats.push_back({{"id", c.id}, {"name", c.name}});
  return {{"uri", src.uri()},
          {"size", src.size()},
          {"identity", src.identity()},
          {"fields", fields},
          {"categories", cats},
          {"skipped", src.skipped()},
          {"skipped_reasons", src.skipped_reasons()}};
}

int RunInspect(const InspectArgs& a) {
  SourceOptions so;
  if (Status s = a.fields.ToFields(&so.fields); !s.ok()) return Fail(s.message(), kExitUsage);
  Result<OnError> on_error = ParseEnum<OnError>(a.on_error, "--on-error");
  if (!on_error.ok()) return Fail(on_error.status().message(), kExitUsage);
  so.on_error = *on_error;
  auto src = OpenSource(a.source, so);
  if (!src.ok()) return Fail(src.status().message());
  nlohmann::json j = SourceJson(**src);
  size_t n =
      a.samples < 0 ? (*src)->size() : std::min((*src)->size(), static_cast<size_t>(a.samples));
  j["samples"] = nlohmann::json::array();
  for (size_t id = 0; id < n; ++id) {
    auto sj = SampleJson(**src, id);
    if (!sj.ok()) return Fail(sj.status().message());
    j["samples"].push_back(*sj);
  }
  std::cout << (a.json ? j.dump() : j.dump(2)) << "\n";
  return 0;
}

}  // namespace

void AddInspect(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand(
      "inspect", "Show what a source holds as ssdfeed reads it: size, fields, classes, samples");
  auto a = std::make_shared<InspectArgs>();
  c->add_option("--source", a->source, "Source URI (as for warm)")->required();
  a->fields.Add(c);
  c->add_option("--on-error", a->on_error, "raise (default) or skip bad parts")
      ->check(CLI::IsMember(EnumNames<OnError>()));
  c->add_option("--samples", a->samples, "Samples to show from the first (default 3; -1: all)")
      ->check(AtLeast(-1, " (-1: all)"));
  c->add_flag("--json", a->json, "One line of JSON (default: indented)");
  c->callback([st, a] { st->rc = RunInspect(*a); });
}

}  // namespace ssdfeed::cli
