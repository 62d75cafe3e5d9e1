// Python items in the cache: a Source backed by a Python callable
// (ItemSource), and ItemEntry, the per-item get/lookup/put that
// ssdfeed.cache() and ssdfeed.tf.cache() build on. Both go through the same
// SampleFetcher and CacheEntry as every image entry: claims shared with
// other processes, capacity, checksums and metrics come with them.
//
// The GIL is held only to call compute and to build the Python results; the
// cache I/O runs without it. An exception compute raises is kept (as the
// exception object) and raised again, with the item's index added, by the
// binding call whose Status reports it (ThrowIfError: ItemEntry.get or a
// Loader's next), so the user sees their own exception type.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cache/field_section.h"
#include "image/field_prepare.h"
#include "pipeline/entry_key.h"
#include "pipeline/fetcher.h"
#include "python/src/bindings.h"
#include "ssdfeed/defaults.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

// The record layout of item entries: fields only (arrays as parsed .npy,
// bytes as given), no pixels. Part of every item entry's key: a change to
// what an item's record holds must change it.
constexpr const char* kItemsSpec = "items1";

// Exceptions compute raised, waiting for the binding call that reports
// them. Touched only with the GIL held. Heap-held and never freed: a static
// would drop Python objects after the interpreter is gone.
struct Stashed {
  std::string tag;  // "<uri> item <i>:", how the Status message starts
  uint64_t item = 0;
  nb::object exc;
};
std::deque<Stashed>& Stash() {
  static auto* stash = new std::deque<Stashed>();
  return *stash;
}
// Under on_error=skip nobody takes them: keep only the newest.
constexpr size_t kMaxStashed = 64;

std::string Tag(const std::string& uri, uint64_t id) {
  return uri + " item " + std::to_string(id) + ":";
}

void StashException(std::string tag, uint64_t item, nb::object exc) {
  auto& s = Stash();
  s.push_back({std::move(tag), item, std::move(exc)});
  while (s.size() > kMaxStashed) s.pop_front();
}

// Drops what compute raised for tag (a skipped item).
void DropStashed(const std::string& tag) {
  auto& s = Stash();
  for (auto it = s.begin(); it != s.end();) it = it->tag == tag ? s.erase(it) : std::next(it);
}

// The index goes into the message when the exception's str() is its one
// string argument (most exceptions), else into a note (Python 3.11+).
// Best effort: an exception whose args or notes cannot be set is raised as
// it is rather than replaced by that failure.
void AddIndex(nb::handle exc, uint64_t item) {
  std::string where = " (item " + std::to_string(item) + ")";
  try {
    nb::object base_str = nb::module_::import_("builtins").attr("BaseException").attr("__str__");
    nb::object args = exc.attr("args");
    bool plain = nb::len(args) == 1 && nb::isinstance<nb::str>(args[0]) &&
                 exc.type().attr("__str__").is(base_str);
    if (plain) {
      std::string msg = nb::cast<std::string>(args[0]);
      if (msg.size() < where.size() || msg.compare(msg.size() - where.size(), where.size(), where))
        exc.attr("args") = nb::make_tuple(nb::str((msg + where).c_str()));
    } else if (nb::hasattr(exc, "add_note")) {
      exc.attr("add_note")(("ssdfeed: raised while computing" + where).c_str());
    }
  } catch (nb::python_error& e) {
    e.restore();
    PyErr_Clear();
  } catch (const std::exception&) {  // a str that is not UTF-8
  }
}

}  // namespace

bool RaiseStashed(const Status& s) {
  auto& stash = Stash();
  const std::string& msg = s.message();
  for (auto it = stash.rbegin(); it != stash.rend(); ++it) {
    if (msg.find(it->tag) == std::string::npos) continue;
    nb::object exc = std::move(it->exc);
    uint64_t item = it->item;
    stash.erase(std::next(it).base());
    AddIndex(exc, item);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    return true;
  }
  return false;
}

