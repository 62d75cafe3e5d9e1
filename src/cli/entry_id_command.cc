// ssdfeed entry-id --source URI [prepare options]: the cache entry (and the
// node label key) a job with these flags will use, so a Job template can ask
// for the nodes that hold it. Opens the source as warm does (the fingerprint
// covers every file's identity) but reads no sample and touches no cache.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "cli/placement.h"
#include "pipeline/entry_key.h"

namespace ssdfeed::cli {

namespace {

struct EntryIdArgs {
  std::string source;
  PrepareArgs prep;
  FieldArgs fields;
  bool json = false;
};

int RunEntryId(const EntryIdArgs& a) {
  PrepareSpec spec;
  if (Status s = a.prep.ToSpec(&spec); !s.ok()) return Fail(s.message(), kExitUsage);
  SourceOptions so;
  if (Status s = a.fields.ToFields(&so.fields); !s.ok()) return Fail(s.message(), kExitUsage);
  auto src = OpenSource(a.source, so);
  if (!src.ok()) return Fail(src.status().message());
  EntryKey key = MakeEntryKey(**src, so, spec);
  std::string fp = key.fingerprint();
  if (a.json) {
    std::cout << nlohmann::json{{"entry", fp},
                                {"label", NodeLabelKey(fp)},
                                {"spec", key.spec},
                                {"samples_total", key.samples_total}}
                     .dump()
              << "\n";
  } else {
    std::cout << NodeLabelKey(fp) << "\n";
  }
  return 0;
}

}  // namespace

void AddEntryId(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand(
      "entry-id", "Print the node label key of the cache entry for a source and prepare options");
  auto a = std::make_shared<EntryIdArgs>();
  c->add_option("--source", a->source, "Source URI (as for warm)")->required();
  a->prep.Add(c);
  a->fields.Add(c);
  c->add_flag("--json", a->json, "Print {entry, label, spec, samples_total}");
  c->callback([st, a] { st->rc = RunEntryId(*a); });
}

}  // namespace ssdfeed::cli
