// ssdfeed make-dataset DIR --format folder|tfrecord|tar|voc|coco|wds-seg --count N ...
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ssdfeed/dataset.h"

namespace ssdfeed::cli {

void AddMakeDataset(CLI::App& app, RunState* st) {
  auto* c =
      app.add_subcommand("make-dataset", "Generate a deterministic ImageNet-like or scene dataset");
  auto o = std::make_shared<MakeDatasetOptions>();
  auto json = std::make_shared<bool>(false);
  c->add_option("dir", o->dir, "Output directory")->required();
  c->add_option("--format", o->format,
                "folder, tfrecord or tar (images and labels); voc, coco or wds-seg (colour-coded "
                "scenes with masks, boxes and arrays)")
      ->check(CLI::IsMember({"folder", "tfrecord", "tar", "voc", "coco", "wds-seg"}))
      ->capture_default_str();
  c->add_option("--count", o->count, "Number of samples")->capture_default_str();
  c->add_option("--classes", o->classes, "Number of classes")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed (same seed, same bytes)")->capture_default_str();
  c->add_option("--corrupt", o->corrupt, "Fraction of samples made undecodable")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  c->add_option("--shard-size", o->shard_size, "Samples per tfrecord/tar/wds-seg shard")
      ->capture_default_str();
  c->add_option("--min-side", o->min_side, "Smallest image side")->capture_default_str();
  c->add_option("--max-side", o->max_side, "Largest image side")->capture_default_str();
  c->add_flag("--json", *json, "Print the report as JSON");
  c->callback([st, o, json] {
    MakeDatasetReport r;
    Status s = MakeDataset(*o, &r);
    if (!s.ok()) {
      st->rc = Fail(s.message());
      return;
    }
    if (*json) {
      std::cout << nlohmann::json{{"uri", r.uri},
                                  {"samples", r.samples},
                                  {"corrupt", r.corrupt},
                                  {"bytes", r.bytes}}
                       .dump()
                << "\n";
    } else {
      std::cout << "wrote " << r.samples << " samples (" << r.corrupt << " corrupt, "
                << r.bytes / r.samples / 1024 << " KiB mean) to " << o->dir << "\nsource: " << r.uri
                << "\n";
    }
  });
}

}  // namespace ssdfeed::cli
