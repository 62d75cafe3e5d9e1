// One Bind* function per area keeps each binding file small.
#pragma once

#include <nanobind/nanobind.h>

#include "ssdfeed/image.h"
#include "ssdfeed/status.h"

namespace ssdfeed::py {

void BindAll(nanobind::module_& m);
void BindSource(nanobind::module_& m);
void BindImage(nanobind::module_& m);
void BindLoader(nanobind::module_& m);
void BindWarm(nanobind::module_& m);

// Raises the Python exception that fits the Status (no-op when OK).
void ThrowIfError(const Status& s);

template <typename T>
T ValueOrThrow(Result<T> r) {
  ThrowIfError(r.status());
  return std::move(r).value();
}

// Hands an Image to numpy without copying: the array owns the Image.
nanobind::object ImageToArray(Image&& img);

// PrepareSpec from the keyword arguments of ssdfeed.Prepare.
PrepareSpec MakeSpec(int resize_short, int max_long, std::pair<int, int> resize,
                     std::pair<int, int> center_crop, bool gray);

}  // namespace ssdfeed::py
