// Status and Result<T>: how every hpcml library reports failure.
//
// Contract: a library function that can fail returns Status or Result<T> and
// never throws for expected failures (bad input, missing files). Programs turn
// a failed Status into a message and an exit code in main(). The message is
// meant for the user and names the object (file, line, option); the location
// trail added by HPCML_RETURN_IF_ERROR is for developers (Status::Debug()).
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hpcml {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kIoError,
  kCorrupt,
  kUnavailable,
  kFailedPrecondition,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<message>" for OK-less statuses; "ok" for OK.
  std::string ToString() const;
  // ToString() plus the file:line trail collected on the way up.
  std::string Debug() const;

  // Prefixes the message: "<context>: <message>". No-op on OK.
  Status WithContext(std::string_view context) &&;
  Status WithContext(std::string_view context) const&;

  // Appends the caller's location to the trail. No-op on OK.
  Status At(std::source_location loc = std::source_location::current()) &&;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string trail_;
};

// Constructors for each code, with fmt formatting.
#define HPCML_DEFINE_STATUS_FN(Name, Code)                                        \
  template <typename... Args>                                                     \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {                    \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...)); \
  }
HPCML_DEFINE_STATUS_FN(InvalidArgument, kInvalidArgument)
HPCML_DEFINE_STATUS_FN(NotFound, kNotFound)
HPCML_DEFINE_STATUS_FN(AlreadyExists, kAlreadyExists)
HPCML_DEFINE_STATUS_FN(PermissionDenied, kPermissionDenied)
HPCML_DEFINE_STATUS_FN(IoError, kIoError)
HPCML_DEFINE_STATUS_FN(Corrupt, kCorrupt)
HPCML_DEFINE_STATUS_FN(Unavailable, kUnavailable)
HPCML_DEFINE_STATUS_FN(FailedPrecondition, kFailedPrecondition)
HPCML_DEFINE_STATUS_FN(Internal, kInternal)
#undef HPCML_DEFINE_STATUS_FN

// IoError from errno: "<what>: <strerror(errno)>".
Status ErrnoError(std::string_view what, int err);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok())
      v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error; OK when a value is held.
  Status status() const& { return ok() ? Status() : std::get<Status>(v_); }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hpcml

#define HPCML_CONCAT_INNER_(a, b) a##b
#define HPCML_CONCAT_(a, b) HPCML_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the current function if it is not OK,
// adding this file and line to its trail.
#define HPCML_RETURN_IF_ERROR(expr)                                \
  do {                                                             \
    ::hpcml::Status hpcml_status_ = (expr);                        \
    if (!hpcml_status_.ok()) return std::move(hpcml_status_).At(); \
  } while (0)

// `lhs = value of expr` or return its Status. `lhs` may declare a variable.
#define HPCML_ASSIGN_OR_RETURN(lhs, expr) \
  HPCML_ASSIGN_OR_RETURN_IMPL_(HPCML_CONCAT_(hpcml_result_, __LINE__), lhs, expr)
#define HPCML_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)  \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status().At(); \
  lhs = std::move(tmp).value()
