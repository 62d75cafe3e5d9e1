// One Bind* function per area keeps each binding file small.
#pragma once

#include <nanobind/nanobind.h>

namespace ssdfeed::py {

void BindAll(nanobind::module_& m);

}  // namespace ssdfeed::py
