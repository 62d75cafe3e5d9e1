// ItemStore (ssdfeed/items.h): an item entry driven through the one
// SampleFetcher, so refresh, counting, claims and admission are the image
// path's. Its Source is the caller's compute, handed in per Get.
#include <unistd.h>

#include <mutex>
#include <utility>

#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/items.h"
#include "ssdfeed/loader.h"
#include "util/mutex.h"

namespace ssdfeed {

// The compute of the Get running on this thread: the fetcher reads a missing
// item through Source::Read on the calling thread, so that Read finds the
// caller's compute here without the store holding any.
namespace {
thread_local const ItemCompute* current_compute = nullptr;

struct ComputeScope {
  explicit ComputeScope(const ItemCompute* c) : saved(current_compute) { current_compute = c; }
  ~ComputeScope() { current_compute = saved; }
  const ItemCompute* saved;
};
}  // namespace

class ItemStore::ComputeSource final : public Source {
 public:
  ComputeSource(uint64_t n, std::string uri, std::string identity)
      : n_(n), uri_(std::move(uri)), identity_(std::move(identity)) {}
  size_t size() const override { return n_; }
  std::string Describe(size_t id) const override { return uri_ + " item " + std::to_string(id); }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  std::vector<FieldSpec> fields() const override { return {}; }  // image-less
  std::string record_spec() const override { return kItemsRecordSpec; }

  Status Read(size_t id, EncodedSample* out) const override {
    out->bytes.clear();
    out->label = -1;
    out->fields.clear();
    if (current_compute == nullptr || !*current_compute)
      return Status::NotFound(Describe(id) + ": not cached, and nothing computes it");
    return (*current_compute)(id, &out->fields);
  }

 private:
  uint64_t n_;
  std::string uri_, identity_;
};

// What one process holds of the entry.
struct ItemStore::State {
  pid_t pid = 0;
  std::unique_ptr<CacheEntry> cache;
  std::unique_ptr<StatsPublisher> stats;
  std::unique_ptr<SampleFetcher> fetcher;
  Mutex mu;
  std::vector<std::unique_ptr<FetchScratch>> scratch GUARDED_BY(mu);  // a pool: one per caller
  std::vector<std::string> skipped GUARDED_BY(mu);

  std::unique_ptr<FetchScratch> Take() {
    MutexLock l(&mu);
    if (scratch.empty()) return std::make_unique<FetchScratch>();
    auto s = std::move(scratch.back());
    scratch.pop_back();
    return s;
  }
  void Give(std::unique_ptr<FetchScratch> s) {
    MutexLock l(&mu);
    scratch.push_back(std::move(s));
  }
};

namespace {
// A forked parent's state is never released in the child: its writer slot,
// claims and files are the parent's (a release would sync and unlock them).
template <typename T>
void Abandon(std::shared_ptr<T>* p) {
  (void)new std::shared_ptr<T>(std::move(*p));
}

// The section of a record or computed sample, copied so that it outlives
// the fetcher's scratch, and parsed into views.
Status CopyFields(const CachedSample& cs, ItemFields* out) {
  out->skipped = false;
  out->section.assign(cs.fields.data(), cs.fields.size());
  CachedSample own;
  own.fields = out->section;
  return own.ParsedFields(&out->views);
}
}  // namespace

struct ItemStore::Impl {
  std::string root;
  ItemStoreOptions options;
  std::unique_ptr<ComputeSource> source;
  Mutex mu;  // state: replaced after a fork
  std::shared_ptr<State> state GUARDED_BY(mu);

  Status OpenState() REQUIRES(mu);
  ~Impl() {
    MutexLock l(&mu);
    if (state && state->pid != getpid()) Abandon(&state);
  }
};

ItemStore::ItemStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), size_(impl_->source->size()), uri_(impl_->source->uri()) {}

ItemStore::~ItemStore() = default;

Result<std::unique_ptr<ItemStore>> ItemStore::Open(const std::string& root, const std::string& uri,
                                                   const std::string& identity, uint64_t size,
                                                   const ItemStoreOptions& options) {
  if (root.empty()) return Status::InvalidArgument("ItemStore: root is empty");
  if (!(options.claim_wait_seconds >= 0))
    return Status::InvalidArgument("ItemStore: claim_wait_seconds must be >= 0");
  auto impl = std::make_unique<Impl>();
  impl->root = root;
  impl->options = options;
  impl->source = std::make_unique<ComputeSource>(size, uri, identity);
  {
    MutexLock l(&impl->mu);
    SSDFEED_RETURN_IF_ERROR(impl->OpenState());
  }
  return std::unique_ptr<ItemStore>(new ItemStore(std::move(impl)));
}

