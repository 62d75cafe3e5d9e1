// Small helpers for the files of an entry directory: modes, the manifest,
// last_used, segment names.
#pragma once

#include <string>

#include "ssdfeed/cache.h"

namespace ssdfeed {

inline uint32_t DirMode(const CacheOptions& o) { return o.group_shared ? 02770 : 0700; }
inline uint32_t FileMode(const CacheOptions& o) { return o.group_shared ? 0660 : 0600; }

// Writes manifest.json if absent; if present, checks it belongs to key.
Status EnsureManifest(Env* env, const std::string& dir, const EntryKey& key,
                      const std::string& fingerprint, bool read_only, uint32_t mode);
// Reads manifest.json (as text) of an entry dir.
Status ReadManifest(Env* env, const std::string& dir, std::string* json_text);
// The same from a manifest's text; `where` names it in errors.
Result<EntryKey> ParseEntryKey(const std::string& text, const std::string& where);
void TouchLastUsed(Env* env, const std::string& dir, uint32_t mode);
// status.json: what a person reading the entry wants to know (samples
// present, bytes, state, when). Informational; `cache ls` recomputes it.
void WriteStatus(Env* env, const std::string& dir, uint64_t present, uint64_t total, uint32_t mode);
// "seg-<writer>-<n>.idx" -> base "seg-<writer>-<n>" when name ends in ext.
bool SegmentBaseOf(const std::string& name, const std::string& ext, std::string* base);
// Counts distinct sample ids with an intact index entry (no record reads).
uint64_t CountIndexed(Env* env, const std::string& dir, uint64_t samples_total);

}  // namespace ssdfeed
