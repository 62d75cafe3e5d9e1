// The nanobind module: thin wrappers over the C++ core. Errors become Python
// exceptions here and only here.
#include <nanobind/nanobind.h>

#include "python/src/bindings.h"

namespace nb = nanobind;

NB_MODULE(_ssdfeed, m) {
  m.doc() = "ssdfeed native core";
  m.attr("__version__") = SSDFEED_VERSION;
  ssdfeed::py::BindAll(m);
}
