#include "cache/entry_files.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "cache/record_format.h"

namespace ssdfeed {

cache_format::RecordRules RulesOf(const EntryKey& key) {
  cache_format::RecordRules r;  // raw, any shape
  Result<PrepareSpec> parsed = PrepareSpec::FromJson(key.prepare_json);
  if (!parsed.ok() || parsed->Canonical() != key.spec) return r;
  const PrepareSpec& spec = *parsed;
  r.codec = static_cast<uint8_t>(spec.codec);
  r.channels = static_cast<uint8_t>(spec.channels());
  if (spec.crop_h > 0) {  // the centre crop is the output (a smaller image is refused)
    r.height = static_cast<uint16_t>(spec.crop_h);
    r.width = static_cast<uint16_t>(spec.crop_w);
  } else if (spec.resize_h > 0) {
    r.height = static_cast<uint16_t>(spec.resize_h);
    r.width = static_cast<uint16_t>(spec.resize_w);
  } else if (spec.resize_short > 0) {  // the shorter side is resize_short (less under max_long)
    r.max_short = static_cast<uint32_t>(spec.resize_short);
    if (spec.max_long > 0) r.max_long = static_cast<uint32_t>(spec.max_long);
  } else {
    // Origin sizes: no decoder the pipeline runs makes a larger image.
    r.max_pixels = DecodeLimits{}.max_pixels;
  }
  return r;
}

// A manifest is a few hundred bytes. Its size is checked before it is read:
// a sparse one (any member of a group-shared root may make one) must not
// cost its size in memory in every ls, exporter scrape and job.
Status ReadManifest(Env* env, const std::string& dir, std::string* json_text) {
  constexpr uint64_t kMaxManifestBytes = 1 << 20;
  std::string path = JoinPath(dir, "manifest.json");
  SSDFEED_ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(path));
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > kMaxManifestBytes)
    return Status::Corruption(path + ": " + std::to_string(size) +
                              " bytes, too large for a manifest");
  json_text->resize(size);
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(file->Read(0, size, json_text->data(), &got));
  json_text->resize(got);
  return Status::OK();
}

Status ReadBoundedFile(Env* env, const std::string& path, uint64_t max, std::string* out) {
  SSDFEED_ASSIGN_OR_RETURN(auto f, env->NewRandomAccessFile(path));
  SSDFEED_ASSIGN_OR_RETURN(uint64_t size, f->Size());
  if (size > max)
    return Status::Corruption(path + ": " + std::to_string(size) + " bytes, more than the " +
                              std::to_string(max) + " such a file may hold; not read");
  out->resize(static_cast<size_t>(size));
  size_t got = 0;
  SSDFEED_RETURN_IF_ERROR(f->Read(0, out->size(), out->data(), &got));
  out->resize(got);
  return Status::OK();
}

Status EnsureManifest(Env* env, const std::string& dir, const EntryKey& key,
                      const std::string& fingerprint, bool read_only, uint32_t mode) {
  std::string path = JoinPath(dir, "manifest.json");
  std::string text;
  Status s = ReadManifest(env, dir, &text);
  if (s.ok()) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    // Valid JSON of the wrong shape is as damaged as invalid JSON (and
    // nlohmann's value() would throw on it).
    if (!j.is_object() || !j["fingerprint"].is_string() ||
        !j["samples_total"].is_number_unsigned() ||
        j["fingerprint"].get<std::string>() != fingerprint ||
        j["samples_total"].get<uint64_t>() != key.samples_total)
      return Status::Corruption(path + ": manifest damaged or not of this entry");
    return Status::OK();
  }
  if (!s.IsNotFound()) return s;
  if (read_only) return Status::Corruption(path + ": missing in an entry we may not write");
  nlohmann::json j = {
      {"format_version", cache_format::kFormatVersion},
      {"fingerprint", fingerprint},
      {"source", key.source_uri},
      {"source_identity", key.source_identity},
      {"spec", key.spec},
      {"prepare", nlohmann::json::parse(key.prepare_json, nullptr, false)},
      {"samples_total", key.samples_total},
      {"created", env->NowMicros() / 1000000},
  };
  return env->WriteFileAtomic(path, j.dump(2) + "\n", mode);
}

Result<EntryKey> ReadEntryKey(Env* env, const std::string& dir) {
  std::string text;
  SSDFEED_RETURN_IF_ERROR(ReadManifest(env, dir, &text));
  return ParseEntryKey(text, dir + "/manifest.json");
}

Result<EntryKey> ParseEntryKey(const std::string& text, const std::string& where) {
  auto m = nlohmann::json::parse(text, nullptr, false);
  if (!m.is_object()) return Status::Corruption(where + ": not a JSON object");
  EntryKey key;
  auto str = [&](const char* k) {
    return m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : "";
  };
  key.source_uri = str("source");
  key.source_identity = str("source_identity");
  key.spec = str("spec");
  if (!m.contains("samples_total") || !m["samples_total"].is_number_unsigned())
    return Status::Corruption(where + ": no samples_total");
  key.samples_total = m["samples_total"].get<uint64_t>();
  if (key.samples_total > kMaxSamplesTotal)
    return Status::Corruption(where + ": samples_total " + std::to_string(key.samples_total) +
                              " is out of range (at most " + std::to_string(kMaxSamplesTotal) +
                              ")");
  key.prepare_json = m.contains("prepare") ? m["prepare"].dump() : "{}";
  return key;
}

