#include "cli/commands.h"

namespace ssdfeed::cli {

void AddWarm(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("warm", "Fill a cache entry from a source");
  c->allow_extras();
  c->callback([st] { st->rc = NotImplemented("warm"); });
}

void AddCache(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("cache", "List, verify, collect or remove cache entries");
  c->allow_extras();
  c->callback([st] { st->rc = NotImplemented("cache"); });
}

}  // namespace ssdfeed::cli