Status ItemStore::Impl::OpenState() {
  CacheOptions opts;
  opts.root = root;
  opts.capacity_bytes = options.capacity_bytes;
  opts.group_shared = options.group_shared;
  opts.claim_wait_seconds = options.claim_wait_seconds;
  auto entry = CacheEntry::Open(opts, MakeEntryKey(*source, SourceOptions{}, DefaultPrepareSpec()));
  SSDFEED_RETURN_IF_ERROR(entry.status());
  auto st = std::make_shared<State>();
  st->pid = getpid();
  st->cache = std::move(entry).value();
  std::string warning;
  st->stats = StatsPublisher::Create(nullptr, opts, Basename(st->cache->dir()), &warning);
  if (!warning.empty()) Env::Default()->Warn(warning);
  st->fetcher =
      std::make_unique<SampleFetcher>(source.get(), DefaultPrepareSpec(), st->cache.get(),
                                      options.claim_wait_seconds, st->stats.get(), true, nullptr);
  state = std::move(st);
  return Status::OK();
}

Result<std::shared_ptr<ItemStore::State>> ItemStore::Current() {
  MutexLock l(&impl_->mu);
  if (impl_->state->pid != getpid()) {
    Abandon(&impl_->state);
    SSDFEED_RETURN_IF_ERROR(impl_->OpenState());
  }
  return impl_->state;
}

Status ItemStore::CheckIndex(uint64_t i) const {
  if (i < size_) return Status::OK();
  return Status::InvalidArgument("item " + std::to_string(i) + " of an entry of " +
                                 std::to_string(size_) + " items");
}

std::string ItemStore::fingerprint() const {
  return MakeEntryKey(*impl_->source, SourceOptions{}, DefaultPrepareSpec()).fingerprint();
}

std::string ItemStore::Describe(uint64_t i) const { return impl_->source->Describe(i); }

Status ItemStore::Get(uint64_t i, const ItemCompute& compute, ItemFields* out) {
  SSDFEED_RETURN_IF_ERROR(CheckIndex(i));
  auto cur = Current();
  SSDFEED_RETURN_IF_ERROR(cur.status());
  State& s = **cur;
  auto scratch = s.Take();
  CachedSample cs;
  Status st;
  {
    ComputeScope scope(&compute);
    st = compute ? s.fetcher->Fetch(i, scratch.get(), &cs)
                 : s.fetcher->Lookup(i, scratch.get(), &cs);
  }
  if (st.ok()) st = CopyFields(cs, out);
  s.Give(std::move(scratch));
  if (st.ok() || impl_->options.on_error != OnError::kSkip || !compute) return st;
  s.fetcher->stats().Add(Ctr::kSkipped);
  out->views.clear();
  out->skipped = true;
  MutexLock l(&s.mu);
  s.skipped.push_back(st.message());
  return Status::OK();
}

// Get without a compute is the lookup (and never counts a skip).
Status ItemStore::Lookup(uint64_t i, ItemFields* out) { return Get(i, ItemCompute{}, out); }

Status ItemStore::Put(uint64_t i, const std::vector<EncodedField>& fields, bool* stored) {
  *stored = false;
  SSDFEED_RETURN_IF_ERROR(CheckIndex(i));
  auto cur = Current();
  SSDFEED_RETURN_IF_ERROR(cur.status());
  State& s = **cur;
  auto scratch = s.Take();
  Status st = s.fetcher->Store(i, fields, scratch.get(), stored);
  s.Give(std::move(scratch));
  return st;
}

uint64_t ItemStore::Present() {
  auto cur = Current();
  if (!cur.ok()) return 0;  // the child's reopen failed: it holds nothing
  State& s = **cur;
  s.cache->Refresh().IgnoreError();  // a failure only hides others' newest records
  return s.cache->samples_present();
}

ItemStoreStats ItemStore::Stats() {
  auto cur = Current();
  if (!cur.ok()) return {};  // the child's reopen failed: nothing counted
  State& s = **cur;
  s.fetcher->SyncCacheCounters();
  ItemStoreStats out;
  out.snapshot = s.fetcher->stats().Snapshot();
  {
    MutexLock l(&s.mu);
    out.skipped_items = s.skipped;
  }
  out.cache_dir = s.cache->dir();
  out.admitting = s.cache->admitting();
  out.cache_warning = s.cache->warning();
  out.stats_file = s.stats->path();
  return out;
}

}  // namespace ssdfeed
