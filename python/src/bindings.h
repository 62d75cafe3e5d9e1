// One Bind* function per area keeps each binding file small.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cctype>
#include <stdexcept>
#include <string>

#include "ssdfeed/enum_names.h"
#include "ssdfeed/image.h"
#include "ssdfeed/status.h"

namespace ssdfeed::py {

void BindAll(nanobind::module_& m);
void BindSource(nanobind::module_& m);
void BindImage(nanobind::module_& m);
void BindLoader(nanobind::module_& m);
void BindWarm(nanobind::module_& m);
void BindPeer(nanobind::module_& m);
void BindItems(nanobind::module_& m);
void BindItemStream(nanobind::module_& m);

// When s reports an exception a Python compute raised (an ItemSource's),
// sets it as the Python error, with the item's index added, and returns
// true: ThrowIfError then raises the user's own exception.
bool RaiseStashed(const Status& s);
// "<uri> item <i>:", how every Status message about item i starts: the tag
// an exception compute raised is kept under (python/src/item_errors.cc).
std::string ItemTag(const std::string& uri, uint64_t id);
// Keeps exc, what compute raised for tag, for RaiseStashed (the newest 64:
// under on_error=skip nobody takes them). GIL held, as for all three.
void StashException(std::string tag, uint64_t item, nanobind::object exc);
// Drops what compute raised for tag (a skipped item), or everything (at exit).
void DropStashed(const std::string& tag);
void DropAllStashed();

// Raises the Python exception that fits the Status (no-op when OK).
void ThrowIfError(const Status& s);

// No cache entry could be opened or made now (Python: ssdfeed.CacheUnavailableError,
// an OSError): the root is full of entries in use (NoSpace), or one of its
// locks stayed held past its bounded wait (Busy: a stopped process). Not the
// user's to fix: callers compute from the dataset and try again later.
class CacheUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The cache root or its disk is full (Python: ssdfeed.CacheFullError, a
// CacheUnavailableError, so an OSError): any NoSpace a call reports. Its
// own class, so that callers never recognise it by its message.
class CacheFullError : public CacheUnavailableError {
 public:
  using CacheUnavailableError::CacheUnavailableError;
};
// Throws CacheFullError for NoSpace, CacheUnavailableError for Busy, else
// as ThrowIfError.
void ThrowIfOpenError(const Status& s);

template <typename T>
T ValueOrThrow(Result<T> r) {
  ThrowIfError(r.status());
  return std::move(r).value();
}

// Hands an Image to numpy without copying: the array owns the Image.
nanobind::object ImageToArray(Image&& img);

// A Python enum from the spelling table (ssdfeed/enum_names.h): members
// are the spellings upper-cased (ShardMode.STICKY), and E.parse(text) takes
// the spelling the keyword argument takes, raising the C++ option check's
// ValueError (naming the bad value and the allowed ones) otherwise.
template <typename E>
nanobind::enum_<E> BindEnum(nanobind::module_& m, const char* name, const char* doc) {
  nanobind::enum_<E> e(m, name, doc);
  for (const auto& s : Spellings<E>()) {
    std::string upper = s.name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    e.value(upper.c_str(), s.value);
  }
  e.attr("parse") = nanobind::cpp_function(
      [](const std::string& text) { return ValueOrThrow(ParseEnum<E>(text)); },
      nanobind::arg("name"), "The member spelled name (as the keyword argument takes it).");
  return e;
}

}  // namespace ssdfeed::py
