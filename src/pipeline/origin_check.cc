#include "pipeline/origin_check.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "cache/field_section.h"
#include "pipeline/fetcher.h"

namespace ssdfeed {

namespace {

// The first field of a that b lacks or holds otherwise; "" if none.
std::string FirstFieldDiff(const std::vector<FieldView>& a, const std::vector<FieldView>& b) {
  for (const FieldView& x : a) {
    // Elements compared, whatever the codec: the origin's sample is raw,
    // its record may hold a mask as runs.
    std::string xs, ys;
    std::string_view xd = cache_format::RawData(x, &xs);
    auto same = [&x, &xd, &ys](const FieldView& y) {
      return y.name == x.name && y.kind == x.kind && y.dtype == x.dtype && y.shape == x.shape &&
             cache_format::RawData(y, &ys) == xd;
    };
    if (std::none_of(b.begin(), b.end(), same)) return std::string(x.name);
  }
  return "";
}

std::string FieldsDifference(std::string_view cached, std::string_view origin) {
  if (cached == origin) return "";
  std::vector<FieldView> c, o;
  std::string bad = cache_format::ParseFields(cached, &c);
  if (!bad.empty()) return "cached field section: " + bad;
  if (!cache_format::ParseFields(origin, &o).empty())
    return "cached fields differ from the origin's";
  std::string name = FirstFieldDiff(c, o);
  if (!name.empty()) return "cached field " + name + " differs from the origin's";
  name = FirstFieldDiff(o, c);
  if (!name.empty()) return "the origin's field " + name + " is not in the cached record";
  return "";  // the same fields (a section of none is stored as none)
}

}  // namespace

std::string SampleDifference(const CachedSample& cached, const CachedSample& origin) {
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
  return FieldsDifference(cached.fields, origin.fields);
}

namespace {

// Shared by the threads of one check: each Run() takes the next id until none
// is left; results meet in report_ under mu_.
class Comparer {
 public:
  Comparer(const Source& source, const PrepareSpec& spec, CacheEntry* entry)
      : source_(source), origin_(&source, spec, nullptr, 0), entry_(entry) {}

  void Run(std::atomic<uint64_t>* next) {
    FetchScratch scratch;
    std::string buf;
    for (uint64_t id = next->fetch_add(1); id < source_.size(); id = next->fetch_add(1)) {
      CachedSample cached;
      if (!entry_->Get(id, &buf, &cached).ok()) continue;  // absent or corrupt: verify counts it
      CachedSample fresh;
      Status s = origin_.Fetch(id, &scratch, &fresh);
      std::string diff = s.ok() ? SampleDifference(cached, fresh) : s.message();
      std::lock_guard<std::mutex> l(mu_);
      if (!s.ok()) {
        ++report_.unreadable;
      } else {
        ++report_.compared;
        if (!diff.empty()) ++report_.mismatched;
      }
      if (!diff.empty()) Note(id, diff);
    }
  }

  OriginCheckReport TakeReport() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& p : problems_) report_.problems.push_back(std::move(p.second));
    return std::move(report_);
  }

 private:
  void Note(uint64_t id, const std::string& what) {
    // Keeps the lowest ids, so the report does not depend on thread timing.
    problems_.emplace_back(id,
                           source_.Describe(id) + ": sample " + std::to_string(id) + ": " + what);
    std::sort(problems_.begin(), problems_.end());
    if (problems_.size() > OriginCheckReport::kMaxProblems) problems_.pop_back();
  }

  const Source& source_;
  SampleFetcher origin_;
  CacheEntry* entry_;
  std::mutex mu_;  // guards report_ and problems_
  OriginCheckReport report_;
  std::vector<std::pair<uint64_t, std::string>> problems_;  // (id, problem), lowest ids
};

}  // namespace

Status CompareWithOrigin(const Source& source, const PrepareSpec& spec, CacheEntry* entry,
                         int threads, OriginCheckReport* report) {
  if (source.size() != entry->samples_total())
    return Status::InvalidArgument(source.uri() + " has " + std::to_string(source.size()) +
                                   " samples, the entry " + std::to_string(entry->samples_total()) +
                                   ": the source changed, contents not compared");
  Comparer comparer(source, spec, entry);
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(threads, 1); ++t) pool.emplace_back([&] { comparer.Run(&next); });
  comparer.Run(&next);
  for (auto& t : pool) t.join();
  *report = comparer.TakeReport();
  return Status::OK();
}

}  // namespace ssdfeed
