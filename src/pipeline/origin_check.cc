#include "pipeline/origin_check.h"

#include <cstring>

#include "pipeline/fetcher.h"

namespace ssdfeed {

namespace {

// What differs between a cached record and the freshly prepared sample; ""
// when they are the same.
std::string Difference(const CachedSample& cached, const CachedSample& origin) {
  if (cached.height != origin.height || cached.width != origin.width ||
      cached.channels != origin.channels)
    return "cached record is " + std::to_string(cached.height) + "x" +
           std::to_string(cached.width) + "x" + std::to_string(cached.channels) +
           ", the origin prepares to " + std::to_string(origin.height) + "x" +
           std::to_string(origin.width) + "x" + std::to_string(origin.channels);
  if (cached.label != origin.label)
    return "cached label " + std::to_string(cached.label) + ", the origin's is " +
           std::to_string(origin.label);
  if (std::memcmp(cached.pixels, origin.pixels, cached.bytes()) != 0)
    return "cached pixels differ from the origin's";
  return "";
}

void Note(OriginCheckReport* report, const std::string& problem) {
  if (report->problems.size() < OriginCheckReport::kMaxProblems)
    report->problems.push_back(problem);
}

}  // namespace

Status CompareWithOrigin(const Source& source, const PrepareSpec& spec, CacheEntry* entry,
                         OriginCheckReport* report) {
  if (source.size() != entry->samples_total())
    return Status::InvalidArgument(source.uri() + " has " + std::to_string(source.size()) +
                                   " samples, the entry " + std::to_string(entry->samples_total()) +
                                   ": the source changed, contents not compared");
  SampleFetcher origin(&source, spec, nullptr, 0);
  FetchScratch scratch;
  std::string buf;
  for (uint64_t id = 0; id < source.size(); ++id) {
    CachedSample cached;
    if (!entry->Get(id, &buf, &cached).ok()) continue;  // absent or corrupt: verify counts it
    CachedSample fresh;
    Status s = origin.Fetch(id, &scratch, &fresh);
    if (!s.ok()) {
      ++report->unreadable;
      Note(report, source.Describe(id) + ": sample " + std::to_string(id) + ": " + s.message());
      continue;
    }
    ++report->compared;
    std::string diff = Difference(cached, fresh);
    if (diff.empty()) continue;
    ++report->mismatched;
    Note(report, source.Describe(id) + ": sample " + std::to_string(id) + ": " + diff);
  }
  return Status::OK();
}

}  // namespace ssdfeed
