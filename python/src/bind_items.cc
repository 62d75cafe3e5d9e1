// Python's ItemEntry (ssdfeed.cache() and ssdfeed.tf.cache() build on it)
// and ItemSource (python/src/item_source.h, for the Loader): glue over
// ItemStore (ssdfeed/items.h), where the policy lives. Here: the GIL, held
// only to call compute and build results; exceptions (what compute raised
// is raised again by the call whose Status reports it, ThrowIfError); and
// the type slots of Python's cycle collector.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "python/src/item_source.h"
#include "ssdfeed/enum_names.h"
#include "ssdfeed/items.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

class ItemEntry {
 public:
  ItemEntry(const std::string& root, const std::string& uri, const std::string& identity,
            uint64_t size, nb::object compute, uint64_t capacity_bytes, bool group_shared,
            double claim_wait_s, const std::string& on_error)
      : source_(std::make_shared<ItemSource>(size, uri, identity, std::vector<FieldSpec>{},
                                             std::move(compute))) {
    ItemStoreOptions o;
    o.capacity_bytes = capacity_bytes;
    o.group_shared = group_shared;
    o.claim_wait_seconds = claim_wait_s;
    o.on_error = ValueOrThrow(ParseEnum<OnError>(on_error));
    Result<std::unique_ptr<ItemStore>> r = Status::Aborted("unset");
    {
      nb::gil_scoped_release nogil;
      r = ItemStore::Open(root, uri, identity, size, o);
    }
    // Full or busy: typed, so Python falls back to the dataset (as the
    // loader does to the origin) instead of failing the job.
    ThrowIfOpenError(r.status());
    store_ = std::move(r).value();
    fingerprint_ = store_->fingerprint();
  }
  ~ItemEntry() { Close(); }

  nb::object Get(uint64_t i) {
    std::shared_ptr<ItemStore> store = Store(i);
    if (!source_->has_compute()) {
      nb::object r = Lookup(i);
      if (r.is_none())
        throw nb::key_error((store->Describe(i) + " is not cached (no compute given)").c_str());
      return r;
    }
    ItemCompute compute = ComputeOf(source_.get());
    ItemFields f;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = store->Get(i, compute, &f);
    }
    ThrowIfError(st);
    if (!f.skipped) return FieldsToList(f);
    DropStashed(ItemTag(store->uri(), i));  // nobody raises it: named in stats()['skipped_items']
    return nb::none();
  }

  nb::object Lookup(uint64_t i) {
    std::shared_ptr<ItemStore> store = Store(i);
    ItemFields f;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = store->Lookup(i, &f);
    }
    if (st.IsNotFound()) return nb::none();
    ThrowIfError(st);
    return FieldsToList(f);
  }

  bool Put(uint64_t i, nb::handle fields) {
    std::shared_ptr<ItemStore> store = Store(i);
    EncodedSample enc;
    ThrowIfError(source_->ToFields(i, fields, &enc.fields));
    bool stored = false;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = store->Put(i, enc.fields, &stored);
    }
    ThrowIfError(st);
    return stored;
  }

  uint64_t Present() {
    std::shared_ptr<ItemStore> store = Store();
    nb::gil_scoped_release nogil;
    return store->Present();
  }

  nb::dict Stats() {
    std::shared_ptr<ItemStore> store = Store();
    return StatsToDict(store->Stats());
  }

  // A get still running on another thread holds its own reference: the
  // store closes (syncing, which may wait on the device) when that returns.
  void Close() {
    if (!store_) return;
    nb::gil_scoped_release nogil;
    store_.reset();
  }

  ItemSource& source() { return *source_; }
  uint64_t size() const { return source_->size(); }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  // The open store, with i checked (IndexError, as a sequence's).
  std::shared_ptr<ItemStore> Store(uint64_t i) {
    if (i >= source_->size())
      throw nb::index_error(("item " + std::to_string(i) + " of an entry of " +
                             std::to_string(source_->size()) + " items")
                                .c_str());
    return Store();
  }
  std::shared_ptr<ItemStore> Store() {
    if (!store_) throw nb::value_error("ItemEntry is closed");
    return store_;
  }

  std::shared_ptr<ItemSource> source_;
  std::shared_ptr<ItemStore> store_;
  std::string fingerprint_;
};

ItemSource& SourceOfEntry(ItemEntry& e) { return e.source(); }
ItemSource& SourceOfSource(ItemSource& s) { return s; }

PyType_Slot kEntrySlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(TraverseCompute<ItemEntry, SourceOfEntry>)},
    {Py_tp_clear, reinterpret_cast<void*>(ClearCompute<ItemEntry, SourceOfEntry>)},
    {0, nullptr}};
PyType_Slot kSourceSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(TraverseCompute<ItemSource, SourceOfSource>)},
    {Py_tp_clear, reinterpret_cast<void*>(ClearCompute<ItemSource, SourceOfSource>)},
    {0, nullptr}};

}  // namespace

void BindItems(nb::module_& m) {
  m.attr("ITEMS_SPEC") = kItemsRecordSpec;
  // Exceptions nobody took (skipped items) hold their frames: let go of them
  // while the interpreter still runs.
  nb::module_::import_("atexit").attr("register")(
      nb::cpp_function(DropAllStashed, nb::name("_ssdfeed_drop_item_errors")));
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
      "One cache entry of Python items (key: uri, identity, size, spec ITEMS_SPEC). "
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
           "Stores [(name, kind, payload)] as item i; False when it was present already, "
           "another process is storing it, or the entry no longer admits (capacity, disk "
           "full).")
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
