// ssdfeed cache ls | verify | gc | rm | export | import
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/entry_contents.h"
#include "cli/options.h"
#include "cli/printable.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/entry_check.h"
#include "ssdfeed/metrics.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

std::string Ago(int64_t t) {
  if (t == 0) return "never";
  int64_t d = std::time(nullptr) - t;
  if (d < 120) return std::to_string(d) + "s ago";
  if (d < 7200) return std::to_string(d / 60) + "m ago";
  if (d < 172800) return std::to_string(d / 3600) + "h ago";
  return std::to_string(d / 86400) + "d ago";
}

// JSON of what manifests hold, safe on a terminal and never throwing:
// everything beyond ASCII as \u escapes (C1 controls among it), bytes that
// are not UTF-8 as U+FFFD.
std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace);
}

// The codec an entry's records use, from its spec's canonical text
// (";codec=zstd-up-l1", ";codec=jpeg-q90-420"; none: raw).
std::string CodecOf(const std::string& spec) {
  size_t at = spec.find(";codec=");
  if (at == std::string::npos) return "raw";
  std::string c = spec.substr(at + 7);
  return c.substr(0, c.find('-'));
}

// "jpeg q90" for jpeg, else the codec's name.
std::string CodecSummary(const std::string& spec) {
  std::string codec = CodecOf(spec);
  if (codec != "jpeg") return codec;
  size_t q = spec.find(";codec=jpeg-q");
  std::string rest = spec.substr(q + 13);
  return "jpeg q" + rest.substr(0, rest.find('-'));
}

// The peer-fill counters of each entry (by short id) that has any: what
// `cache ls` adds under the entry. Metrics the root cannot give (a root of
// another user's, stats files unreadable) leave the listing as it was.
std::map<std::string, StatsSnapshot> PeerFillStats(const CacheOptions& o) {
  std::map<std::string, StatsSnapshot> out;
  auto root = CollectRootStats(o.env ? o.env : Env::Default(), o);
  if (!root.ok()) return out;
  for (const auto& [id, e] : root->entries) {
    const StatsSnapshot& s = e.stats;
    if (s[Ctr::kPeerRecordsReceived] + s[Ctr::kPeerRecordsSent] + s[Ctr::kPeerRecordsRefused] +
            s[Ctr::kPeerFillCompleteMs] >
        0)
      out[id] = s;
  }
  return out;
}

nlohmann::json PeerFillJson(const StatsSnapshot& s) {
  return {{"records_received", s[Ctr::kPeerRecordsReceived]},
          {"bytes_received", s[Ctr::kPeerBytesReceived]},
          {"records_sent", s[Ctr::kPeerRecordsSent]},
          {"bytes_sent", s[Ctr::kPeerBytesSent]},
          {"records_refused", s[Ctr::kPeerRecordsRefused]},
          {"origin_bytes", s[Ctr::kOriginBytes]},
          {"complete_seconds", static_cast<double>(s[Ctr::kPeerFillCompleteMs]) / 1000}};
}

// "peer fill: received 40 records (120 KiB), sent 20 (60 KiB), 1 refused;
// origin 1.2 MiB; complete after 3.4 s"
std::string PeerFillLine(const StatsSnapshot& s) {
  std::string line = "peer fill: received " + std::to_string(s[Ctr::kPeerRecordsReceived]) +
                     " records (" + FormatBytes(s[Ctr::kPeerBytesReceived]) + "), sent " +
                     std::to_string(s[Ctr::kPeerRecordsSent]) + " (" +
                     FormatBytes(s[Ctr::kPeerBytesSent]) + ")";
  if (s[Ctr::kPeerRecordsRefused] > 0)
    line += ", " + std::to_string(s[Ctr::kPeerRecordsRefused]) + " refused";
  line += "; origin " + FormatBytes(s[Ctr::kOriginBytes]);
  if (s[Ctr::kPeerFillCompleteMs] > 0) {
    char b[64];
    std::snprintf(b, sizeof b, "; complete after %.1f s",
                  static_cast<double>(s[Ctr::kPeerFillCompleteMs]) / 1000);
    line += b;
  }
  return line;
}

