// Options shared by several sub-commands: --cache, prepare options, source
// options, and turning them into library structs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed::cli {

// Every flag starts "off", as ssdfeed::DefaultPrepareSpec().
struct PrepareArgs {
  int resize_short = 0;
  std::string resize;  // HxW
  int max_long = 0;
  std::string center_crop;  // HxW
  bool gray = false;
  std::string codec = "raw";  // how records store the pixels
  int quality = 90;           // jpeg's
  void Add(CLI::App* c);
  Status ToSpec(PrepareSpec* spec) const;
  // True when any prepare flag was given (else the default spec applies).
  bool given() const;
};

struct CacheArgs {
  std::string cache;
  std::string capacity;  // SIZE
  std::string fill_write = "auto";
  bool group_shared = false;
  // with_capacity: --capacity; fills: --fill-write (commands that fill).
  void Add(CLI::App* c, bool with_capacity, bool fills = false);
  // The root from --cache, else ssdfeed::DefaultCacheRoot().
  Status ToOptions(CacheOptions* o) const;
  // As ToOptions, for commands that only read an existing cache (ls, verify,
  // gc, rm): a root that does not exist is an error naming it and where it
  // came from, so a mistyped --cache is not an empty listing.
  Status ToExistingRoot(CacheOptions* o) const;
};

// --field NAME=KEY or NAME:KIND=KEY (repeatable): SourceOptions::fields,
// e.g. --field mask=seg.png --field depth:array=npy (tar extensions,
// tfrecord feature keys, files: patterns). KIND: image, mask, boxes,
// classes, label, array, bytes; without it the name and key decide.
struct FieldArgs {
  std::vector<std::string> fields;
  void Add(CLI::App* c);
  Status ToFields(std::vector<FieldSpec>* out) const;
};

Status ParseHxW(const std::string& text, int* h, int* w);

// A CLI11 check that an integer option is >= min; the message names the
// accepted range and what the boundary means, e.g. "must be >= 0 (0: one
// per core)".
CLI::Validator AtLeast(long long min, const std::string& note = "");

}  // namespace ssdfeed::cli
