// Force-included (-include) into the fuzz build only. clang 14 with
// libstdc++ 12 has no std::source_location (it lacks
// __builtin_source_location), which hpcml/common/status.hpp uses for the
// developer trail of a Status. The fuzz targets only need it to compile:
// this stand-in reports "?:0" and is never used by the product build (g++).
#pragma once
#include <source_location>
#if !defined(__cpp_lib_source_location)
namespace std {
struct source_location {
  static constexpr source_location current() noexcept { return {}; }
  constexpr const char* file_name() const noexcept { return "?"; }
  constexpr const char* function_name() const noexcept { return "?"; }
  constexpr unsigned line() const noexcept { return 0; }
  constexpr unsigned column() const noexcept { return 0; }
};
}  // namespace std
#endif