int RunLs(const CacheArgs& ca, bool json) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto list = ListEntries(o);
  if (!list.ok()) return Fail(list.status().message());
  std::vector<EntryContents> what = DescribeEntries(o, *list);
  std::map<std::string, StatsSnapshot> peer = PeerFillStats(o);
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t i = 0; i < list->size(); ++i) {
      const EntryInfo& e = (*list)[i];
      const EntryContents& c = what[i];
      j.push_back({{"entry", e.name},
                   {"source", e.source_uri},
                   {"spec", e.spec},
                   {"spec_summary", c.what},
                   {"codec", CodecOf(e.spec)},
                   {"skipped", e.skipped},
                   {"samples_total", e.samples_total},
                   {"samples_present", e.samples_present},
                   {"items_total", c.total ? nlohmann::json(*c.total) : nlohmann::json(nullptr)},
                   {"items_present", c.present},
                   {"bytes", e.bytes},
                   {"last_used", e.last_used},
                   {"state", c.state},
                   {"in_use", e.in_use},
                   {"foreign", e.foreign}});
      auto p = peer.find(EntryShortId(e.name));
      if (p != peer.end()) j.back()["peer_fill"] = PeerFillJson(p->second);
    }
    std::cout << JsonText(j) << "\n";
    return 0;
  }
  std::printf("%-14s %-22s %-19s %-11s %-9s %-9s %-24s %s\n", "ENTRY", "STATE", "PRESENT/TOTAL",
              "BYTES", "USED", "CODEC", "SPEC", "SOURCE");
  // Every string here comes from a manifest (or an entry's directory name):
  // printed through Printable, so a crafted one cannot drive the terminal.
  for (size_t i = 0; i < list->size(); ++i) {
    const EntryInfo& e = (*list)[i];
    const EntryContents& c = what[i];
    std::string pt =
        std::to_string(c.present) + "/" + (c.total ? std::to_string(*c.total) : std::string("?"));
    std::printf("%-14s %-22s %-19s %-11s %-9s %-9s %-24s %s%s\n",
                Printable(e.name.substr(0, 12)).c_str(), Printable(c.state).c_str(), pt.c_str(),
                FormatBytes(e.bytes).c_str(), Ago(e.last_used).c_str(),
                Printable(CodecSummary(e.spec)).c_str(), Printable(c.what).c_str(),
                Printable(e.source_uri).c_str(), e.in_use ? "  (in use)" : "");
    auto p = peer.find(EntryShortId(e.name));
    if (p != peer.end()) std::printf("%14s %s\n", "", PeerFillLine(p->second).c_str());
  }
  if (list->empty())
    std::fprintf(stderr, "ssdfeed: no entries under %s\n", Printable(o.root).c_str());
  return 0;
}

// CheckEntry's report as `cache verify --json` prints it.
nlohmann::json VerifyJson(const std::string& name, const CheckEntryReport& r) {
  nlohmann::json out = {{"entry", name},
                        {"good", r.records.good},
                        {"corrupt", r.records.corrupt},
                        {"missing", r.records.missing},
                        {"source", r.source}};
  if (r.dropped) out["dropped"] = *r.dropped;
  if (r.repaired) out["repaired"] = *r.repaired;
  if (r.content) {
    const ContentCheck& c = *r.content;
    out["source_content"] = {{"compared", c.compared},
                             {"mismatched", c.mismatched},
                             {"unreadable", c.unreadable},
                             {"problems", c.problems}};
    if (!c.error.empty()) out["source_content"]["error"] = c.error;
  }
  return out;
}

// One entry, checked by the library (CheckEntry).
int VerifyOne(const CacheOptions& o, const EntryInfo& info, bool repair, bool content,
              nlohmann::json* out) {
  CheckEntryReport r;
  Status s = CheckEntry(o, info, {.repair = repair, .compare_content = content}, &r);
  if (!s.ok()) return Fail(s.message());
  *out = VerifyJson(info.name, r);
  return 0;
}

// A stale entry or an origin that no longer matches its records is a
// finding, like a corrupt record: exit status 1.
bool SourceBad(const nlohmann::json& r) {
  if (r["source"].get<std::string>().rfind("changed", 0) == 0) return true;
  if (!r.contains("source_content")) return false;
  const auto& c = r["source_content"];
  return c["mismatched"].get<uint64_t>() > 0 || c.contains("error");
}

