// Status and Result<T>: how the core reports errors. No exceptions cross the
// core's API; the Python edge turns a bad Status into an exception.
//
// Both are [[nodiscard]]: a dropped Status is a lost error. Where dropping one
// is right (best-effort cleanup after an earlier failure), say so with
// IgnoreError() and a comment on why.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace ssdfeed {

class [[nodiscard]] Status {
 public:
  enum class Code : int {
    kOk = 0,
    kNotFound,
    kCorruption,  // bytes on disk or in a source are not what they claim
    kInvalidArgument,
    kIOError,
    kNoSpace,  // ENOSPC / EDQUOT / capacity reached
    kNotSupported,
    kBusy,     // held by someone else (a lock, a claim)
    kAborted,  // the operation gave up before it ran to completion
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status InvalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status IOError(std::string m) { return Status(Code::kIOError, std::move(m)); }
  static Status NoSpace(std::string m) { return Status(Code::kNoSpace, std::move(m)); }
  static Status NotSupported(std::string m) { return Status(Code::kNotSupported, std::move(m)); }
  static Status Busy(std::string m) { return Status(Code::kBusy, std::move(m)); }
  static Status Aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
  // An I/O error from errno, naming the file: "open /x/y: No such file".
  // ENOENT is NotFound, ENOSPC/EDQUOT NoSpace, EWOULDBLOCK Busy.
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsNoSpace() const { return code_ == Code::kNoSpace; }
  bool IsNotSupported() const { return code_ == Code::kNotSupported; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsAborted() const { return code_ == Code::kAborted; }
  const std::string& message() const { return msg_; }
  // "OK", or the code's name and the message: "NotFound: open /x: ...".
  std::string ToString() const;
  // The code's name alone: "NotFound".
  static const char* CodeName(Code c);

  // Prefixes the message with context, keeping the code.
  Status WithContext(const std::string& ctx) const {
    if (ok()) return *this;
    return Status(code_, ctx + ": " + msg_);
  }

  // Drops this status on purpose. Only where losing the error is right (a
  // best-effort cleanup after the real error is already being returned); the
  // call site says why in a comment.
  void IgnoreError() const {}

 private:
  Status(Code c, std::string m) : code_(c), msg_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string msg_;
};

namespace status_internal {
// Print what was misused and abort; out of line so Result stays small.
[[noreturn]] void DieValueOfError(const Status& s);
[[noreturn]] void DieOkWithoutValue();
}  // namespace status_internal

// A value or the Status that says why there is none. Reading the value of an
// error Result, or making a Result from an OK Status (an error with no
// error), aborts with a message naming the status, in every build type: the
// alternative is undefined behaviour far from the mistake.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : status_(std::move(s)) {     // NOLINT
    if (status_.ok()) status_internal::DieOkWithoutValue();
  }

  bool ok() const { return status_.ok(); }
  // OK when there is a value.
  const Status& status() const { return status_; }
  T& value() & { return *Checked(); }
  const T& value() const& { return *Checked(); }
  T&& value() && { return std::move(*Checked()); }
  T* operator->() { return &*Checked(); }
  const T* operator->() const { return &*Checked(); }
  T& operator*() & { return *Checked(); }
  const T& operator*() const& { return *Checked(); }
  T&& operator*() && { return std::move(*Checked()); }
  // Drops the value or the error on purpose (see Status::IgnoreError).
  void IgnoreError() const {}

 private:
  std::optional<T>& Checked() {
    if (!value_) status_internal::DieValueOfError(status_);
    return value_;
  }
  const std::optional<T>& Checked() const {
    if (!value_) status_internal::DieValueOfError(status_);
    return value_;
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace ssdfeed

#define SSDFEED_CONCAT_INNER(a, b) a##b
#define SSDFEED_CONCAT(a, b) SSDFEED_CONCAT_INNER(a, b)

// Returns early from the enclosing function with a bad Status.
#define SSDFEED_RETURN_IF_ERROR(expr) \
  do {                                \
    ::ssdfeed::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)

#define SSDFEED_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define SSDFEED_ASSIGN_OR_RETURN(lhs, expr) \
  SSDFEED_ASSIGN_OR_RETURN_IMPL(SSDFEED_CONCAT(_res_, __LINE__), lhs, expr)
