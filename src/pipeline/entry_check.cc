// CheckEntry and ImportEntryFromOrigin (ssdfeed/entry_check.h): an entry checked
// against its origin, `ssdfeed cache verify [--repair]` and `cache import
// --check-origin`'s work. They sit in the pipeline because a repair and an
// origin check prepare samples, through the one SampleFetcher.
#include "ssdfeed/entry_check.h"

#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "pipeline/origin_check.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

namespace {

// --verify-source=content: every record against its origin sample.
ContentCheck CompareContent(const Source& src, const PrepareSpec& spec, CacheEntry* entry,
                            int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  OriginCheckReport oc;
  Status s = CompareWithOrigin(src, spec, entry, threads, &oc);
  ContentCheck c{oc.compared, oc.mismatched, oc.unreadable, oc.problems, ""};
  if (!s.ok()) c.error = s.message();
  return c;
}

// Prepares the corrupt records again through the fetcher; how many are
// stored again, and synced (repaired records that never reach the disk are
// not repaired).
Result<uint64_t> Repair(const Source& src, const PrepareSpec& spec, CacheEntry* entry,
                        const std::vector<uint64_t>& ids) {
  SampleFetcher fetcher(&src, spec, entry, 0);
  FetchScratch scratch;
  uint64_t fixed = 0;
  for (uint64_t id : ids) {
    CachedSample cs;
    if (fetcher.Fetch(id, &scratch, &cs).ok() && entry->Contains(id)) ++fixed;
  }
  SSDFEED_RETURN_IF_ERROR(entry->Sync().WithContext("repair"));
  return fixed;
}

}  // namespace

Status CheckEntry(const CacheOptions& opts, const EntryInfo& info, const CheckEntryOptions& o,
                  CheckEntryReport* report) {
  *report = CheckEntryReport();
  Env* env = opts.env != nullptr ? opts.env : Env::Default();
  SSDFEED_ASSIGN_OR_RETURN(EntryKey key, ReadEntryKey(env, info.dir));
  CacheOptions inspect = opts;
  inspect.record_use = false;  // a nightly verify must not keep old entries from gc
  SSDFEED_ASSIGN_OR_RETURN(std::unique_ptr<CacheEntry> entry, CacheEntry::Open(inspect, key));
  SSDFEED_RETURN_IF_ERROR(VerifyEntry(entry.get(), &report->records));
  const VerifyReport& r = report->records;
  if (IsItemsKey(key)) {
    // Its origin (a dataset in some job) is out of reach: a repair is the
    // drop VerifyEntry already made; the job computes them again.
    report->items = true;
    report->source = "a Python dataset (" + key.source_uri + "): not checked from here";
    if (o.repair && r.corrupt > 0) report->dropped = r.corrupt;
    return Status::OK();
  }
  // The full source check: every file stat'ed again (size, mtime, inode,
  // ctime, and the folder's label map), not the cheap one.
  PrepareSpec spec;
  SourceOptions so;
  Status ps = ParsePrepareJson(key.prepare_json, &spec, &so);
  auto src = ps.ok() ? OpenSource(key.source_uri, so) : Result<std::unique_ptr<Source>>(ps);
  report->source = !src.ok() ? "unreadable: " + src.status().message()
                   : (*src)->identity() != key.source_identity ? "changed (entry is stale)"
                                                               : "unchanged";
  if (o.compare_content && src.ok())
    report->content = CompareContent(**src, spec, entry.get(), o.threads);
  if (o.repair && r.corrupt > 0) {
    if (report->source != "unchanged")
      return Status::InvalidArgument(info.name + ": cannot repair, source " + report->source);
    auto fixed = Repair(**src, spec, entry.get(), r.corrupt_ids);
    if (!fixed.ok()) return fixed.status().WithContext(info.name);
    report->repaired = *fixed;
  }
  return Status::OK();
}

std::string RewriteSourceUri(const std::string& uri,
                             const std::vector<std::pair<std::string, std::string>>& roots) {
  size_t colon = uri.find(':');
  bool scheme = colon != std::string::npos && colon > 0 &&
                uri.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == colon;
  std::string head = scheme ? uri.substr(0, colon + 1) : "", path = uri.substr(head.size());
  for (const auto& [from, to] : roots) {
    if (from.empty() || path.rfind(from, 0) != 0) continue;
    // Whole path components only: /data must not rewrite /database.
    if (path.size() > from.size() && from.back() != '/' && path[from.size()] != '/') continue;
    return head + to + path.substr(from.size());
  }
  return uri;
}

