// What `ssdfeed cache ls | gc | rm` do: list, collect and remove entries.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "cache/capacity.h"
#include "cache/entry_files.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {

namespace {

CacheOptions WithEnv(const CacheOptions& in) {
  CacheOptions o = in;
  if (o.env == nullptr) o.env = Env::Default();
  return o;
}

// skipped.json, written by `ssdfeed warm --on-error skip` after a full
// pass: the samples that cannot be prepared, so the entry counts as complete.
uint64_t SkippedCount(Env* env, const std::string& dir, uint64_t samples_total) {
  std::string path = JoinPath(dir, "skipped.json"), text;
  if (!env->FileExists(path) || !ReadBoundedFile(env, path, kMaxSkippedBytes, &text).ok()) return 0;
  auto n = ParseSkipped(text, samples_total, path);
  return n.ok() ? *n : 0;
}

// Read-only verbs confine the root (nothing in it is followed) without
// refusing it: listing an untrusted root is how one finds out what is there.
Status ConfineIfPresent(const CacheOptions& opts) {
  Status s = opts.env->ConfineRoot(opts.root);
  return s.IsNotFound() ? Status::OK() : s;
}

}  // namespace

Result<std::vector<EntryInfo>> ListEntries(const CacheOptions& in) {
  CacheOptions opts = WithEnv(in);
  RootPaths p(opts.root);
  SSDFEED_RETURN_IF_ERROR(ConfineIfPresent(opts));
  std::vector<EntryDirInfo> dirs;
  Status scan = ScanEntries(opts.env, p, opts, &dirs);
  if (!scan.ok()) return ExplainRootDenial(opts.env, opts, 1, scan);
  std::vector<EntryInfo> out;
  for (const auto& d : dirs) {
    EntryInfo e;
    e.name = d.name;
    e.dir = d.dir;
    e.bytes = d.bytes;
    e.last_used = d.last_used_ns / 1000000000;
    e.foreign = d.foreign;
    std::string text;
    Status read = ReadManifest(opts.env, d.dir, &text);
    auto key = read.ok() ? ParseEntryKey(text, "manifest damaged") : Result<EntryKey>(read);
    // One entry that cannot be read is listed as such; it must not take the
    // listing (and the exporter and labeller built on it) down with it.
    if (!key.ok()) {
      e.state = "broken: " +
                (read.IsNotFound() ? std::string("no readable manifest") : key.status().message());
      out.push_back(std::move(e));
      continue;
    }
    auto j = nlohmann::json::parse(text, nullptr, false);
    e.source_uri = key->source_uri;
    e.spec = key->spec;
    e.samples_total = key->samples_total;
    e.created =
        j.contains("created") && j["created"].is_number_integer() ? j["created"].get<int64_t>() : 0;
    e.samples_present = CountIndexed(opts.env, d.dir, e.samples_total);
    e.skipped = SkippedCount(opts.env, d.dir, e.samples_total);
    e.state = e.samples_present == e.samples_total ? "complete"
              : e.samples_present + e.skipped >= e.samples_total
                  ? "complete (" + std::to_string(e.skipped) + " skipped)"
                  : "partial";
    e.in_use = !opts.env->LockFile(JoinPath(d.dir, "use.lock"), true, false, FileMode(opts)).ok();
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_used > b.last_used; });
  return out;
}

Status RemoveEntry(const CacheOptions& in, const std::string& name) {
  CacheOptions opts = WithEnv(in);
  RootPaths p(opts.root);
  SSDFEED_RETURN_IF_ERROR(CheckRootTrusted(opts.env, opts));
  std::vector<EntryDirInfo> dirs;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(opts.env, p, opts, &dirs));
  std::vector<const EntryDirInfo*> matches;
  for (const auto& d : dirs) {
    if (d.name == name) return DeleteEntryIfUnused(opts.env, p, d);
    if (name.size() >= 4 && d.name.rfind(name, 0) == 0) matches.push_back(&d);
  }
  if (matches.size() == 1) return DeleteEntryIfUnused(opts.env, p, *matches[0]);
  if (matches.empty()) return Status::NotFound("no cache entry '" + name + "' under " + opts.root);
  std::string list;
  for (const auto* d : matches) list += " " + d->name;
  return Status::InvalidArgument("'" + name + "' matches " + std::to_string(matches.size()) +
                                 " entries:" + list + "; give more of the name");
}

Result<std::vector<std::string>> CollectGarbage(const CacheOptions& in, uint64_t max_bytes,
                                                int64_t max_age_seconds) {
  CacheOptions opts = WithEnv(in);
  RootPaths p(opts.root);
  // Deletes: only in a root whose trash/ and entries/ are what they claim.
  SSDFEED_RETURN_IF_ERROR(CheckRootTrusted(opts.env, opts));
  EmptyTrash(opts.env, p);
  std::vector<EntryDirInfo> dirs;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(opts.env, p, opts, &dirs));
  std::sort(dirs.begin(), dirs.end(),
            [](const auto& a, const auto& b) { return a.last_used_ns < b.last_used_ns; });
  uint64_t total = 0;
  for (const auto& d : dirs) total += d.bytes;
  int64_t now_ns = opts.env->NowMicros() * 1000;
  std::vector<std::string> removed;
  for (const auto& d : dirs) {
    bool too_old = max_age_seconds > 0 && now_ns - d.last_used_ns > max_age_seconds * 1000000000LL;
    bool too_big = max_bytes > 0 && total > max_bytes;
    if (!too_old && !too_big) continue;
    if (DeleteEntryIfUnused(opts.env, p, d).ok()) {
      total -= d.bytes;
      removed.push_back(d.name);
    }
  }
  return removed;
}

Result<uint64_t> RootBytes(const CacheOptions& in) {
  CacheOptions opts = WithEnv(in);
  SSDFEED_RETURN_IF_ERROR(ConfineIfPresent(opts));
  return UsedBytesSnapshot(opts);
}

Result<uint64_t> EffectiveCapacity(const CacheOptions& in) {
  if (in.capacity_bytes != 0) return in.capacity_bytes;
  CacheOptions opts = WithEnv(in);
  SSDFEED_RETURN_IF_ERROR(ConfineIfPresent(opts));
  return DefaultCapacity(opts);
}

}  // namespace ssdfeed
