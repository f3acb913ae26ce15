#pragma once

// Status and Result<T>: how errors cross module boundaries (no exceptions do). Status is for broken input and I/O;
// "this pod does not fit" is not an error (see policy::Fit).

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <variant>

#include "gpusched/common/check.h"

namespace gpusched::common {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kResourceExhausted,
  kUnavailable,
  kInternal,
  kUnauthenticated,   // 401: no or bad credentials
  kPermissionDenied,  // 403: authenticated but not allowed
  kAborted,           // 409 on an update: a conflict (stale resourceVersion, already bound)
  kDeadlineExceeded,  // a call that ran out of time
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  [[nodiscard]] bool ok() const { return code_ == StatusCode::kOk; }
  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  [[nodiscard]] std::string ToString() const;

  friend std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status AlreadyExists(std::string msg) { return {StatusCode::kAlreadyExists, std::move(msg)}; }
inline Status FailedPrecondition(std::string msg) { return {StatusCode::kFailedPrecondition, std::move(msg)}; }
inline Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
inline Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
inline Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status Unauthenticated(std::string msg) { return {StatusCode::kUnauthenticated, std::move(msg)}; }
inline Status PermissionDenied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
inline Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
inline Status DeadlineExceeded(std::string msg) { return {StatusCode::kDeadlineExceeded, std::move(msg)}; }

// A value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor): implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    GPUSCHED_CHECK(!std::get<Status>(v_).ok(), "Result constructed from an OK status without a value");
  }

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(v_); }
  [[nodiscard]] Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & {
    GPUSCHED_CHECK(ok(), "value() on an error Result");
    return std::get<T>(v_);
  }
  const T& value() const& {
    GPUSCHED_CHECK(ok(), "value() on an error Result");
    return std::get<T>(v_);
  }
  T&& value() && {
    GPUSCHED_CHECK(ok(), "value() on an error Result");
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpusched::common

// Returns the Status from the enclosing function if it is not OK.
#define GPUSCHED_RETURN_IF_ERROR(expr)               \
  do {                                               \
    ::gpusched::common::Status gpusched_s_ = (expr); \
    if (!gpusched_s_.ok()) {                         \
      return gpusched_s_;                            \
    }                                                \
  } while (false)

// Declares `lhs` from a Result<T> expression, or returns its Status from the enclosing function.
#define GPUSCHED_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_result_ = (expr);               \
  if (!lhs##_result_.ok()) {                 \
    return lhs##_result_.status();           \
  }                                          \
  auto lhs = std::move(lhs##_result_.value())
