// ssdfeed.warm(): the library warm-up (ssdfeed/warm.h), run with the GIL
// released; a Ctrl-C (or any signal handler raising) stops the workers
// through the progress callback and is raised once the entry is synced.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/src/bindings.h"
#include "ssdfeed/warm.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

WarmResult RunWarm(const std::string& uri, WarmOptions o) {
  o.progress = [](const WarmProgress&) {
    nb::gil_scoped_acquire gil;
    return PyErr_CheckSignals() == 0;  // the exception stays set for below
  };
  WarmResult r;
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = Warm(uri, o, &r);
  }
  if (PyErr_Occurred()) throw nb::python_error();
  ThrowIfError(s);
  return r;
}

}  // namespace

void BindWarm(nb::module_& m) {
  nb::class_<WarmOptions>(m, "WarmOptions", "C++ WarmOptions; filled by ssdfeed.warm.")
      .def(nb::init<>())
      .def_rw("source", &WarmOptions::source)
      .def_rw("prepare", &WarmOptions::prepare)
      .def_rw("cache", &WarmOptions::cache)
      .def_rw("workers", &WarmOptions::workers)
      .def_rw("ids", &WarmOptions::ids);
  nb::class_<WarmSkipped>(m, "WarmSkipped", "A sample skipped under on_error='skip'.")
      .def_ro("id", &WarmSkipped::id)
      .def_ro("sample", &WarmSkipped::sample)
      .def_ro("error", &WarmSkipped::error);
  nb::class_<WarmResult>(m, "WarmResult", "What ssdfeed.warm() did.")
      .def_ro("dir", &WarmResult::dir)
      .def_ro("spec", &WarmResult::spec)
      .def_ro("samples_total", &WarmResult::samples_total)
      .def_ro("samples_present", &WarmResult::samples_present)
      .def_ro("samples_visited", &WarmResult::samples_visited)
      .def_ro("prepared", &WarmResult::prepared)
      .def_ro("cache_hits", &WarmResult::cache_hits)
      .def_ro("claim_waits", &WarmResult::claim_waits)
      .def_ro("errors", &WarmResult::errors)
      .def_ro("bytes_prepared", &WarmResult::bytes_prepared)
      .def_ro("origin_bytes", &WarmResult::origin_bytes)
      .def_ro("origin_requests", &WarmResult::origin_requests)
      .def_ro("skipped", &WarmResult::skipped)
      .def_ro("cache_full", &WarmResult::cache_full)
      .def_ro("seconds", &WarmResult::seconds)
      .def_ro("warning", &WarmResult::warning)
      .def_ro("warnings", &WarmResult::warnings)
      .def_prop_ro("complete", &WarmResult::complete,
                   "Every sample is in the entry or was skipped.");
  m.def("warm_with", &RunWarm, nb::arg("uri"), nb::arg("options"),
        "Fills the cache entry of (uri, options); use ssdfeed.warm.");
}

}  // namespace ssdfeed::py
