// Logging with a component prefix: "hpcml-fcache: warning: <message>".
//
// One line is written with a single write(2) so lines from concurrent ranks
// and threads do not interleave. Thread-safe. The threshold comes from
// HPCML_LOG_LEVEL (debug, info, warning, error; default info).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace hpcml {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parses "debug" / "info" / "warning" (or "warn") / "error"; false if unknown.
bool ParseLogLevel(std::string_view text, LogLevel* out);

class Logger {
 public:
  // `component` is the program or library name shown before every line.
  explicit Logger(std::string component);

  const std::string& component() const { return component_; }
  LogLevel level() const { return level_; }
  void set_level(LogLevel level) { level_ = level; }
  // Where lines go; stderr by default. The fd is borrowed, not owned.
  void set_fd(int fd) { fd_ = fd; }

  template <typename... Args>
  void debug(fmt::format_string<Args...> f, Args&&... args) {
    log(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) {
    log(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) {
    log(LogLevel::kWarning, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void error(fmt::format_string<Args...> f, Args&&... args) {
    log(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
  }

  void log(LogLevel level, std::string_view message);

 private:
  std::string component_;
  LogLevel level_ = LogLevel::kInfo;
  int fd_ = 2;
};

}  // namespace hpcml