namespace {

// A thread that takes the GIL while the interpreter finalizes is ended
// where it stands (no unwinding a C++ worker survives); loaders are stopped
// at exit (ssdfeed._item_loader), this catches a stray late read.
bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// A source whose item i is what compute(i) returns: [(name, kind, payload)],
// kind a FieldKind (5 array: payload .npy bytes; 6 bytes: as they are).
// Image-less: the fetcher stores and serves its fields only.
class ItemSource final : public Source {
 public:
  // skip: a loader skips failing items (on_error=skip): their exceptions
  // are named on stderr instead of kept for raising.
  ItemSource(size_t n, std::string uri, std::string identity, std::vector<FieldSpec> fields,
             nb::object compute, bool skip = false)
      : n_(n),
        uri_(std::move(uri)),
        identity_(std::move(identity)),
        fields_(std::move(fields)),
        compute_(std::move(compute)),
        skip_(skip) {}
  ~ItemSource() override {
    // The last owner may be a loader worker or a destructor without the GIL.
    if (nb::is_alive()) {
      nb::gil_scoped_acquire gil;
      compute_.reset();
    } else {
      compute_.release();  // the interpreter is gone: nothing to decrement
    }
  }

  size_t size() const override { return n_; }
  std::string Describe(size_t id) const override { return uri_ + " item " + std::to_string(id); }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  std::vector<FieldSpec> fields() const override { return fields_; }
  std::string record_spec() const override { return kItemsSpec; }
  bool has_compute() const { return compute_.is_valid() && !compute_.is_none(); }
  // For Python's cycle collector: compute is often a bound method of the
  // dataset that holds this entry.
  PyObject* compute_ptr() const { return compute_.ptr(); }
  void DropCompute() { compute_.reset(); }

  Status Read(size_t id, EncodedSample* out) const override {
    if (!has_compute())
      return Status::NotFound(Tag(uri_, id) + " not cached, and this entry computes nothing");
    if (!nb::is_alive() || Finalizing())
      return Status::Aborted(Tag(uri_, id) + " Python is shutting down");
    nb::gil_scoped_acquire gil;
    out->bytes.clear();
    out->label = -1;
    out->fields.clear();
    try {
      nb::object fn = compute_;  // owned for the call: a cycle collection may drop compute_
      nb::object r = fn(id);
      return ToFields(id, r, &out->fields);
    } catch (nb::python_error& e) {
      nb::object exc = nb::borrow(e.value());
      std::string tag = Tag(uri_, id), what = Explain(exc);
      if (skip_)
        Env::Default()->Warn(tag + " skipped (on_error=skip): " + what);
      else
        StashException(tag, id, std::move(exc));
      return Status::Aborted(tag + " compute raised " + what);
    } catch (const std::exception& e) {  // nothing may leave a loader's worker thread
      return Status::InvalidArgument(Tag(uri_, id) + " compute's result: " + e.what());
    }
  }

  // "ValueError: bad file", for the Status (the exception itself is kept).
  static std::string Explain(nb::handle exc) {
    std::string what = nb::type_name(exc.type()).c_str();
    try {
      what += ": " + nb::cast<std::string>(nb::str(exc));
    } catch (nb::python_error& e) {  // a __str__ that raises
      e.restore();
      PyErr_Clear();
    } catch (const std::exception&) {  // a str that is not UTF-8
    }
    return what;
  }

  // compute's result: a list of (name, kind, payload) tuples.
  Status ToFields(size_t id, nb::handle r, std::vector<EncodedField>* out) const {
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument(Tag(uri_, id) + " compute returned " + why +
                                     "; want a list of (name, kind, bytes)");
    };
    if (!nb::isinstance<nb::list>(r) && !nb::isinstance<nb::tuple>(r))
      return bad(nb::type_name(r.type()).c_str());
    for (nb::handle t : r) {
      if (!nb::isinstance<nb::tuple>(t) || nb::len(t) != 3) return bad("an element not a 3-tuple");
      EncodedField f;
      if (!nb::try_cast(t[0], f.name)) return bad("a name that is not a str");
      int kind = -1;
      if (!nb::try_cast(t[1], kind) || (kind != static_cast<int>(FieldKind::kArray) &&
                                        kind != static_cast<int>(FieldKind::kBytes)))
        return bad("field '" + f.name + "' of kind " + nb::cast<std::string>(nb::repr(t[1])) +
                   " (5: array, 6: bytes)");
      f.kind = static_cast<FieldKind>(kind);
      nb::handle p = t[2];
      if (!nb::isinstance<nb::bytes>(p)) return bad("field '" + f.name + "' payload not bytes");
      auto b = nb::borrow<nb::bytes>(p);
      f.bytes.assign(b.c_str(), b.size());
      f.origin = Describe(id) + " field '" + f.name + "'";
      out->push_back(std::move(f));
    }
    return Status::OK();
  }

