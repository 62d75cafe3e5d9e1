// Python's ItemStream (ssdfeed.tf.cache() keeps a pipeline's elements in
// it): glue over ItemStream (ssdfeed/items.h), items of a length not known
// up front. Here, as in bind_items.cc: the GIL, held only to call compute
// and build results; exceptions; the cycle collector's type slots. A part
// or meta entry that cannot be had (Busy) is no error: lookups find
// nothing, puts store nothing, and `unavailable` says why.
#include <nanobind/stl/string.h>

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "python/src/item_source.h"
#include "ssdfeed/items.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

class PyItemStream {
 public:
  PyItemStream(const std::string& root, const std::string& uri, const std::string& identity,
               nb::object compute, uint64_t part_size, uint64_t capacity_bytes, bool group_shared,
               double claim_wait_s)
      : source_(std::make_shared<ItemSource>(std::numeric_limits<size_t>::max(), uri, identity,
                                             std::vector<FieldSpec>{}, std::move(compute))) {
    ItemStreamOptions o;
    o.part_size = part_size;
    o.store.capacity_bytes = capacity_bytes;
    o.store.group_shared = group_shared;
    o.store.claim_wait_seconds = claim_wait_s;
    stream_ = ValueOrThrow(ItemStream::Open(root, uri, identity, o));
  }
  ~PyItemStream() { Close(); }

  // Item i, computed under its claim and stored when missing; None when its
  // part cannot be had.
  nb::object Get(uint64_t i) {
    std::shared_ptr<ItemStream> s = Stream();
    ItemCompute compute = source_->has_compute() ? ComputeOf(source_.get()) : ItemCompute{};
    ItemFields f;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s->Get(i, compute, &f);
    }
    if (st.IsBusy() || (st.IsNotFound() && !compute)) return nb::none();
    ThrowIfError(st);
    return FieldsToList(f);
  }

  nb::object Lookup(uint64_t i) {
    std::shared_ptr<ItemStream> s = Stream();
    ItemFields f;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s->Lookup(i, &f);
    }
    if (st.IsNotFound() || st.IsBusy()) return nb::none();
    ThrowIfError(st);
    return FieldsToList(f);
  }

  bool Put(uint64_t i, nb::handle fields) {
    std::shared_ptr<ItemStream> s = Stream();
    EncodedSample enc;
    ThrowIfError(source_->ToFields(i, fields, &enc.fields));
    bool stored = false;
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s->Put(i, enc.fields, &stored);
    }
    if (!st.IsBusy()) ThrowIfError(st);
    return stored;
  }

  nb::object Length() {
    std::shared_ptr<ItemStream> s = Stream();
    Result<uint64_t> n = Status::Aborted("unset");
    {
      nb::gil_scoped_release nogil;
      n = s->Length();
    }
    if (n.status().IsNotFound() || n.status().IsBusy()) return nb::none();
    return nb::int_(ValueOrThrow(std::move(n)));
  }

  void Finish(uint64_t n) {
    std::shared_ptr<ItemStream> s = Stream();
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = s->Finish(n);
    }
    if (!st.IsBusy()) ThrowIfError(st);
  }

  uint64_t Present(uint64_t n) {
    std::shared_ptr<ItemStream> s = Stream();
    nb::gil_scoped_release nogil;
    return s->Present(n);
  }

  bool Complete() {
    std::shared_ptr<ItemStream> s = Stream();
    nb::gil_scoped_release nogil;
    return s->Complete();
  }

  nb::dict Stats() { return StatsToDict(Stream()->Stats()); }
  std::string Unavailable() { return Stream()->unavailable(); }
  uint64_t part_size() { return Stream()->part_size(); }

  // A call still running on another thread holds its own reference.
  void Close() {
    if (!stream_) return;
    nb::gil_scoped_release nogil;
    stream_.reset();
  }

  ItemSource& source() { return *source_; }

 private:
  std::shared_ptr<ItemStream> Stream() {
    if (!stream_) throw nb::value_error("ItemStream is closed");
    return stream_;
  }

  std::shared_ptr<ItemSource> source_;
  std::shared_ptr<ItemStream> stream_;
};

ItemSource& SourceOfStream(PyItemStream& s) { return s.source(); }

PyType_Slot kStreamSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(TraverseCompute<PyItemStream, SourceOfStream>)},
    {Py_tp_clear, reinterpret_cast<void*>(ClearCompute<PyItemStream, SourceOfStream>)},
    {0, nullptr}};

}  // namespace

void BindItemStream(nb::module_& m) {
  nb::class_<PyItemStream>(
      m, "ItemStream", nb::type_slots(kStreamSlots),
      "Items of a length not known up front (ssdfeed/items.h ItemStream): part entries of "
      "part_size items plus a meta entry recording the length once finish(n) is called. "
      "get(i) -> [(name, kind, dtype, shape, data)] computes a missing item with compute(i) "
      "under its claim and stores it.")
      .def(nb::init<const std::string&, const std::string&, const std::string&, nb::object,
                    uint64_t, uint64_t, bool, double>(),
           nb::arg("root"), nb::arg("uri"), nb::arg("identity"), nb::arg("compute").none(),
           nb::kw_only(), nb::arg("part_size") = 65536, nb::arg("capacity_bytes") = 0,
           nb::arg("group_shared") = false, nb::arg("claim_wait_s") = 3.0)
      .def("get", &PyItemStream::Get, nb::arg("i"),
           "Item i's fields: from the cache, else computed, stored and returned; None when "
           "its part cannot be had (or, without compute, it is not cached).")
      .def("lookup", &PyItemStream::Lookup, nb::arg("i"),
           "Item i's fields from the cache, or None (never computes).")
      .def("put", &PyItemStream::Put, nb::arg("i"), nb::arg("fields"),
           "Stores [(name, kind, payload)] as item i; False when not stored (present, "
           "claimed, not admitted, or its part cannot be had).")
      .def("length", &PyItemStream::Length,
           "The length a finished fill recorded, or None (no fill has finished).")
      .def("finish", &PyItemStream::Finish, nb::arg("n"),
           "Records that the items ended at n: a fill's last call.")
      .def("present", &PyItemStream::Present, nb::arg("n"),
           "Items of [0, n) the parts hold (all processes').")
      .def("complete", &PyItemStream::Complete, "The length is recorded and every item is present.")
      .def("stats", &PyItemStream::Stats,
           "This process's counters over the parts, summed (the Loader.stats() names).")
      .def_prop_ro("unavailable", &PyItemStream::Unavailable,
                   "Why a part or the meta entry could not be had; '' while all could.")
      .def_prop_ro("part_size", &PyItemStream::part_size)
      .def("close", &PyItemStream::Close, "Syncs and lets go of the entries; later calls raise.");
}

}  // namespace ssdfeed::py