void TouchLastUsed(Env* env, const std::string& dir, uint32_t mode) {
  // Its mtime is what LRU eviction orders by; content is for people.
  // Advisory (an LRU order): not worth an fsync on every job start, nor a
  // failed job when the write fails (the entry then just looks older).
  (void)env->WriteFileAtomic(JoinPath(dir, "last_used"),
                             std::to_string(env->NowMicros() / 1000000) + "\n", mode,
                             /*durable=*/false);
}

void WriteStatus(Env* env, const std::string& dir, uint64_t present, uint64_t total,
                 uint32_t mode) {
  std::vector<std::string> names;
  uint64_t bytes = 0;
  if (env->GetChildren(dir, &names).ok())
    for (const auto& n : names) {
      auto fi = env->Lstat(JoinPath(dir, n));
      if (fi.ok() && !fi->is_dir) bytes += fi->size;
    }
  nlohmann::json j = {{"samples_present", present},
                      {"samples_total", total},
                      {"bytes", bytes},
                      {"state", present == total ? "complete" : "partial"},
                      {"updated", env->NowMicros() / 1000000}};
  // Informational only (no code reads it back): a failed write
  // is no reason to fail the caller.
  (void)env->WriteFileAtomic(JoinPath(dir, "status.json"), j.dump(2) + "\n", mode,
                             /*durable=*/false);
}

Result<uint64_t> ParseSkipped(const std::string& text, uint64_t samples_total,
                              const std::string& where) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::Corruption(where + ": " + why); };
  if (!j.is_object() || !j.contains("skipped") || !j["skipped"].is_array())
    return bad("no 'skipped' list");
  if (!j.contains("samples_total") || !j["samples_total"].is_number_unsigned() ||
      j["samples_total"].get<uint64_t>() != samples_total)
    return bad("not written for an entry of " + std::to_string(samples_total) + " samples");
  // Distinct ids in range: a repeated or foreign id must not make a partial
  // entry look complete.
  std::vector<uint64_t> ids;
  for (const auto& s : j["skipped"]) {
    if (!s.is_object() || !s.contains("id") || !s["id"].is_number_unsigned() ||
        s["id"].get<uint64_t>() >= samples_total)
      return bad("a listed sample without a valid id");
    ids.push_back(s["id"].get<uint64_t>());
  }
  std::sort(ids.begin(), ids.end());
  return static_cast<uint64_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

bool SegmentBaseOf(const std::string& name, const std::string& ext, std::string* base) {
  if (name.rfind("seg-", 0) != 0 || name.size() <= ext.size() ||
      name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  *base = name.substr(0, name.size() - ext.size());
  return true;
}

namespace {

// The sample ids of one segment's intact index entries. As SegmentIndex
// reads it: no further than the .dat could hold entries for (one record
// header each) and in bounded chunks, so a sparse .idx (any member of a
// group-shared root may plant one) never becomes an allocation.
void IndexedIds(Env* env, const std::string& dir, const std::string& base, uint64_t samples_total,
                std::vector<uint64_t>* ids) {
  auto idx = env->NewRandomAccessFile(JoinPath(dir, base + ".idx"));
  auto dat = env->Stat(JoinPath(dir, base + ".dat"));
  if (!idx.ok() || !dat.ok() || !dat->is_regular) return;
  auto size = (*idx)->Size();
  if (!size.ok()) return;
  constexpr uint64_t kEntry = cache_format::kIndexEntrySize;
  uint64_t end =
      std::min(*size / kEntry * kEntry, (dat->size / cache_format::kRecordHeaderSize + 1) * kEntry);
  std::string buf;
  for (uint64_t pos = 0; pos < end;) {
    buf.resize(std::min<uint64_t>(end - pos, 21846 * kEntry));  // ~1 MiB
    size_t got = 0;
    if (!(*idx)->Read(pos, buf.size(), buf.data(), &got).ok() || got < kEntry) return;
    for (size_t off = 0; off + kEntry <= got; off += kEntry) {
      cache_format::IndexEntry e;
      if (!cache_format::DecodeIndexEntry(buf.data() + off, &e)) continue;
      // Subtracted, not added: the offset comes from the file.
      if (e.sample_id >= samples_total || e.record_len > dat->size ||
          e.offset > dat->size - e.record_len)
        continue;
      ids->push_back(e.sample_id);
    }
    pos += got / kEntry * kEntry;
  }
}

}  // namespace

uint64_t CountIndexed(Env* env, const std::string& dir, uint64_t samples_total) {
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return 0;
  // Distinct ids by sorting what the files hold, never a bitmap of
  // samples_total (a manifest's number: near 2^64, its word count wraps).
  std::vector<uint64_t> ids;
  for (const auto& name : names) {
    std::string base;
    if (SegmentBaseOf(name, ".idx", &base)) IndexedIds(env, dir, base, samples_total, &ids);
  }
  std::sort(ids.begin(), ids.end());
  return static_cast<uint64_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

}  // namespace ssdfeed
