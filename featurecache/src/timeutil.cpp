#include "hpcml/featurecache/timeutil.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"

namespace hpcml::featurecache {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;
constexpr int64_t kMicrosPerDay = 86'400 * kMicrosPerSecond;

bool IsLeap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Exactly `n` digits at s[pos..]; advances pos.
bool Digits(std::string_view s, size_t* pos, size_t n, unsigned* out) {
  if (*pos + n > s.size()) return false;
  unsigned v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool IsPlainNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  bool digits = false, dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digits = true;
    } else if (s[i] == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digits;
}

// Seconds with an optional fraction, exactly to the microsecond.
Result<int64_t> SecondsToMicros(std::string_view s) {
  bool neg = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  std::string_view whole = s, frac;
  if (auto dot = s.find('.'); dot != std::string_view::npos) {
    whole = s.substr(0, dot);
    frac = s.substr(dot + 1);
  }
  int64_t secs = 0;
  if (!whole.empty()) {
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), secs);
    if (ec != std::errc() || p != whole.data() + whole.size())
      return InvalidArgument("number out of range");
  }
  if (frac.size() > 6) return InvalidArgument("more than 6 fractional digits (microseconds)");
  int64_t micros = 0;
  for (size_t i = 0; i < 6; ++i) micros = micros * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  if (secs > (std::numeric_limits<int64_t>::max() - micros) / kMicrosPerSecond) {
    return InvalidArgument("time out of range");
  }
  int64_t v = secs * kMicrosPerSecond + micros;
  return neg ? -v : v;
}

// The error for text that is no time at all.
Status NotATime(std::string_view s) {
  return InvalidArgument(
      "\"{}\" is not a time (use ISO 8601 like 2024-03-01T12:00:00Z or seconds since 1970)", s);
}

// The zone of an ISO 8601 time, from s[pos] to the end: nothing (UTC), Z, or
// +hh[:mm] / -hh[:mm]; its offset from UTC in minutes.
Result<int64_t> ParseZone(std::string_view s, size_t pos) {
  if (pos >= s.size()) return int64_t{0};
  const char c = s[pos];
  if ((c == 'Z' || c == 'z') && pos + 1 == s.size()) return int64_t{0};
  if (c != '+' && c != '-') return NotATime(s);
  ++pos;
  unsigned oh = 0, om = 0;
  if (!Digits(s, &pos, 2, &oh)) return NotATime(s);
  if (pos < s.size() && s[pos] == ':') ++pos;
  if (pos < s.size() && !Digits(s, &pos, 2, &om)) return NotATime(s);
  if (pos != s.size() || oh > 23 || om > 59) return NotATime(s);
  return (c == '+' ? 1 : -1) * static_cast<int64_t>(oh * 60 + om);
}

}  // namespace

Result<int64_t> ParseTimestamp(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  if (s.empty()) return InvalidArgument("empty time");
  if (IsPlainNumber(s)) return SecondsToMicros(s);
  auto bad = [&]() { return NotATime(s); };
  size_t pos = 0;
  unsigned year = 0, month = 0, day = 0;
  if (!Digits(s, &pos, 4, &year) || pos >= s.size() || s[pos++] != '-' ||
      !Digits(s, &pos, 2, &month) || pos >= s.size() || s[pos++] != '-' ||
      !Digits(s, &pos, 2, &day)) {
    return bad();
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month)) {
    return InvalidArgument("\"{}\": no such date", s);
  }
  unsigned hour = 0, minute = 0, second = 0;
  int64_t micros = 0;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == 't' || s[pos] == ' ')) {
    ++pos;
    if (!Digits(s, &pos, 2, &hour) || pos >= s.size() || s[pos++] != ':' ||
        !Digits(s, &pos, 2, &minute)) {
      return bad();
    }
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      if (!Digits(s, &pos, 2, &second)) return bad();
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
        ++pos;
        size_t start = pos;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
        size_t n = pos - start;
        if (n == 0) return bad();
        if (n > 6)
          return InvalidArgument("\"{}\": more than 6 fractional digits (microseconds)", s);
        for (size_t i = 0; i < 6; ++i) micros = micros * 10 + (i < n ? s[start + i] - '0' : 0);
      }
    }
    if (hour > 23 || minute > 59 || second > 59)
      return InvalidArgument("\"{}\": no such time of day", s);
  }
  HPCML_ASSIGN_OR_RETURN(int64_t offset_minutes, ParseZone(s, pos));
  int64_t days = DaysFromCivil(year, month, day);
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
  return secs * kMicrosPerSecond + micros;
}

std::string FormatTimestamp(int64_t micros) {
  int64_t days = micros / kMicrosPerDay;
  int64_t rem = micros % kMicrosPerDay;
  if (rem < 0) {
    rem += kMicrosPerDay;
    --days;
  }
  int64_t y = 0;
  unsigned m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  int64_t secs = rem / kMicrosPerSecond;
  int64_t frac = rem % kMicrosPerSecond;
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", y, m, d, secs / 3600,
                                secs / 60 % 60, secs % 60);
  if (frac != 0) {
    std::string f = fmt::format("{:06}", frac);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  out += "Z";
  return out;
}

Result<int64_t> ParseDuration(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  std::string_view num = s.substr(0, i), unit = s.substr(i);
  if (num.empty() || !IsPlainNumber(num)) {
    return InvalidArgument("\"{}\" is not a duration (use e.g. 90s, 15m, 2h, 7d)", s);
  }
  double factor = 0;
  if (unit.empty() || unit == "s")
    factor = 1e6;
  else if (unit == "us")
    factor = 1;
  else if (unit == "ms")
    factor = 1e3;
  else if (unit == "m" || unit == "min")
    factor = 60e6;
  else if (unit == "h")
    factor = 3600e6;
  else if (unit == "d")
    factor = 86400e6;
  else if (unit == "w")
    factor = 7 * 86400e6;
  else
    return InvalidArgument("\"{}\": unknown duration unit \"{}\" (us, ms, s, m, h, d, w)", s, unit);
  double value = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (ec != std::errc() || p != num.data() + num.size())
    return InvalidArgument("\"{}\" is not a duration", s);
  double micros = std::round(value * factor);
  if (!(micros < 9.2e18)) return InvalidArgument("\"{}\": duration out of range", s);
  return static_cast<int64_t>(micros);
}

}  // namespace hpcml::featurecache
