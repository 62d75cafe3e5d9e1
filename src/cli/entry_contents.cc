#include "cli/entry_contents.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "ssdfeed/defaults.h"

namespace ssdfeed::cli {

namespace {

// The identity python/ssdfeed/_tf_cache.py gives its entries:
// "tf1 key=KEY spec=DIGEST P=N part=I" and "tf1 key=KEY spec=DIGEST P=N meta".
// The key may hold spaces: read from the end.
struct TfIdentity {
  std::string cache;  // "tf1 key=KEY spec=DIGEST P=N": one tf.data cache's entries
  uint64_t part_size = 0;
  std::optional<uint64_t> part;  // nullopt: the meta entry
};

std::optional<uint64_t> ParseCount(const std::string& digits) {
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(digits);
}

std::optional<TfIdentity> ParseTfIdentity(const std::string& identity) {
  if (identity.rfind("tf1 key=", 0) != 0) return std::nullopt;
  size_t last = identity.rfind(' ');
  TfIdentity t;
  t.cache = identity.substr(0, last);
  std::string what = identity.substr(last + 1);
  size_t p = t.cache.rfind(" P=");
  if (p == std::string::npos) return std::nullopt;
  auto size = ParseCount(t.cache.substr(p + 3));
  if (!size || *size == 0) return std::nullopt;
  t.part_size = *size;
  if (what == "meta") return t;
  if (what.rfind("part=", 0) != 0) return std::nullopt;
  t.part = ParseCount(what.substr(5));
  if (!t.part) return std::nullopt;
  return t;
}

// The element count a tf.data cache's meta entry holds (item 0: one int64
// field), or nullopt when it holds none yet or cannot be read.
std::optional<uint64_t> ReadElementCount(const CacheOptions& opts, const EntryKey& key) {
  CacheOptions inspect = opts;
  inspect.record_use = false;  // listing is no use: it must not keep the entry from gc
  auto entry = CacheEntry::Open(inspect, key);
  if (!entry.ok()) return std::nullopt;
  std::string buf;
  CachedSample cs;
  if (!(*entry)->Get(0, &buf, &cs).ok()) return std::nullopt;
  std::vector<FieldView> fields;
  if (!cs.ParsedFields(&fields).ok() || fields.size() != 1 || fields[0].dtype != "<i8" ||
      fields[0].size != sizeof(int64_t))
    return std::nullopt;
  int64_t n = 0;
  std::memcpy(&n, fields[0].data, sizeof n);
  return n >= 0 ? std::optional<uint64_t>(n) : std::nullopt;
}

EntryContents Plain(const EntryInfo& e) {
  return {DescribeSpec(e.spec), e.state, e.samples_present, e.samples_total};
}

// A part's element count, complete or partial, from the cache's count.
EntryContents TfPart(const EntryInfo& e, const TfIdentity& t, std::optional<uint64_t> count) {
  EntryContents c{"tf.data elements", e.state, e.samples_present, std::nullopt};
  if (!count) {
    // Until a pass reaches the pipeline's end nobody knows how many there are.
    if (e.state == "complete") c.state = "partial";
    return c;
  }
  uint64_t first = *t.part * t.part_size;
  c.total = first >= *count ? 0 : std::min(t.part_size, *count - first);
  c.present = std::min(e.samples_present, *c.total);
  // A damaged entry's state ("broken: ...") stands.
  if (e.state == "partial" || e.state == "complete")
    c.state = c.present >= *c.total ? "complete" : "partial";
  return c;
}

}  // namespace

std::vector<EntryContents> DescribeEntries(const CacheOptions& opts,
                                           const std::vector<EntryInfo>& list) {
  std::vector<EntryContents> out;
  std::vector<std::optional<TfIdentity>> tf(list.size());
  std::map<std::string, EntryKey> metas;  // tf.data cache -> its meta entry's key
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].spec.rfind("items", 0) != 0) continue;  // not Python items
    auto key = ReadEntryKey(opts.env != nullptr ? opts.env : Env::Default(), list[i].dir);
    if (!key.ok()) continue;
    tf[i] = ParseTfIdentity(key->source_identity);
    if (tf[i] && !tf[i]->part) metas.emplace(tf[i]->cache, *key);
  }
  std::map<std::string, std::optional<uint64_t>> counts;
  for (const auto& [cache, key] : metas) counts[cache] = ReadElementCount(opts, key);
  for (size_t i = 0; i < list.size(); ++i) {
    if (!tf[i]) {
      out.push_back(Plain(list[i]));
    } else if (!tf[i]->part) {
      EntryContents c = Plain(list[i]);
      c.what = "tf.data element count";
      out.push_back(c);
    } else {
      auto n = counts.find(tf[i]->cache);
      out.push_back(TfPart(list[i], *tf[i], n == counts.end() ? std::nullopt : n->second));
    }
  }
  return out;
}

}  // namespace ssdfeed::cli