void PrintVerify(const std::string& name, const nlohmann::json& r) {
  std::cout << Printable(name.substr(0, 12)) << ": " << r["good"] << " good, " << r["corrupt"]
            << " corrupt, " << r["missing"] << " missing; source "
            << Printable(r["source"].get<std::string>())
            << (r.contains("repaired") ? "; repaired " + r["repaired"].dump() : "")
            << (r.contains("dropped") ? "; dropped " + r["dropped"].dump() +
                                            " (the job that uses the entry computes them again)"
                                      : "");
  if (r.contains("source_content")) {
    const auto& c = r["source_content"];
    std::cout << "; origin content: " << c["compared"] << " compared, " << c["mismatched"]
              << " differ, " << c["unreadable"] << " unreadable";
    if (c.contains("error")) std::cout << " (" << Printable(c["error"].get<std::string>()) << ")";
    for (const auto& p : c["problems"]) std::cout << "\n  " << Printable(p.get<std::string>());
  }
  std::cout << "\n";
}

int RunVerify(const CacheArgs& ca, const std::string& name, bool repair,
              const std::string& verify_source, bool json) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto list = ListEntries(o);
  if (!list.ok()) return Fail(list.status().message());
  nlohmann::json all = nlohmann::json::array();
  int rc = 0, matched = 0;
  bool corrupt = false, stale = false;
  for (const auto& e : *list) {
    if (!name.empty() && e.name.rfind(name, 0) != 0) continue;
    ++matched;
    nlohmann::json r;
    if (int c = VerifyOne(o, e, repair, verify_source == "content", &r); c != 0) {
      rc = c;
      continue;
    }
    corrupt |=
        r["corrupt"].get<uint64_t>() > 0 && !r.contains("repaired") && !r.contains("dropped");
    stale |= SourceBad(r);
    if (!json) PrintVerify(e.name, r);
    all.push_back(r);
  }
  if (!name.empty() && matched == 0) return Fail("no cache entry '" + name + "' under " + o.root);
  if (json) std::cout << JsonText(all) << "\n";
  if (corrupt && !json) std::cerr << "ssdfeed: corrupt records found (run with --repair)\n";
  if (stale && !json)
    std::cerr << "ssdfeed: an entry no longer matches its source (it is not served again; "
                 "`ssdfeed cache rm` it or let gc evict it)\n";
  if (rc == 0 && (corrupt || stale)) rc = 1;
  return rc;
}

struct GcArgs {
  std::string max_bytes, older;
  bool dry_run = false;
};

// The entries gc picks, in the order CollectGarbage visits them (least
// recently used first); entries in use (or another user's) are never
// removed, so they land in *blocked and do not count towards the target.
std::vector<EntryInfo> GcPlan(const std::vector<EntryInfo>& all, uint64_t max_bytes, int64_t age,
                              std::vector<EntryInfo>* blocked) {
  std::vector<EntryInfo> sorted = all, out;
  std::sort(sorted.begin(), sorted.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_used < b.last_used; });
  uint64_t total = 0;
  for (const auto& e : sorted) total += e.bytes;
  int64_t now = std::time(nullptr);
  for (const auto& e : sorted) {
    bool too_old = age > 0 && now - e.last_used > age;
    bool too_big = max_bytes > 0 && total > max_bytes;
    if (!too_old && !too_big) continue;
    if (e.in_use || e.foreign) {
      blocked->push_back(e);
      continue;
    }
    total -= e.bytes;
    out.push_back(e);
  }
  return out;
}

Status ParseGcTargets(const GcArgs& g, uint64_t* mb, int64_t* age) {
  if (!g.max_bytes.empty()) {
    auto r = ParseSize(g.max_bytes);
    if (!r.ok() || *r == 0)
      return Status::InvalidArgument("--max-bytes: expected a size > 0 such as 500G, got '" +
                                     g.max_bytes + "'");
    *mb = *r;
  }
  if (!g.older.empty()) {
    auto r = ParseDurationSeconds(g.older);
    if (!r.ok() || *r <= 0)
      return Status::InvalidArgument(
          "--older-than: expected a duration > 0 such as 14d or 12h, "
          "got '" +
          g.older + "'");
    *age = *r;
  }
  if (*mb == 0 && *age == 0)
    return Status::InvalidArgument("gc needs --max-bytes SIZE and/or --older-than DURATION");
  return Status::OK();
}

std::string Names(const std::vector<EntryInfo>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + Printable(e.name.substr(0, 12));
  return s;
}

