#include "hpcml/common/log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace hpcml {

bool ParseLogLevel(std::string_view text, LogLevel* out) {
  if (text == "debug")
    *out = LogLevel::kDebug;
  else if (text == "info")
    *out = LogLevel::kInfo;
  else if (text == "warning" || text == "warn")
    *out = LogLevel::kWarning;
  else if (text == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

Logger::Logger(std::string component) : component_(std::move(component)) {
  if (const char* env = std::getenv("HPCML_LOG_LEVEL"); env != nullptr && *env != '\0') {
    if (!ParseLogLevel(env, &level_)) {
      warn("HPCML_LOG_LEVEL={}: unknown level (use debug, info, warning or error); using info",
           env);
    }
  }
}

void Logger::log(LogLevel level, std::string_view message) {
  if (level < level_) return;
  std::string_view tag;
  switch (level) {
    case LogLevel::kDebug:
      tag = "debug: ";
      break;
    case LogLevel::kInfo:
      break;
    case LogLevel::kWarning:
      tag = "warning: ";
      break;
    case LogLevel::kError:
      tag = "error: ";
      break;
  }
  std::string line = fmt::format("{}: {}{}\n", component_, tag, message);
  std::string_view rest = line;
  while (!rest.empty()) {
    ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Nowhere to report a failed log write.
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace hpcml
