// Numbers in sacct fields and usage summaries: the whole text or nothing.
// std::from_chars (libstdc++ 11+ for double): no locale, no allocation.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace hpcml::accounting {

// `text`, all of it, as a decimal integer.
inline bool ParseWholeInt(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// `text`, all of it, as a finite number (not inf or nan).
inline bool ParseFiniteDouble(std::string_view text, double* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

}  // namespace hpcml::accounting