 private:
  size_t n_;
  std::string uri_, identity_;
  std::vector<FieldSpec> fields_;
  nb::object compute_;
  bool skip_;
};

// Fields of a record as the binding returns them:
// [(name, kind, dtype, shape, data)], data copied into bytes.
nb::list FieldsToList(const CachedSample& cs, const std::string& where) {
  std::vector<FieldView> views;
  if (!cs.fields.empty()) {
    std::string bad = cache_format::ParseFields(cs.fields, &views);
    if (!bad.empty()) ThrowIfError(Status::Corruption(where + ": cached fields: " + bad));
  }
  nb::list out;
  std::string decoded;  // a run-length mask's elements
  for (const FieldView& v : views) {
    std::string_view data = cache_format::RawData(v, &decoded);
    nb::list shape;
    for (uint64_t d : v.shape) shape.append(d);
    out.append(nb::make_tuple(nb::str(v.name.data(), v.name.size()), static_cast<int>(v.kind),
                              nb::str(v.dtype.data(), v.dtype.size()), nb::tuple(shape),
                              nb::bytes(data.data(), data.size())));
  }
  return out;
}

// What one process holds of an entry. After a fork the child opens its own
// and leaves the parent's untouched (its writer slot, claims and files
// belong to the parent).
struct ItemState {
  pid_t pid = 0;
  std::unique_ptr<CacheEntry> cache;
  std::unique_ptr<StatsPublisher> stats;
  std::unique_ptr<SampleFetcher> fetcher;
  std::mutex mu;  // scratch pool
  std::vector<std::unique_ptr<FetchScratch>> scratch;
  std::atomic<int64_t> last_refresh_us{0};

  std::unique_ptr<FetchScratch> Take() {
    std::lock_guard<std::mutex> l(mu);
    if (scratch.empty()) return std::make_unique<FetchScratch>();
    auto s = std::move(scratch.back());
    scratch.pop_back();
    return s;
  }
  void Give(std::unique_ptr<FetchScratch> s) {
    std::lock_guard<std::mutex> l(mu);
    scratch.push_back(std::move(s));
  }
  // Other processes' records, looked for at most every 20 ms (as the fetcher).
  void MaybeRefresh() {
    int64_t now = Env::Default()->MonotonicMicros(), last = last_refresh_us.load();
    if (now - last < 20000 || !last_refresh_us.compare_exchange_strong(last, now)) return;
    cache->Refresh().IgnoreError();  // a failure only hides others' newest records
  }
};

class ItemEntry {
 public:
  ItemEntry(const std::string& root, const std::string& uri, const std::string& identity,
            uint64_t size, nb::object compute, uint64_t capacity_bytes, bool group_shared,
            double claim_wait_s, const std::string& on_error)
      : source_(std::make_shared<ItemSource>(size, uri, identity, std::vector<FieldSpec>{},
                                             std::move(compute))) {
    skip_ = ValueOrThrow(ParseEnum<OnError>(on_error)) == OnError::kSkip;
    if (root.empty()) ThrowIfError(Status::InvalidArgument("ItemEntry: root is empty"));
    if (!(claim_wait_s >= 0))
      ThrowIfError(Status::InvalidArgument("ItemEntry: claim_wait_s must be >= 0"));
    opts_.root = root;
    opts_.capacity_bytes = capacity_bytes;
    opts_.group_shared = group_shared;
    opts_.claim_wait_seconds = claim_wait_s;
    key_ = MakeEntryKey(*source_, SourceOptions{}, DefaultPrepareSpec());
    Open();
  }