int RunGc(const CacheArgs& ca, const GcArgs& g) {
  CacheOptions o;
  uint64_t mb = 0;
  int64_t age = 0;
  if (Status s = ParseGcTargets(g, &mb, &age); !s.ok()) return Fail(s.message(), kExitUsage);
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto list = ListEntries(o);
  if (!list.ok()) return Fail(list.status().message());
  std::vector<EntryInfo> blocked;
  std::vector<EntryInfo> plan = GcPlan(*list, mb, age, &blocked);
  if (g.dry_run) {
    uint64_t bytes = 0;
    for (const auto& e : plan) {
      std::cout << "would remove " << Printable(e.name) << " (" << FormatBytes(e.bytes) << ", "
                << Printable(e.source_uri) << ")\n";
      bytes += e.bytes;
    }
    std::cout << Plural(plan.size(), "entry", "entries") << " would be removed, freeing "
              << FormatBytes(bytes) << "\n";
  } else {
    auto removed = CollectGarbage(o, mb, age);
    if (!removed.ok()) return Fail(removed.status().message());
    for (const auto& n : *removed) std::cout << "removed " << Printable(n) << "\n";
    // Planned but still there: it came into use since the listing.
    for (const auto& e : plan)
      if (std::find(removed->begin(), removed->end(), e.name) == removed->end())
        blocked.push_back(e);
    auto total = RootBytes(o);
    std::cout << Plural(removed->size(), "entry", "entries") << " removed; cache holds "
              << FormatBytes(total.ok() ? *total : 0) << "\n";
  }
  if (!blocked.empty())
    std::cout << "kept " << Plural(blocked.size(), "entry", "entries")
              << " gc would remove, in use by a running job (or another user's): " << Names(blocked)
              << "\n";
  return 0;
}

// An entry by full name or unique prefix of 8+ characters.
Result<std::string> ResolveEntry(const CacheOptions& o, const std::string& name) {
  SSDFEED_ASSIGN_OR_RETURN(auto list, ListEntries(o));
  std::vector<EntryInfo> matches;
  for (const auto& e : list) {
    if (e.name == name) return e.name;
    if (name.size() >= 8 && e.name.rfind(name, 0) == 0) matches.push_back(e);
  }
  if (matches.size() == 1) return matches[0].name;
  if (matches.empty()) return Status::NotFound("no cache entry '" + name + "' under " + o.root);
  std::string all;
  for (const auto& e : matches) all += " " + e.name;
  return Status::InvalidArgument("entry prefix '" + name + "' is ambiguous; it matches:" + all);
}

int RunRm(const CacheArgs& ca, const std::string& name) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto full = ResolveEntry(o, name);
  if (!full.ok())
    return Fail(full.status().message(), full.status().IsNotFound() ? kExitFailure : kExitUsage);
  Status s = RemoveEntry(o, *full);
  if (!s.ok()) return Fail(s.message());
  std::cout << "removed " << Printable(*full) << "\n";
  return 0;
}

int RunCompact(const CacheArgs& ca, const std::string& name) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  std::vector<std::string> names;
  if (!name.empty()) {
    auto full = ResolveEntry(o, name);
    if (!full.ok())
      return Fail(full.status().message(), full.status().IsNotFound() ? kExitFailure : kExitUsage);
    names.push_back(*full);
  } else {
    auto list = ListEntries(o);
    if (!list.ok()) return Fail(list.status().message());
    for (const auto& e : *list)
      if (!e.in_use && !e.foreign) names.push_back(e.name);
  }
  for (const auto& n : names) {
    CompactReport r;
    Status s = CompactEntry(o, n, &r);
    if (!s.ok()) return Fail(s.message());
    std::cout << Printable(n.substr(0, 12)) << ": " << r.files_before << " files -> "
              << r.files_after << ", " << r.records << " records, " << FormatBytes(r.bytes_before)
              << " -> " << FormatBytes(r.bytes_after) << "\n";
  }
  return 0;
}

struct ImportArgs {
  std::string file = "-";
  std::vector<std::string> source_roots;  // OLD=NEW
  bool keep_identity = false;
  // Records compared with the node's origin, picked at random (0: none).
  uint64_t check_origin = 16;
  // Python item entries (ssdfeed.cache, ssdfeed.tf.cache) are imported only
  // when the stream is declared trusted: their records are whatever the
  // stream's producer wrote, and no origin here can check them.
  bool trust_items = false;
  bool json = false;
};

