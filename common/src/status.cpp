#include "hpcml/common/status.hpp"

#include <cerrno>
#include <cstring>

namespace hpcml {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
  if (code_ != StatusCode::kOk && message_.empty()) message_ = std::string(StatusCodeName(code_));
}

std::string Status::ToString() const {
  return ok() ? "ok" : message_;
}

std::string Status::Debug() const {
  if (ok()) return "ok";
  std::string s = fmt::format("{} [{}]", message_, StatusCodeName(code_));
  if (!trail_.empty()) s += " at " + trail_;
  return s;
}

Status Status::WithContext(std::string_view context) && {
  if (!ok()) message_ = fmt::format("{}: {}", context, message_);
  return std::move(*this);
}

Status Status::WithContext(std::string_view context) const& {
  Status copy = *this;
  return std::move(copy).WithContext(context);
}

Status Status::At(std::source_location loc) && {
  if (ok()) return std::move(*this);
  std::string_view file = loc.file_name();
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  if (!trail_.empty()) trail_ += " <- ";
  trail_ += fmt::format("{}:{}", file, loc.line());
  return std::move(*this);
}

Status ErrnoError(std::string_view what, int err) {
  // strerror_r (GNU) may or may not use the buffer; use what it returns.
  char buf[256];
  const char* text = strerror_r(err, buf, sizeof buf);
  StatusCode code = StatusCode::kIoError;
  if (err == ENOENT) code = StatusCode::kNotFound;
  if (err == EACCES || err == EPERM) code = StatusCode::kPermissionDenied;
  if (err == EEXIST) code = StatusCode::kAlreadyExists;
  return Status(code, fmt::format("{}: {}", what, text));
}

}  // namespace hpcml