  ~ItemEntry() {
    if (state_ && state_->pid != getpid()) {
      Abandon();  // the parent's: nothing of it is ours to release
      return;
    }
    nb::gil_scoped_release nogil;  // Sync may wait on the device
    state_.reset();
  }

  nb::object Get(uint64_t i) {
    std::shared_ptr<ItemState> sp = State(i, true);
    ItemState& s = *sp;
    if (!source_->has_compute()) {
      nb::object r = Lookup(i);
      if (r.is_none())
        throw nb::key_error((source_->Describe(i) + " is not cached (no compute given)").c_str());
      return r;
    }
    auto scratch = s.Take();
    CachedSample cs;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s.fetcher->Fetch(i, scratch.get(), &cs);
    }
    if (!st.ok()) {
      s.Give(std::move(scratch));
      return Failed(s, i, st);
    }
    nb::list out = FieldsToList(cs, source_->Describe(i));
    s.Give(std::move(scratch));
    return std::move(out);
  }

  nb::object Lookup(uint64_t i) {
    std::shared_ptr<ItemState> sp = State(i, true);
    ItemState& s = *sp;
    std::string buf;
    CachedSample cs;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s.cache->Get(i, &buf, &cs);
      if (st.IsNotFound()) {
        s.MaybeRefresh();
        st = s.cache->Get(i, &buf, &cs);
      }
    }
    if (st.IsNotFound()) return nb::none();
    if (st.IsCorruption()) {  // dropped from the index: the next get recomputes it
      s.fetcher->stats().Add(Ctr::kCorruptRecords);
      Env::Default()->Warn(st.message() + "; it will be computed again");
      return nb::none();
    }
    ThrowIfError(st);
    s.fetcher->stats().Add(Ctr::kCacheHits);
    s.fetcher->stats().Add(Ctr::kCacheHitBytes, cs.payload_bytes());
    return FieldsToList(cs, source_->Describe(i));
  }

  bool Put(uint64_t i, nb::handle fields) {
    std::shared_ptr<ItemState> sp = State(i, true);
    ItemState& s = *sp;
    EncodedSample enc;
    ThrowIfError(source_->ToFields(i, fields, &enc.fields));
    Status st;
    bool stored = false;
    {
      nb::gil_scoped_release nogil;
      st = Store(s, i, enc, &stored);
    }
    ThrowIfError(st);
    return stored;
  }

  uint64_t Present() {
    std::shared_ptr<ItemState> sp = State();
    ItemState& s = *sp;
    nb::gil_scoped_release nogil;
    s.cache->Refresh().IgnoreError();
    return s.cache->samples_present();
  }

  ItemSource& source() { return *source_; }
  uint64_t size() const { return source_->size(); }
  std::string fingerprint() const { return key_.fingerprint(); }

  nb::dict Stats() {
    std::shared_ptr<ItemState> sp = State();
    ItemState& s = *sp;
    s.fetcher->SyncCacheCounters();
    StatsSnapshot snap = s.fetcher->stats().Snapshot();
    nb::dict d;
    for (const auto& c : kCounters)
      d[std::string(c.key).c_str()] = snap.counters[static_cast<size_t>(c.slot)];
    nb::list skipped;
    {
      std::lock_guard<std::mutex> l(skip_mu_);
      for (const auto& r : skipped_) skipped.append(r);
    }
    d["skipped_items"] = skipped;
    d["cache_dir"] = s.cache->dir();
    d["cache_admitting"] = s.cache->admitting();
    d["cache_warning"] = s.cache->warning();
    d["stats_file"] = s.stats->path();
    return d;
  }

  void Close() {
    if (!state_) return;
    if (state_->pid != getpid()) {
      Abandon();
      return;
    }
    // A get still running on another thread holds its own reference: the
    // entry closes when that one returns.
    nb::gil_scoped_release nogil;
    state_.reset();
  }

 private:
  // Keeps a forked parent's state from ever being released here.
  void Abandon() { (void)new std::shared_ptr<ItemState>(std::move(state_)); }

  void Open() {
    auto st = std::make_shared<ItemState>();
    st->pid = getpid();
    Result<std::unique_ptr<CacheEntry>> entry = Status::Aborted("unset");
    {
      nb::gil_scoped_release nogil;
      entry = CacheEntry::Open(opts_, key_);
    }
    // Full or busy: typed, so Python falls back to the dataset (as the
    // loader does to the origin) instead of failing the job.
    ThrowIfOpenError(entry.status());
    st->cache = std::move(entry).value();
    std::string warning;
    st->stats = StatsPublisher::Create(nullptr, opts_, Basename(st->cache->dir()), &warning);
    if (!warning.empty()) Env::Default()->Warn(warning);
    st->fetcher =
        std::make_unique<SampleFetcher>(source_.get(), DefaultPrepareSpec(), st->cache.get(),
                                        opts_.claim_wait_seconds, st->stats.get(), true, nullptr);
    state_ = std::move(st);
  }

  // This process's state (opened anew after a fork), with i checked; the
  // caller's reference keeps it open through a concurrent close().
  std::shared_ptr<ItemState> State(uint64_t i = 0, bool check_index = false) {
    if (closed()) throw nb::value_error("ItemEntry is closed");
    if (check_index && i >= source_->size())
      throw nb::index_error(("item " + std::to_string(i) + " of an entry of " +
                             std::to_string(source_->size()) + " items")
                                .c_str());
    if (state_->pid != getpid()) {
      Abandon();  // the parent's slot, claims and files stay its own
      Open();
    }
    return state_;
  }
  bool closed() const { return !state_; }

  static Status Store(ItemState& s, uint64_t i, const EncodedSample& enc, bool* stored) {
    std::vector<Field> fields;
    SSDFEED_RETURN_IF_ERROR(
        PrepareFields(enc.fields, kFieldsOnlyGeometry, DecodeLimits{}, &fields));
    std::string section;
    SSDFEED_RETURN_IF_ERROR(cache_format::EncodeFields(fields, &section));
    if (s.cache->Contains(i) || !s.cache->admitting()) return Status::OK();
    static const uint8_t kNoPixels = 0;
    CachedSample cs;
    cs.pixels = &kNoPixels;
    cs.fields = section;
    Status st = s.cache->Put(i, cs);
    s.fetcher->SyncCacheCounters();
    if (st.ok()) *stored = true;
    // No room or a failed write stops admission; the item is simply not stored.
    if (st.IsNoSpace() || st.code() == Status::Code::kIOError) return Status::OK();
    return st;
  }

  // get's failure: skipped (None) under on_error=skip, else raised (as the
  // exception compute raised, when it did).
  nb::object Failed(ItemState& s, uint64_t i, const Status& st) {
    if (!skip_) ThrowIfError(st);
    DropStashed(Tag(source_->uri(), i));
    s.fetcher->stats().Add(Ctr::kSkipped);
    std::lock_guard<std::mutex> l(skip_mu_);
    skipped_.push_back(st.message());
    return nb::none();
  }

  CacheOptions opts_;
  std::shared_ptr<ItemSource> source_;
  EntryKey key_;
  bool skip_ = false;
  std::shared_ptr<ItemState> state_;
  std::mutex skip_mu_;
  std::vector<std::string> skipped_;  // why each skipped item failed
};