int RunExport(const CacheArgs& ca, const std::string& name, const std::string& to,
              const ExportOptions& eo) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto full = ResolveEntry(o, name);
  if (!full.ok())
    return Fail(full.status().message(), full.status().IsNotFound() ? kExitFailure : kExitUsage);
  if (to == "-" && ::isatty(1))
    return Fail("refusing to write the export stream to a terminal: use --to FILE or a pipe",
                kExitUsage);
  // A file appears only when complete: written aside, renamed at the end.
  std::string tmp = to == "-" ? "" : to + ".partial-" + std::to_string(::getpid());
  // The cache's own mode (the records are no more public in the stream than
  // in the root); exclusive and not through a link, so nothing placed at that
  // name beforehand is written through or truncated.
  int fd = to == "-" ? 1
                     : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                              o.group_shared ? 0660 : 0600);
  if (fd < 0) return Fail(tmp + ": " + std::strerror(errno));
  TransferReport r;
  Status s = ExportEntry(o, *full, fd, eo, &r);
  if (!tmp.empty()) {
    if (s.ok() && ::fsync(fd) != 0) s = Status::IOError(tmp + ": " + std::strerror(errno));
    if (::close(fd) != 0 && s.ok()) s = Status::IOError(tmp + ": " + std::strerror(errno));
    if (s.ok() && ::rename(tmp.c_str(), to.c_str()) != 0)
      s = Status::IOError(to + ": " + std::strerror(errno));
    if (!s.ok()) ::unlink(tmp.c_str());
  }
  if (!s.ok()) return Fail(s.message());
  std::fprintf(stderr, "ssdfeed: exported %s: %llu of %llu samples, %s of records, to %s\n",
               Printable(r.entry).c_str(), static_cast<unsigned long long>(r.records),
               static_cast<unsigned long long>(r.samples_total),
               FormatBytes(r.record_bytes).c_str(), to == "-" ? "stdout" : to.c_str());
  return 0;
}

