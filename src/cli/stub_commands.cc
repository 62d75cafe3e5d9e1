// Sub-commands whose issues have not landed: they parse and say so (exit 2).
#include "cli/commands.h"

namespace ssdfeed::cli {

void AddServeMetrics(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("serve-metrics", "Export Prometheus metrics of a cache root");
  c->allow_extras();
  c->callback([st] { st->rc = NotImplemented("serve-metrics"); });
}

}  // namespace ssdfeed::cli