// Cycle collection (compute -> dataset -> entry -> compute): nanobind
// objects take part only through these slots.
template <typename T, ItemSource& (*SourceOf)(T&)>
int Traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(SourceOf(*nb::inst_ptr<T>(self)).compute_ptr());
  return 0;
}
template <typename T, ItemSource& (*SourceOf)(T&)>
int Clear(PyObject* self) {
  if (nb::inst_ready(self)) SourceOf(*nb::inst_ptr<T>(self)).DropCompute();
  return 0;
}
ItemSource& SourceOfEntry(ItemEntry& e) { return e.source(); }
ItemSource& SourceOfSource(ItemSource& s) { return s; }

PyType_Slot kEntrySlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(Traverse<ItemEntry, SourceOfEntry>)},
    {Py_tp_clear, reinterpret_cast<void*>(Clear<ItemEntry, SourceOfEntry>)},
    {0, nullptr}};
PyType_Slot kSourceSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(Traverse<ItemSource, SourceOfSource>)},
    {Py_tp_clear, reinterpret_cast<void*>(Clear<ItemSource, SourceOfSource>)},
    {0, nullptr}};

}  // namespace

void BindItems(nb::module_& m) {
  // Exceptions nobody took (skipped items) hold their frames: let go of them
  // while the interpreter still runs.
  nb::module_::import_("atexit").attr("register")(
      nb::cpp_function([] { Stash().clear(); }, nb::name("_ssdfeed_drop_item_errors")));
  nb::class_<ItemSource, Source>(
      m, "ItemSource", nb::type_slots(kSourceSlots),
      "A source whose item i is compute(i): [(name, kind, payload)]; for "
      "LoaderOptions.source_object (the ssdfeed.Loader fast path of a cached dataset).")
      .def(
          "__init__",
          [](ItemSource* self, size_t size, std::string uri, std::string identity,
             const nb::list& fields, nb::object compute, const std::string& on_error) {
            std::vector<FieldSpec> specs;
            for (nb::handle f : fields) {
              auto t = nb::cast<nb::tuple>(f);
              specs.push_back(
                  {nb::cast<std::string>(t[0]), static_cast<FieldKind>(nb::cast<int>(t[1])), ""});
            }
            bool skip = ValueOrThrow(ParseEnum<OnError>(on_error)) == OnError::kSkip;
            new (self) ItemSource(size, std::move(uri), std::move(identity), std::move(specs),
                                  std::move(compute), skip);
          },
          nb::arg("size"), nb::arg("uri"), nb::arg("identity"), nb::arg("fields"),
          nb::arg("compute"), nb::kw_only(), nb::arg("on_error") = "raise",
          "fields: [(name, kind int)] every item gives (item 0's); compute(i) -> "
          "[(name, kind, payload)]. on_error='skip' (the loader's): a failing item is named "
          "on stderr rather than kept to raise.");
  nb::class_<ItemEntry>(
      m, "ItemEntry", nb::type_slots(kEntrySlots),
      "One cache entry of Python items (key: uri, identity, size, spec 'items1'). "
      "get(i) -> [(name, kind, dtype, shape, data)] computes a missing item with compute(i) "
      "and stores it; with on_error='skip' a failing item gives None (counted in "
      "stats()['skipped'], its error in stats()['skipped_items']).")
      .def(nb::init<const std::string&, const std::string&, const std::string&, uint64_t,
                    nb::object, uint64_t, bool, double, const std::string&>(),
           nb::arg("root"), nb::arg("uri"), nb::arg("identity"), nb::arg("size"),
           nb::arg("compute").none(), nb::kw_only(), nb::arg("capacity_bytes") = 0,
           nb::arg("group_shared") = false, nb::arg("claim_wait_s") = 3.0,
           nb::arg("on_error") = "raise")
      .def("get", &ItemEntry::Get, nb::arg("i"),
           "Item i's fields: from the cache, else computed, stored and returned. None when "
           "compute failed under on_error='skip'.")
      .def("lookup", &ItemEntry::Lookup, nb::arg("i"),
           "Item i's fields from the cache, or None (never computes).")
      .def("put", &ItemEntry::Put, nb::arg("i"), nb::arg("fields"),
           "Stores [(name, kind, payload)] as item i; False when it was present already or "
           "the entry no longer admits (capacity, disk full).")
      .def("present", &ItemEntry::Present, "Items the entry holds (all processes').")
      .def_prop_ro("size", &ItemEntry::size)
      .def_prop_ro("fingerprint", &ItemEntry::fingerprint)
      .def("stats", &ItemEntry::Stats,
           "This process's counters (the Loader.stats() names), skipped_items, cache_dir.")
      .def("close", &ItemEntry::Close, "Syncs and lets go of the entry; later calls raise.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](ItemEntry& e, nb::args) { e.Close(); });
}

}  // namespace ssdfeed::py
