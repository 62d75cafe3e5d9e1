#include "pipeline/origin_index.h"

#include "cache/capacity.h"
#include "cache/entry_files.h"

namespace ssdfeed {

namespace {

Env* EnvOf(const CacheOptions& cache) { return cache.env ? cache.env : Env::Default(); }

void AddWarning(std::string* warning, const std::string& w) {
  if (warning == nullptr) return;
  if (!warning->empty()) warning->append("; ");
  warning->append(w);
}

// The first usable index stored in an entry of the root; true when taken.
bool TakeStored(const Source& source, const CacheOptions& cache, std::string* warning) {
  Env* env = EnvOf(cache);
  RootPaths p(cache.root);
  if (!env->FileExists(p.entries) || !env->ConfineRoot(cache.root).ok()) return false;
  std::vector<std::string> names;
  if (!env->GetChildren(p.entries, &names).ok()) return false;
  std::string file = OriginIndexName(source);
  for (const auto& name : names) {
    std::string path = JoinPath(JoinPath(p.entries, name), file), bytes;
    if (!env->FileExists(path)) continue;
    Status s = ReadBoundedFile(env, path, kMaxOriginIndexBytes, &bytes);
    if (s.ok()) s = source.UseIndex(bytes);
    if (s.ok()) return true;
    // Never trusted, and removed so that the entry stores a good one again
    // (StoreIndex writes only where none is); another user's stays.
    bool removed = env->RemoveFile(path).ok();
    AddWarning(warning, path + ": not used" + (removed ? " (removed)" : "") + ", " + s.message() +
                            "; the index is built from the origin");
  }
  return false;
}

}  // namespace

std::string OriginIndexName(const Source& source) {
  return "origin-" + source.index_key() + ".index";
}

Status LoadOrBuildIndex(const Source& source, const CacheOptions& cache, std::string* warning,
                        bool spool) {
  if (source.index_key().empty()) return Status::OK();
  if (cache.root.empty()) return source.BuildIndex();
  // What a bucket's source streams to index its shards, or fetches in runs
  // for a partial entry, is kept on the cache's disk for the samples' reads:
  // each origin byte fetched once. (A root that cannot be made is reported
  // by the entry's open; the source then keeps nothing.)
  Env* env = EnvOf(cache);
  if (spool && PrepareRoot(env, cache).ok())
    source.SpoolIndexReads(env, RootPaths(cache.root).trash);
  if (TakeStored(source, cache, warning)) return Status::OK();
  return source.BuildIndex();
}

Result<std::unique_ptr<Source>> OpenIndexedSource(const std::string& uri,
                                                  const SourceOptions& options,
                                                  const CacheOptions& cache, std::string* warning) {
  SourceOptions so = options;
  so.defer_index = true;
  SSDFEED_ASSIGN_OR_RETURN(auto src, OpenSource(uri, so));
  SSDFEED_RETURN_IF_ERROR(LoadOrBuildIndex(*src, cache, warning, /*spool=*/false));
  return src;
}

void StoreIndex(const Source& source, const CacheEntry& entry, const CacheOptions& cache,
                std::string* warning) {
  if (source.index_key().empty() || entry.read_only()) return;
  Env* env = EnvOf(cache);
  std::string path = JoinPath(entry.dir(), OriginIndexName(source));
  if (env->FileExists(path)) return;
  auto index = source.SaveIndex();
  Status s = index.ok() ? env->WriteFileAtomic(path, *index, FileMode(cache)) : index.status();
  if (!s.ok()) AddWarning(warning, path + ": origin index not stored (" + s.message() + ")");
}

}  // namespace ssdfeed
