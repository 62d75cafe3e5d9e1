#include "python/src/bindings.h"

namespace ssdfeed::py {

void BindAll(nanobind::module_& m) {}

}  // namespace ssdfeed::py
