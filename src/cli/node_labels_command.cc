// ssdfeed node-labels --cache DIR: the node labels that say which cache
// entries this node holds (ssdfeed.io/e-<fingerprint>=complete|partial), for
// a scheduler to place jobs where their data already is.
//   --format nfd   a node-feature-discovery features file (NFD removes the
//                  labels of lines that disappear, so stale labels go)
//   --apply NODE   sets them on the node through the Kubernetes API and
//                  removes stale ones; done by the Python helper
//                  `python3 -m ssdfeed.node_labeller` (the CLI links no HTTP
//                  client), which this command runs.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/options.h"
#include "cli/placement.h"

namespace ssdfeed::cli {

namespace {

struct NodeLabelsArgs {
  CacheArgs cache;
  std::string format = "labels", output, apply;
  bool json = false;
};

// Broken entries get no label: a job sent there would find nothing usable.
const char* LabelValue(const EntryInfo& e) {
  if (e.state.rfind("complete", 0) == 0) return "complete";
  if (e.state == "partial") return "partial";
  return nullptr;
}

Result<std::map<std::string, std::string>> Labels(const CacheOptions& c) {
  SSDFEED_ASSIGN_OR_RETURN(auto entries, ListEntries(c));
  std::map<std::string, std::string> out;
  for (const auto& e : entries)
    if (const char* v = LabelValue(e)) out[NodeLabelKey(e.name)] = v;
  return out;
}

// Runs the helper with the same interpreter setup as the installed package:
// $SSDFEED_PYTHON, else python3 from PATH (the image's venv is first there).
int Apply(const NodeLabelsArgs& a, const CacheOptions& c) {
  const char* py = std::getenv("SSDFEED_PYTHON");
  std::string python = py && *py ? py : "python3";
  std::vector<std::string> args = {python,    "-m",  "ssdfeed.node_labeller", "--node", a.apply,
                                   "--cache", c.root};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  return Fail("--apply: cannot run " + python + " -m ssdfeed.node_labeller (" +
              std::strerror(errno) +
              "); set SSDFEED_PYTHON to the interpreter ssdfeed is "
              "installed in");
}

int Print(const NodeLabelsArgs& a, const std::map<std::string, std::string>& labels) {
  std::string text;
  if (a.json) {
    text = nlohmann::json(labels).dump() + "\n";
  } else {
    if (a.format == "nfd") text = "# ssdfeed cache entries on this node (ssdfeed node-labels)\n";
    for (const auto& [k, v] : labels) text += k + "=" + v + "\n";
  }
  if (a.output.empty()) {
    std::cout << text;
    return 0;
  }
  // Atomic, so NFD never reads half a file (and drops labels meanwhile).
  Status s = Env::Default()->WriteFileAtomic(a.output, text, 0644);
  return s.ok() ? 0 : Fail("--output " + a.output + ": " + s.message());
}

int RunNodeLabels(const NodeLabelsArgs& a) {
  CacheOptions c;
  if (Status s = a.cache.ToExistingRoot(&c); !s.ok()) return Fail(s.message(), kExitUsage);
  c.record_use = false;
  if (!a.apply.empty()) return Apply(a, c);
  auto labels = Labels(c);
  if (!labels.ok()) return Fail(labels.status().message());
  return Print(a, *labels);
}

}  // namespace

void AddNodeLabels(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("node-labels",
                               "Print (or apply) node labels naming the cache entries held here");
  auto a = std::make_shared<NodeLabelsArgs>();
  c->add_option("--cache", a->cache.cache,
                "Cache root (default $SSDFEED_CACHE, then ~/.cache/ssdfeed)");
  c->add_option("--format", a->format,
                "labels (default: key=value lines) or nfd (a node-feature-discovery features "
                "file)")
      ->check(CLI::IsMember({"labels", "nfd"}));
  c->add_option("--output", a->output, "Write to this file, atomically (default: stdout)");
  c->add_option("--apply", a->apply,
                "Set the labels on this Kubernetes node and remove stale ones (runs python3 -m "
                "ssdfeed.node_labeller)");
  c->add_flag("--json", a->json, "Print the labels as one JSON object");
  c->callback([st, a] { st->rc = RunNodeLabels(*a); });
}

}  // namespace ssdfeed::cli
