// ItemStream (ssdfeed/items.h): items of a length not known up front, kept
// in part entries of part_size items each, plus a one-item meta entry that
// records the length once a fill has reached the end.
#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "ssdfeed/items.h"
#include "util/mutex.h"

namespace ssdfeed {

namespace {

// The length as the meta item's one field: "0", a .npy int64 scalar (what
// numpy.save writes for np.int64(n): the data on a 64-byte boundary).
EncodedField LengthField(uint64_t n) {
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ').append("\n");
  std::string npy("\x93NUMPY\x01\x00", 8);
  npy.push_back(static_cast<char>(header.size() & 0xff));
  npy.push_back(static_cast<char>(header.size() >> 8));
  npy += header;
  auto v = static_cast<int64_t>(n);
  npy.append(reinterpret_cast<const char*>(&v), sizeof v);
  return {"0", FieldKind::kArray, std::move(npy), false, ""};
}

Result<uint64_t> ParseLength(const ItemFields& f, const std::string& where) {
  if (f.views.size() != 1 || f.views[0].name != "0" || f.views[0].dtype != "<i8" ||
      !f.views[0].shape.empty() || f.views[0].size != sizeof(int64_t))
    return Status::Corruption(where + ": the meta item is not one int64 scalar field \"0\"");
  int64_t n = 0;
  std::memcpy(&n, f.views[0].data, sizeof n);
  if (n < 0) return Status::Corruption(where + ": a negative length " + std::to_string(n));
  return static_cast<uint64_t>(n);
}

}  // namespace

struct ItemStream::Impl {
  std::string root, uri, identity;
  ItemStreamOptions options;
  Mutex mu;
  // Opened parts; nullptr: tried, could not be had (not tried again).
  std::map<uint64_t, std::unique_ptr<ItemStore>> parts GUARDED_BY(mu);
  std::unique_ptr<ItemStore> meta GUARDED_BY(mu);
  std::string unavailable GUARDED_BY(mu);  // why the first one could not be had

  std::string Identity(const std::string& what) const {
    return identity + " P=" + std::to_string(options.part_size) + " " + what;
  }
  // The entry of `what` of `size` items, or nullptr when it cannot be had
  // now (Busy: full of entries in use, or locked; NoSpace: no room for a new
  // one under the capacity); other errors returned.
  Result<std::unique_ptr<ItemStore>> OpenEntry(const std::string& what, uint64_t size)
      REQUIRES(mu) {
    auto r = ItemStore::Open(root, uri, Identity(what), size, options.store);
    if (r.ok() || !(r.status().IsBusy() || r.status().IsNoSpace())) return r;
    if (unavailable.empty()) unavailable = r.status().message();
    return std::unique_ptr<ItemStore>();
  }
};

ItemStream::ItemStream(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), part_size_(impl_->options.part_size) {}

ItemStream::~ItemStream() = default;

Result<std::unique_ptr<ItemStream>> ItemStream::Open(const std::string& root,
                                                     const std::string& uri,
                                                     const std::string& identity,
                                                     const ItemStreamOptions& options) {
  if (root.empty()) return Status::InvalidArgument("ItemStream: root is empty");
  if (options.part_size == 0) return Status::InvalidArgument("ItemStream: part_size is 0");
  auto impl = std::make_unique<Impl>();
  impl->root = root;
  impl->uri = uri;
  impl->identity = identity;
  impl->options = options;
  return std::unique_ptr<ItemStream>(new ItemStream(std::move(impl)));
}

Result<ItemStore*> ItemStream::Part(uint64_t p) {
  MutexLock l(&impl_->mu);
  auto it = impl_->parts.find(p);
  if (it == impl_->parts.end()) {
    auto r = impl_->OpenEntry("part=" + std::to_string(p), part_size_);
    SSDFEED_RETURN_IF_ERROR(r.status());
    it = impl_->parts.emplace(p, std::move(r).value()).first;
  }
  if (!it->second) return Status::Busy(impl_->unavailable);
  return it->second.get();
}

Result<ItemStore*> ItemStream::Meta() {
  // Part 0 first: a new entry's writer reserves a chunk of the root's
  // capacity, which under a small capacity the items should have.
  Part(0).status().IgnoreError();  // one that cannot be had is the items' concern
  MutexLock l(&impl_->mu);
  if (!impl_->meta) {  // tried again each time: it is what says "complete"
    auto r = impl_->OpenEntry("meta", 1);
    SSDFEED_RETURN_IF_ERROR(r.status());
    impl_->meta = std::move(r).value();
  }
  if (!impl_->meta) return Status::Busy(impl_->unavailable);
  return impl_->meta.get();
}

Status ItemStream::Get(uint64_t i, const ItemCompute& compute, ItemFields* out) {
  auto part = Part(i / part_size_);
  SSDFEED_RETURN_IF_ERROR(part.status());
  uint64_t first = i / part_size_ * part_size_;
  ItemCompute local;
  if (compute)
    local = [&compute, first](uint64_t k, std::vector<EncodedField>* fields) {
      return compute(first + k, fields);
    };
  return (*part)->Get(i % part_size_, local, out);
}

Status ItemStream::Lookup(uint64_t i, ItemFields* out) { return Get(i, ItemCompute{}, out); }

Status ItemStream::Put(uint64_t i, const std::vector<EncodedField>& fields, bool* stored) {
  *stored = false;
  auto part = Part(i / part_size_);
  SSDFEED_RETURN_IF_ERROR(part.status());
  return (*part)->Put(i % part_size_, fields, stored);
}

Result<uint64_t> ItemStream::Length() {
  auto meta = Meta();
  SSDFEED_RETURN_IF_ERROR(meta.status());
  ItemFields f;
  SSDFEED_RETURN_IF_ERROR((*meta)->Lookup(0, &f));
  return ParseLength(f, (*meta)->Describe(0));
}

Status ItemStream::Finish(uint64_t n) {
  auto meta = Meta();
  SSDFEED_RETURN_IF_ERROR(meta.status());
  bool stored = false;  // not stored: present already, or not admitted
  return (*meta)->Put(0, {LengthField(n)}, &stored);
}

uint64_t ItemStream::Present(uint64_t n) {
  uint64_t present = 0;
  for (uint64_t p = 0; p * part_size_ < n; ++p) {
    auto part = Part(p);
    if (part.ok()) present += std::min((*part)->Present(), n - p * part_size_);
  }
  return present;
}

bool ItemStream::Complete() {
  auto n = Length();
  return n.ok() && Present(*n) >= *n;
}

ItemStoreStats ItemStream::Stats() {
  std::vector<ItemStore*> parts;
  {
    MutexLock l(&impl_->mu);
    for (auto& [p, store] : impl_->parts)
      if (store) parts.push_back(store.get());
  }
  ItemStoreStats out;
  for (ItemStore* store : parts) {
    ItemStoreStats st = store->Stats();
    out.snapshot.Add(st.snapshot);
    out.skipped_items.insert(out.skipped_items.end(), st.skipped_items.begin(),
                             st.skipped_items.end());
    out.admitting = out.admitting && st.admitting;
    if (out.cache_dir.empty()) out.cache_dir = st.cache_dir;
    if (out.stats_file.empty()) out.stats_file = st.stats_file;
    if (out.cache_warning.empty()) out.cache_warning = st.cache_warning;
  }
  return out;
}

std::string ItemStream::unavailable() {
  MutexLock l(&impl_->mu);
  return impl_->unavailable;
}

}  // namespace ssdfeed
