// ssdfeed cache ls | verify | gc | rm
#include <algorithm>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/entry_files.h"
#include "cli/options.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "pipeline/origin_check.h"
#include "ssdfeed/defaults.h"
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

int RunLs(const CacheArgs& ca, bool json) {
  CacheOptions o;
  if (Status s = ca.ToExistingRoot(&o); !s.ok()) return Fail(s.message(), kExitUsage);
  auto list = ListEntries(o);
  if (!list.ok()) return Fail(list.status().message());
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : *list)
      j.push_back({{"entry", e.name},
                   {"source", e.source_uri},
                   {"spec", e.spec},
                   {"spec_summary", DescribeSpec(e.spec)},
                   {"skipped", e.skipped},
                   {"samples_total", e.samples_total},
                   {"samples_present", e.samples_present},
                   {"bytes", e.bytes},
                   {"last_used", e.last_used},
                   {"state", e.state},
                   {"in_use", e.in_use},
                   {"foreign", e.foreign}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%-14s %-22s %-19s %-11s %-9s %-24s %s\n", "ENTRY", "STATE", "PRESENT/TOTAL", "BYTES",
              "USED", "SPEC", "SOURCE");
  for (const auto& e : *list) {
    std::string pt = std::to_string(e.samples_present) + "/" + std::to_string(e.samples_total);
    std::printf("%-14s %-22s %-19s %-11s %-9s %-24s %s%s\n", e.name.substr(0, 12).c_str(),
                e.state.c_str(), pt.c_str(), FormatBytes(e.bytes).c_str(), Ago(e.last_used).c_str(),
                DescribeSpec(e.spec).c_str(), e.source_uri.c_str(), e.in_use ? "  (in use)" : "");
  }
  if (list->empty()) std::fprintf(stderr, "ssdfeed: no entries under %s\n", o.root.c_str());
  return 0;
}

// --verify-source=content: every record against its origin sample.
void CheckContent(const Source& src, const PrepareSpec& spec, CacheEntry* entry,
                  nlohmann::json* out) {
  OriginCheckReport oc;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Status s = CompareWithOrigin(src, spec, entry, threads, &oc);
  nlohmann::json c = {{"compared", oc.compared},
                      {"mismatched", oc.mismatched},
                      {"unreadable", oc.unreadable},
                      {"problems", oc.problems}};
  if (!s.ok()) c["error"] = s.message();
  (*out)["source_content"] = c;
}

// Reopens an entry from its manifest (and its source, for repair).
int VerifyOne(const CacheOptions& o, const EntryInfo& info, bool repair, bool content,
              nlohmann::json* out) {
  auto read = ReadEntryKey(Env::Default(), info.dir);
  if (!read.ok()) return Fail(read.status().message());
  const EntryKey& key = *read;
  CacheOptions inspect = o;
  inspect.record_use = false;  // a nightly verify must not keep old entries from gc
  auto entry = CacheEntry::Open(inspect, key);
  if (!entry.ok()) return Fail(entry.status().message());
  VerifyReport r;
  if (Status s = VerifyEntry(entry->get(), &r); !s.ok()) return Fail(s.message());
  (*out)["entry"] = info.name;
  (*out)["good"] = r.good;
  (*out)["corrupt"] = r.corrupt;
  (*out)["missing"] = r.missing;
  // The full source check: every file stat'ed again (size, mtime, inode,
  // ctime, and the folder's label map), not the cheap one.
  PrepareSpec spec;
  SourceOptions so;
  Status ps = ParsePrepareJson(key.prepare_json, &spec, &so);
  auto src = ps.ok() ? OpenSource(key.source_uri, so) : Result<std::unique_ptr<Source>>(ps);
  std::string source_state = !src.ok() ? "unreadable: " + src.status().message()
                             : (*src)->identity() != key.source_identity
                                 ? "changed (entry is stale)"
                                 : "unchanged";
  (*out)["source"] = source_state;
  if (content && src.ok()) CheckContent(**src, spec, entry->get(), out);
  if (repair && r.corrupt > 0) {
    if (source_state != "unchanged")
      return Fail(info.name + ": cannot repair, source " + source_state);
    SampleFetcher fetcher(src->get(), spec, entry->get(), 0);
    FetchScratch scratch;
    uint64_t fixed = 0;
    for (uint64_t id : r.corrupt_ids) {
      CachedSample cs;
      if (fetcher.Fetch(id, &scratch, &cs).ok() && (*entry)->Contains(id)) ++fixed;
    }
    (*entry)->Sync();
    (*out)["repaired"] = fixed;
  }
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
  std::cout << name.substr(0, 12) << ": " << r["good"] << " good, " << r["corrupt"] << " corrupt, "
            << r["missing"] << " missing; source " << r["source"].get<std::string>()
            << (r.contains("repaired") ? "; repaired " + r["repaired"].dump() : "");
  if (r.contains("source_content")) {
    const auto& c = r["source_content"];
    std::cout << "; origin content: " << c["compared"] << " compared, " << c["mismatched"]
              << " differ, " << c["unreadable"] << " unreadable";
    if (c.contains("error")) std::cout << " (" << c["error"].get<std::string>() << ")";
    for (const auto& p : c["problems"]) std::cout << "\n  " << p.get<std::string>();
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
    corrupt |= r["corrupt"].get<uint64_t>() > 0 && !r.contains("repaired");
    stale |= SourceBad(r);
    if (!json) PrintVerify(e.name, r);
    all.push_back(r);
  }
  if (!name.empty() && matched == 0) return Fail("no cache entry '" + name + "' under " + o.root);
  if (json) std::cout << all.dump(2) << "\n";
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
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e.name.substr(0, 12);
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
      std::cout << "would remove " << e.name << " (" << FormatBytes(e.bytes) << ", " << e.source_uri
                << ")\n";
      bytes += e.bytes;
    }
    std::cout << Plural(plan.size(), "entry", "entries") << " would be removed, freeing "
              << FormatBytes(bytes) << "\n";
  } else {
    auto removed = CollectGarbage(o, mb, age);
    if (!removed.ok()) return Fail(removed.status().message());
    for (const auto& n : *removed) std::cout << "removed " << n << "\n";
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
  std::cout << "removed " << *full << "\n";
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
    std::cout << n.substr(0, 12) << ": " << r.files_before << " files -> " << r.files_after << ", "
              << r.records << " records, " << FormatBytes(r.bytes_before) << " -> "
              << FormatBytes(r.bytes_after) << "\n";
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
}

}  // namespace ssdfeed::cli
