#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <stdexcept>

#include "python/src/bindings.h"
#include "ssdfeed/defaults.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {
// A Corruption status on its way to Python: nb::exception registers the
// Python type (ssdfeed.CorruptionError, a ValueError) and the translation.
class CorruptionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
}  // namespace

void ThrowIfError(const Status& s) {
  if (s.ok()) return;
  if (RaiseStashed(s)) throw nb::python_error();
  const char* msg = s.message().c_str();
  switch (s.code()) {
    case Status::Code::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, msg);
      break;
    case Status::Code::kInvalidArgument:
      PyErr_SetString(PyExc_ValueError, msg);
      break;
    case Status::Code::kCorruption:
      throw CorruptionError(s.message());
    case Status::Code::kNoSpace:
      throw CacheFullError(s.message());
    case Status::Code::kAborted:
      PyErr_SetString(PyExc_RuntimeError, msg);
      break;
    default:
      PyErr_SetString(PyExc_OSError, msg);
  }
  throw nb::python_error();
}

void ThrowIfOpenError(const Status& s) {
  if (s.IsBusy()) throw CacheUnavailableError(s.message());
  ThrowIfError(s);  // NoSpace: CacheFullError
}

nb::object ImageToArray(Image&& img) {
  auto* owned = new Image(std::move(img));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Image*>(p); });
  size_t shape[3] = {static_cast<size_t>(owned->height), static_cast<size_t>(owned->width),
                     static_cast<size_t>(owned->channels)};
  return nb::cast(nb::ndarray<nb::numpy, uint8_t>(owned->pixels.data(), 3, shape, owner));
}

void BindAll(nb::module_& m) {
  nb::exception<CorruptionError> corruption(m, "CorruptionError", PyExc_ValueError);
  corruption.attr("__doc__") =
      "Bytes in a source or cache are not what they claim (names the file).";
  corruption.attr("__module__") = "ssdfeed";  // users catch ssdfeed.CorruptionError
  nb::exception<CacheUnavailableError> unavailable(m, "CacheUnavailableError", PyExc_OSError);
  unavailable.attr("__doc__") =
      "No cache entry could be opened or made now: the cache root is full of entries in use, "
      "or a lock of it is held by a stopped process. ssdfeed.cache computes items from the "
      "dataset meanwhile and tries again later.";
  unavailable.attr("__module__") = "ssdfeed";
  // Registered after its base: nanobind tries the newest translator first.
  nb::exception<CacheFullError> full(m, "CacheFullError", unavailable);
  full.attr("__doc__") =
      "The cache root or its disk is full (a CacheUnavailableError, so an OSError): no entry "
      "can be made, or nothing more stored, until space is freed or the capacity raised.";
  full.attr("__module__") = "ssdfeed";
  m.def(
      "default_cache_root", [] { return DefaultCacheRoot(); },
      "$SSDFEED_CACHE, then ~/.cache/ssdfeed: the root the CLI uses too.");
  m.def(
      "default_prepare_canonical", [] { return DefaultPrepareSpec().Canonical(); },
      "Canonical text of the default preparation (full size, RGB).");
  m.def("describe_spec", &DescribeSpec, nb::arg("canonical"),
        "Short human form of a canonical prepare spec.");
  m.def(
      "default_workers", [] { return DefaultWorkers(); },
      "Worker threads used when workers is 0/None.");
  BindSource(m);
  BindImage(m);
  BindLoader(m);
  BindWarm(m);
  BindPeer(m);
  BindItems(m);
  BindItemStream(m);
}

}  // namespace ssdfeed::py