int RunImport(const CacheArgs& ca, const ImportArgs& ia) {
  CacheOptions o;
  if (Status s = ca.ToOptions(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  std::vector<std::pair<std::string, std::string>> roots;
  for (const auto& r : ia.source_roots) {
    size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == r.size())
      return Fail("--source-root " + r + ": expected OLD=NEW (two paths)", kExitUsage);
    roots.emplace_back(r.substr(0, eq), r.substr(eq + 1));
  }
  if (ia.keep_identity && !roots.empty())
    return Fail("--keep-identity and --source-root exclude each other", kExitUsage);
  if (ia.file == "-" && ::isatty(0))
    return Fail("refusing to read the export stream from a terminal: name a FILE or pipe it in",
                kExitUsage);
  int fd = ia.file == "-" ? 0 : ::open(ia.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(ia.file + ": " + std::strerror(errno));
  OriginImportOptions io{.keep_identity = ia.keep_identity,
                         .source_roots = roots,
                         .check_origin = ia.check_origin,
                         .trust_items = ia.trust_items};
  TransferReport r;
  Status s = ImportEntryFromOrigin(o, fd, io, &r);
  if (fd != 0) ::close(fd);
  std::string from = ia.file == "-" ? "stdin" : ia.file;
  if (!s.ok()) return Fail(from + ": " + s.message(), s.IsNoSpace() ? kExitPartial : kExitFailure);
  if (ia.json) {
    std::cout << JsonText(nlohmann::json{{"entry", r.entry},
                                         {"source", r.source_uri},
                                         {"samples_total", r.samples_total},
                                         {"records", r.records},
                                         {"record_bytes", r.record_bytes},
                                         {"added", r.added},
                                         {"already_present", r.already_present},
                                         {"merged", r.merged}})
              << "\n";
  } else {
    std::cout << "imported " << Printable(r.entry) << " from " << Printable(from) << ": "
              << r.records << " records (" << FormatBytes(r.record_bytes) << "), " << r.added
              << " added"
              << (r.merged ? ", " + std::to_string(r.already_present) + " already present" : "")
              << "; source " << Printable(r.source_uri) << "\n";
  }
  return 0;
}

}  // namespace

void AddCache(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("cache", "List, verify, collect or remove cache entries");
  c->require_subcommand(1);
  auto ca = std::make_shared<CacheArgs>();
  auto json = std::make_shared<bool>(false);

  auto* ls = c->add_subcommand("ls", "List entries");
  ca->Add(ls, false);
  ls->add_flag("--json", *json, "JSON list");
  ls->callback([st, ca, json] { st->rc = RunLs(*ca, *json); });

  auto* verify = c->add_subcommand("verify", "Check every record (and the source) of entries");
  auto name = std::make_shared<std::string>();
  auto repair = std::make_shared<bool>(false);
  auto verify_source = std::make_shared<std::string>("stat");
  verify->add_option("entry", *name, "Entry name or prefix (default: all)");
  verify->add_flag("--repair", *repair, "Re-prepare corrupt records from the origin");
  verify
      ->add_option("--verify-source", *verify_source,
                   "stat: stat every origin file again (default); content: also read and "
                   "prepare every origin sample and compare it with its record")
      ->check(CLI::IsMember({"stat", "content"}));
  ca->Add(verify, false);
  verify->add_flag("--json", *json, "JSON report");
  verify->callback([st, ca, name, repair, verify_source, json] {
    st->rc = RunVerify(*ca, *name, *repair, *verify_source, *json);
  });

  auto* gc = c->add_subcommand("gc", "Evict unused entries, least recently used first");
  auto g = std::make_shared<GcArgs>();
  gc->add_option("--max-bytes", g->max_bytes, "Shrink the root to at most SIZE (e.g. 500G)");
  gc->add_option("--older-than", g->older, "Remove entries unused for DURATION (e.g. 7d, 12h)");
  gc->add_flag("--dry-run", g->dry_run, "List what would be removed; remove nothing");
  ca->Add(gc, false);
  gc->callback([st, ca, g] { st->rc = RunGc(*ca, *g); });

  auto* rm = c->add_subcommand("rm", "Remove one entry (refused while in use)");
  auto rm_name = std::make_shared<std::string>();
  rm->add_option("entry", *rm_name, "Entry name (or unique prefix of 8+ characters)")->required();
  ca->Add(rm, false);
  rm->callback([st, ca, rm_name] { st->rc = RunRm(*ca, *rm_name); });

  auto* compact = c->add_subcommand("compact", "Rewrite unused entries into few segment files");
  auto compact_name = std::make_shared<std::string>();
  compact->add_option("entry", *compact_name, "Entry name or prefix (default: every unused one)");
  ca->Add(compact, false);
  compact->callback([st, ca, compact_name] { st->rc = RunCompact(*ca, *compact_name); });

  auto* ex = c->add_subcommand("export", "Write one entry as a portable stream (tar)");
  auto ex_name = std::make_shared<std::string>();
  auto ex_to = std::make_shared<std::string>("-");
  auto eo = std::make_shared<ExportOptions>();
  ex->add_option("entry", *ex_name, "Entry name (or unique prefix of 8+ characters)")->required();
  ex->add_option("--to", *ex_to, "Write to FILE (default -: stdout)");
  ex->add_flag("--partial", eo->partial, "Also export an entry that lacks samples");
  ex->add_flag("--zstd", eo->zstd, "Compress the stream with zstd");
  ca->Add(ex, false);
  ex->callback([st, ca, ex_name, ex_to, eo] { st->rc = RunExport(*ca, *ex_name, *ex_to, *eo); });

  auto* im = c->add_subcommand("import", "Add an exported entry to the cache");
  auto ia = std::make_shared<ImportArgs>();
  im->add_option("file", ia->file, "Export stream to read (default -: stdin; plain or zstd)");
  im->add_option("--source-root", ia->source_roots,
                 "OLD=NEW: the source under OLD on the exporting machine is under NEW here "
                 "(repeatable)");
  im->add_flag("--keep-identity", ia->keep_identity,
               "Keep the exported source identity instead of taking it from this node's files");
  im->add_option("--check-origin", ia->check_origin,
                 "Compare N records, picked at random, with this node's origin, prepared again; a "
                 "difference refuses the import (default 16; 0: none)")
      ->check(AtLeast(0, " (0: none)"));
  im->add_flag("--trust-items", ia->trust_items,
               "Import an entry of Python items (ssdfeed.cache, ssdfeed.tf.cache): its records "
               "cannot be checked against an origin, so the stream must come from a producer "
               "you trust (default: refused)");
  im->add_flag("--json", ia->json, "JSON report");
  ca->Add(im, true, true);
  im->callback([st, ca, ia] { st->rc = RunImport(*ca, *ia); });
}

}  // namespace ssdfeed::cli
