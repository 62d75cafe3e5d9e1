#include "python/src/item_source.h"

#include <dlfcn.h>

#include <string>
#include <utility>

#include "python/src/bindings.h"
#include "ssdfeed/cached_fields.h"
#include "ssdfeed/enum_names.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

// A thread that takes the GIL while the interpreter finalizes is ended
// where it stands (no unwinding a C++ worker survives); loaders are stopped
// at exit (ssdfeed._item_loader), this catches a stray late read.
#if defined(Py_LIMITED_API) && Py_LIMITED_API < 0x030D0000
// The stable ABI of 3.12 (the cp312-abi3 wheel, which 3.13 also loads) has
// neither function: Py_IsFinalizing is 3.13's, _Py_IsFinalizing is private
// and gone in 3.13. The running interpreter exports the one it has.
using IsFinalizingFn = int (*)();
IsFinalizingFn FindIsFinalizing() {
  for (const char* name : {"Py_IsFinalizing", "_Py_IsFinalizing"}) {
    if (void* f = dlsym(RTLD_DEFAULT, name)) return reinterpret_cast<IsFinalizingFn>(f);
  }
  return nullptr;
}
bool Finalizing() {
  static const IsFinalizingFn is_finalizing = FindIsFinalizing();
  return is_finalizing != nullptr && is_finalizing() != 0;
}
#else
bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}
#endif

// "ValueError: bad file", for the Status (the exception itself is kept).
std::string Explain(nb::handle exc) {
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

}  // namespace

ItemSource::~ItemSource() {
  // The last owner may be a loader worker or a destructor without the GIL.
  if (nb::is_alive()) {
    nb::gil_scoped_acquire gil;
    compute_.reset();
  } else {
    compute_.release();  // the interpreter is gone: nothing to decrement
  }
}

Status ItemSource::Read(size_t id, EncodedSample* out) const {
  if (!has_compute())
    return Status::NotFound(ItemTag(uri_, id) + " not cached, and this entry computes nothing");
  if (!nb::is_alive() || Finalizing())
    return Status::Aborted(ItemTag(uri_, id) + " Python is shutting down");
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
    std::string tag = ItemTag(uri_, id), what = Explain(exc);
    if (skip_)
      Env::Default()->Warn(tag + " skipped (on_error=skip): " + what);
    else
      StashException(tag, id, std::move(exc));
    return Status::Aborted(tag + " compute raised " + what);
  } catch (const std::exception& e) {  // nothing may leave a loader's worker thread
    return Status::InvalidArgument(ItemTag(uri_, id) + " compute's result: " + e.what());
  }
}

Status ItemSource::ToFields(size_t id, nb::handle r, std::vector<EncodedField>* out) const {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(ItemTag(uri_, id) + " compute returned " + why +
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

ItemCompute ComputeOf(const ItemSource* src) {
  return [src](uint64_t id, std::vector<EncodedField>* fields) {
    EncodedSample e;
    Status st = src->Read(id, &e);
    *fields = std::move(e.fields);
    return st;
  };
}

nb::list FieldsToList(const ItemFields& f) {
  nb::list out;
  std::string decoded;  // a run-length mask's elements
  for (const FieldView& v : f.views) {
    std::string_view data = FieldData(v, &decoded);
    nb::list shape;
    for (uint64_t d : v.shape) shape.append(d);
    out.append(nb::make_tuple(nb::str(v.name.data(), v.name.size()), static_cast<int>(v.kind),
                              nb::str(v.dtype.data(), v.dtype.size()), nb::tuple(shape),
                              nb::bytes(data.data(), data.size())));
  }
  return out;
}

nb::dict StatsToDict(const ItemStoreStats& st) {
  nb::dict d;
  for (const auto& c : kCounters)
    d[std::string(c.key).c_str()] = st.snapshot.counters[static_cast<size_t>(c.slot)];
  nb::list skipped;
  for (const auto& r : st.skipped_items) skipped.append(r);
  d["skipped_items"] = skipped;
  d["cache_dir"] = st.cache_dir;
  d["cache_admitting"] = st.admitting;
  d["cache_warning"] = st.cache_warning;
  d["stats_file"] = st.stats_file;
  return d;
}

}  // namespace ssdfeed::py
