// The native side of ssdfeed.distributed (peer fill): a node's entry that
// exports record batches and checks and stores batches received. The
// transport (torch.distributed) is Python's. Long calls release the GIL.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "python/src/bindings.h"
#include "ssdfeed/peer.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

std::unique_ptr<PeerEntry> OpenPeer(const std::string& uri, const WarmOptions& o) {
  std::unique_ptr<PeerEntry> pe;
  Status s;
  {
    nb::gil_scoped_release nogil;
    auto r = PeerEntry::Open(uri, o);
    if (r.ok())
      pe = std::move(*r);
    else
      s = r.status();
  }
  ThrowIfError(s);
  return pe;
}

nb::bytes Presence(PeerEntry& pe) {
  std::vector<uint8_t> v;
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = pe.Presence(&v);
  }
  ThrowIfError(s);
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

WarmResult WarmIds(PeerEntry& pe, const std::vector<uint64_t>& ids) {
  WarmResult r;
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = pe.WarmIds(ids, &r);
  }
  ThrowIfError(s);
  return r;
}

nb::tuple Export(PeerEntry& pe, const std::vector<uint64_t>& ids, uint32_t receivers) {
  std::string batch;
  PeerBatchInfo info;
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = pe.Export(ids, receivers, &batch, &info);
  }
  ThrowIfError(s);
  return nb::make_tuple(nb::bytes(batch.data(), batch.size()), info.records);
}

PeerImportReport Import(PeerEntry& pe, nb::bytes batch) {
  PeerImportReport r;
  Status s;
  const char* p = batch.c_str();
  size_t n = batch.size();
  {
    nb::gil_scoped_release nogil;
    s = pe.Import(p, n, &r);
  }
  ThrowIfError(s);
  return r;
}

}  // namespace

void BindPeer(nb::module_& m) {
  nb::class_<PeerImportReport>(m, "PeerImportReport", "What PeerEntry.import_batch did.")
      .def_ro("stored", &PeerImportReport::stored)
      .def_ro("already_present", &PeerImportReport::already_present)
      .def_ro("refused", &PeerImportReport::refused)
      .def_ro("not_admitted", &PeerImportReport::not_admitted)
      .def_ro("bytes", &PeerImportReport::bytes)
      .def_ro("first_refusal", &PeerImportReport::first_refusal);
  nb::class_<PeerEntry>(m, "PeerEntry", "A node's entry in a peer fill; use ssdfeed.distributed.")
      .def_static("open", &OpenPeer, nb::arg("uri"), nb::arg("options"))
      .def_prop_ro("fingerprint", &PeerEntry::fingerprint)
      .def_prop_ro("samples_total", &PeerEntry::samples_total)
      .def_prop_ro("dir", &PeerEntry::dir)
      .def_prop_ro("admitting", &PeerEntry::admitting)
      .def_prop_ro("warning", &PeerEntry::warning)
      .def("presence", &Presence, "One byte per sample id: 1 where the entry holds it.")
      .def("warm_ids", &WarmIds, nb::arg("ids"), "Prepares ids from the origin into the entry.")
      .def("export_batch", &Export, nb::arg("ids"), nb::arg("receivers") = 1,
           "(batch bytes, records): the entry's intact records of ids, counted as "
           "sent to `receivers` nodes (default 1).")
      .def("import_batch", &Import, nb::arg("batch"),
           "Checks a batch's records and stores those the entry lacks.")
      .def("record_complete", &PeerEntry::RecordComplete, nb::arg("seconds"))
      .def("sync", [](PeerEntry& pe) {
        Status s;
        {
          nb::gil_scoped_release nogil;
          s = pe.Sync();
        }
        ThrowIfError(s);
      });
}

}  // namespace ssdfeed::py