namespace {

// An entry of Python items has no origin on this node to compare its records
// with: reading them trusts whoever produced the stream. Refused unless the
// user says so.
Status CheckItemsTrusted(const EntryKey& k, bool trusted) {
  if (!IsItemsKey(k) || trusted) return Status::OK();
  return Status::InvalidArgument(
      "the stream holds an entry of Python items (" + k.source_uri + ", spec " + k.spec +
      "), whose records no origin on this node can check: import it only from a producer "
      "you trust as you trust your own code, with --trust-items");
}

// n distinct ids below total (n < total), unpredictable to the
// stream's producer: evenly spaced ones would tell a forger which records
// must be genuine (Floyd's sampling: n draws, whatever total is).
std::set<uint64_t> RandomIds(uint64_t total, uint64_t n) {
  std::set<uint64_t> ids;
  std::random_device rd;
  std::mt19937_64 rng((uint64_t{rd()} << 32) ^ rd());
  for (uint64_t j = total - n; j < total; ++j) {
    uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(rng);
    if (!ids.insert(t).second) ids.insert(j);
  }
  return ids;
}

// The entry's source on this node, to compare imported records with.
struct NodeOrigin {
  std::unique_ptr<Source> source;
  std::unique_ptr<SampleFetcher> fetcher;
  bool all = false;        // every record compared
  std::set<uint64_t> ids;  // else those
  FetchScratch scratch;

  Status Check(uint64_t id, const CachedSample& rec) {
    if (!fetcher || (!all && ids.count(id) == 0)) return Status::OK();
    CachedSample fresh;
    SSDFEED_RETURN_IF_ERROR(fetcher->Fetch(id, &scratch, &fresh));
    std::string diff = SampleDifference(rec, fresh);
    if (diff.empty()) return Status::OK();
    return Status::InvalidArgument(source->Describe(id) + ": sample " + std::to_string(id) +
                                   " prepares differently here than in the exported entry (" +
                                   diff +
                                   "): not the same dataset (--check-origin 0 skips this check)");
  }
};

// The exported key as it is on this node: the source (moved by the source
// roots) is opened here and its identity taken from the files here.
Result<EntryKey> RebindKey(const EntryKey& k, const OriginImportOptions& o, NodeOrigin* origin) {
  // Python items have no origin files to rebind to: the key (the dataset's
  // code and key) holds on any node.
  if (IsItemsKey(k)) return k;
  std::string uri = RewriteSourceUri(k.source_uri, o.source_roots);
  PrepareSpec spec;
  SourceOptions so;
  SSDFEED_RETURN_IF_ERROR(ParsePrepareJson(k.prepare_json, &spec, &so)
                              .WithContext("the exported manifest's preparation"));
  auto src = OpenSource(uri, so);
  if (!src.ok())
    return src.status().WithContext(
        "cannot open the entry's source " + uri +
        " on this node (pass --source-root OLD=NEW for where the dataset lives here, or "
        "--keep-identity)");
  if ((*src)->size() != k.samples_total)
    return Status::InvalidArgument(uri + " holds " + std::to_string((*src)->size()) +
                                   " samples here, the exported entry " +
                                   std::to_string(k.samples_total) + ": not the same dataset");
  EntryKey key = MakeEntryKey(**src, so, spec);
  origin->source = std::move(*src);
  if (o.check_origin > 0 && k.samples_total > 0) {
    origin->all = o.check_origin >= k.samples_total;
    if (!origin->all) origin->ids = RandomIds(k.samples_total, o.check_origin);
    origin->fetcher = std::make_unique<SampleFetcher>(origin->source.get(), spec, nullptr, 0);
  }
  return key;
}

}  // namespace

Status ImportEntryFromOrigin(const CacheOptions& opts, int fd, const OriginImportOptions& o,
                             TransferReport* report) {
  if (o.keep_identity && !o.source_roots.empty())
    return Status::InvalidArgument("--keep-identity and --source-root exclude each other");
  ImportOptions io;
  NodeOrigin origin;
  io.rebind = [&](const EntryKey& k) -> Result<EntryKey> {
    SSDFEED_RETURN_IF_ERROR(CheckItemsTrusted(k, o.trust_items));
    if (o.keep_identity) return k;
    return RebindKey(k, o, &origin);
  };
  if (!o.keep_identity)
    io.check_record = [&](uint64_t id, const CachedSample& r) { return origin.Check(id, r); };
  return ImportEntry(opts, fd, io, report);
}

}  // namespace ssdfeed
