// Status's out-of-line parts: names for its codes and the aborts Result uses.
#include "ssdfeed/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ssdfeed {

Status Status::FromErrno(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  if (err == ENOENT) return NotFound(m);
  if (err == ENOSPC || err == EDQUOT) return NoSpace(m);
  if (err == EWOULDBLOCK) return Busy(m);
  return IOError(m);
}

// A switch without default: -Wswitch (an error here) flags a new code left
// without its name.
const char* Status::CodeName(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NotFound";
    case Code::kCorruption:
      return "Corruption";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kIOError:
      return "IOError";
    case Code::kNoSpace:
      return "NoSpace";
    case Code::kNotSupported:
      return "NotSupported";
    case Code::kBusy:
      return "Busy";
    case Code::kAborted:
      return "Aborted";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + msg_;
}

namespace status_internal {

void DieValueOfError(const Status& s) {
  std::fprintf(stderr, "ssdfeed: value() of a Result that holds an error: %s\n",
               s.ToString().c_str());
  std::abort();
}

void DieOkWithoutValue() {
  std::fprintf(stderr, "ssdfeed: Result made from an OK Status, with no value\n");
  std::abort();
}

}  // namespace status_internal
}  // namespace ssdfeed
