// Small helpers for the files of an entry directory: modes, the manifest,
// last_used, segment names.
#pragma once

#include <string>

#include "cache/record_format.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {

inline uint32_t DirMode(const CacheOptions& o) { return o.group_shared ? 02770 : 0700; }
inline uint32_t FileMode(const CacheOptions& o) { return o.group_shared ? 0660 : 0600; }

// Bounds on what a manifest (hand-written, imported or damaged) may declare:
// every reader sizes per-sample tables by samples_total, so a larger one is
// refused where it is parsed rather than allocated (4 Gi samples is well past
// any entry one node can hold: the in-memory index alone would be 96 GiB).
constexpr uint64_t kMaxSamplesTotal = uint64_t{1} << 32;
// A manifest is a few hundred bytes; anything this large is not one.
constexpr uint64_t kMaxManifestBytes = 1u << 20;
// skipped.json lists at most every sample, each in well under 4 KiB.
constexpr uint64_t kMaxSkippedBytes = 64u << 20;

// Writes manifest.json if absent; if present, checks it belongs to key.
Status EnsureManifest(Env* env, const std::string& dir, const EntryKey& key,
                      const std::string& fingerprint, bool read_only, uint32_t mode);
// Reads manifest.json (as text) of an entry dir; a file over
// kMaxManifestBytes is Corruption, refused before it is read.
Status ReadManifest(Env* env, const std::string& dir, std::string* json_text);
// Reads a whole small file, refusing (Corruption, naming it) one over max
// bytes before reading it.
Status ReadBoundedFile(Env* env, const std::string& path, uint64_t max, std::string* out);
// The same from a manifest's text; `where` names it in errors.
Result<EntryKey> ParseEntryKey(const std::string& text, const std::string& where);
void TouchLastUsed(Env* env, const std::string& dir, uint32_t mode);
// status.json: what a person reading the entry wants to know (samples
// present, bytes, state, when). Informational; `cache ls` recomputes it.
void WriteStatus(Env* env, const std::string& dir, uint64_t present, uint64_t total, uint32_t mode);
// skipped.json's text -> how many samples it lists; Corruption (naming
// `where`) when it is not the file `warm --on-error skip` writes for an entry
// of samples_total samples.
Result<uint64_t> ParseSkipped(const std::string& text, uint64_t samples_total,
                              const std::string& where);
// "seg-<writer>-<n>.idx" -> base "seg-<writer>-<n>" when name ends in ext.
bool SegmentBaseOf(const std::string& name, const std::string& ext, std::string* base);
// What the records of the entry of key may be (docs/cache-format.md, "What a
// reader checks"). From the prepare spec its manifest records, when that
// spec is the one the fingerprint covers (key.spec, its Canonical text): the
// spec's codec, channels and output size. Otherwise (no recorded spec: an
// items entry, a C++ key of its own; or one that does not match) raw records
// only, of any shape: nothing is decoded, so nothing is sized from a shape.
cache_format::RecordRules RulesOf(const EntryKey& key);
// Counts distinct sample ids with an intact index entry (no record reads).
// Its memory follows the index files, not samples_total.
uint64_t CountIndexed(Env* env, const std::string& dir, uint64_t samples_total);

}  // namespace ssdfeed
