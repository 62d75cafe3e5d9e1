// ItemSource: a Source whose item i is what a Python callable returns,
// for the Loader (LoaderOptions.source_object) and ItemEntry's computes.
// compute(i) returns [(name, kind, payload)], kind a FieldKind (5 array:
// payload .npy bytes; 6 bytes: as they are). Image-less: the fetcher
// stores and serves its fields only.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <utility>
#include <vector>

#include "ssdfeed/items.h"
#include "ssdfeed/source.h"

namespace ssdfeed::py {

class ItemSource final : public Source {
 public:
  // skip: a loader skips failing items (on_error=skip): their exceptions
  // are named on stderr instead of kept for raising.
  ItemSource(size_t n, std::string uri, std::string identity, std::vector<FieldSpec> fields,
             nanobind::object compute, bool skip = false)
      : n_(n),
        uri_(std::move(uri)),
        identity_(std::move(identity)),
        fields_(std::move(fields)),
        compute_(std::move(compute)),
        skip_(skip) {}
  ~ItemSource() override;

  size_t size() const override { return n_; }
  std::string Describe(size_t id) const override { return uri_ + " item " + std::to_string(id); }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  std::vector<FieldSpec> fields() const override { return fields_; }
  std::string record_spec() const override { return kItemsRecordSpec; }
  bool has_compute() const { return compute_.is_valid() && !compute_.is_none(); }
  // For Python's cycle collector: compute is often a bound method of the
  // dataset that holds this entry.
  PyObject* compute_ptr() const { return compute_.ptr(); }
  void DropCompute() { compute_.reset(); }

  // compute(id), with the GIL taken. An exception it raises is kept for
  // raising (python/src/item_errors.cc) and reported as Aborted.
  Status Read(size_t id, EncodedSample* out) const override;
  // compute's result (a list of (name, kind, payload) tuples) as fields;
  // InvalidArgument naming item id and what is wrong. GIL held.
  Status ToFields(size_t id, nanobind::handle r, std::vector<EncodedField>* out) const;

 private:
  size_t n_;
  std::string uri_, identity_;
  std::vector<FieldSpec> fields_;
  nanobind::object compute_;
  bool skip_;
};

// What the bindings of item entries (ItemEntry over an ItemStore, ItemStream)
// share.

// The source's compute as an ItemCompute (Read takes the GIL per call).
ItemCompute ComputeOf(const ItemSource* src);
// Fields as the bindings return them: [(name, kind, dtype, shape, data)],
// data copied into bytes. GIL held.
nanobind::list FieldsToList(const ItemFields& f);
// Stats as a dict: the Loader.stats() counter names, skipped_items,
// cache_dir, cache_admitting, cache_warning, stats_file. GIL held.
nanobind::dict StatsToDict(const ItemStoreStats& st);

// Cycle collection (compute -> dataset -> entry -> compute): nanobind
// objects take part only through type slots; these visit and drop the
// compute of the ItemSource that SourceOf finds in a T.
template <typename T, ItemSource& (*SourceOf)(T&)>
int TraverseCompute(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nanobind::inst_ready(self)) return 0;
  Py_VISIT(SourceOf(*nanobind::inst_ptr<T>(self)).compute_ptr());
  return 0;
}
template <typename T, ItemSource& (*SourceOf)(T&)>
int ClearCompute(PyObject* self) {
  if (nanobind::inst_ready(self)) SourceOf(*nanobind::inst_ptr<T>(self)).DropCompute();
  return 0;
}

}  // namespace ssdfeed::py
