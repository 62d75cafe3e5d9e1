// Exceptions a Python compute raised (python/src/bind_items.cc), kept as
// the exception objects until the binding call whose Status reports them
// raises them again, with the item's index added: the user sees their own
// exception type, not a RuntimeError of its text.
#include <nanobind/nanobind.h>

#include <deque>
#include <string>
#include <utility>

#include "python/src/bindings.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

// Exceptions compute raised, waiting for the binding call that reports
// them. Touched only with the GIL held. Heap-held and never freed: a static
// would drop Python objects after the interpreter is gone.
struct Stashed {
  std::string tag;  // "<uri> item <i>:", how the Status message starts
  uint64_t item = 0;
  nb::object exc;
};
std::deque<Stashed>& Stash() {
  static auto* stash = new std::deque<Stashed>();
  return *stash;
}
// Under on_error=skip nobody takes them: keep only the newest.
constexpr size_t kMaxStashed = 64;

// The index goes into the message when the exception's str() is its one
// string argument (most exceptions), else into a note (Python 3.11+).
// Best effort: an exception whose args or notes cannot be set is raised as
// it is rather than replaced by that failure.
void AddIndex(nb::handle exc, uint64_t item) {
  std::string where = " (item " + std::to_string(item) + ")";
  try {
    nb::object base_str = nb::module_::import_("builtins").attr("BaseException").attr("__str__");
    nb::object args = exc.attr("args");
    bool plain = nb::len(args) == 1 && nb::isinstance<nb::str>(args[0]) &&
                 exc.type().attr("__str__").is(base_str);
    if (plain) {
      std::string msg = nb::cast<std::string>(args[0]);
      if (msg.size() < where.size() || msg.compare(msg.size() - where.size(), where.size(), where))
        exc.attr("args") = nb::make_tuple(nb::str((msg + where).c_str()));
    } else if (nb::hasattr(exc, "add_note")) {
      exc.attr("add_note")(("ssdfeed: raised while computing" + where).c_str());
    }
  } catch (nb::python_error& e) {
    e.restore();
    PyErr_Clear();
  } catch (const std::exception&) {  // a str that is not UTF-8
  }
}

}  // namespace

bool RaiseStashed(const Status& s) {
  auto& stash = Stash();
  const std::string& msg = s.message();
  for (auto it = stash.rbegin(); it != stash.rend(); ++it) {
    if (msg.find(it->tag) == std::string::npos) continue;
    nb::object exc = std::move(it->exc);
    uint64_t item = it->item;
    stash.erase(std::next(it).base());
    AddIndex(exc, item);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    return true;
  }
  return false;
}

void DropAllStashed() { Stash().clear(); }

std::string ItemTag(const std::string& uri, uint64_t id) {
  return uri + " item " + std::to_string(id) + ":";
}

void StashException(std::string tag, uint64_t item, nb::object exc) {
  auto& s = Stash();
  s.push_back({std::move(tag), item, std::move(exc)});
  while (s.size() > kMaxStashed) s.pop_front();
}

void DropStashed(const std::string& tag) {
  auto& s = Stash();
  for (auto it = s.begin(); it != s.end();) it = it->tag == tag ? s.erase(it) : std::next(it);
}

}  // namespace ssdfeed::py
