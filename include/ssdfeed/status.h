// Status and Result<T>: how the core reports errors. No exceptions cross the
// core's API; the Python edge turns a bad Status into an exception.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace ssdfeed {

class Status {
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
    kAborted,  // stopped on purpose (shutdown)
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
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsNoSpace() const { return code_ == Code::kNoSpace; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  const std::string& message() const { return msg_; }
  std::string ToString() const;

  // Prefixes the message with context, keeping the code.
  Status WithContext(const std::string& ctx) const {
    if (ok()) return *this;
    return Status(code_, ctx + ": " + msg_);
  }

 private:
  Status(Code c, std::string m) : code_(c), msg_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string msg_;
};

// A value or the Status that says why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}                        // NOLINT: implicit by design
  Result(Status s) : status_(std::move(s)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
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
