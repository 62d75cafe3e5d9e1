// Options shared by several sub-commands: --cache, prepare options, source
// options, and turning them into library structs.
#pragma once

#include <memory>
#include <string>

#include "cli/commands.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed::cli {

struct PrepareArgs {
  int resize_short = 0;
  std::string resize;  // HxW
  int max_long = 0;
  std::string center_crop;  // HxW
  bool gray = false;
  void Add(CLI::App* c);
  Status ToSpec(PrepareSpec* spec) const;
};

struct CacheArgs {
  std::string cache;
  std::string capacity;  // SIZE
  bool group_shared = false;
  void Add(CLI::App* c, bool with_capacity);
  Status ToOptions(CacheOptions* o) const;
};

Status ParseHxW(const std::string& text, int* h, int* w);

}  // namespace ssdfeed::cli
