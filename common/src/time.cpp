#include "hpcml/common/time.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <utility>

namespace hpcml {
namespace {

using std::chrono::days;
using std::chrono::floor;
using std::chrono::milliseconds;

// Date and time of day of `t`; `millis` appends ".mmm".
std::string Format(std::chrono::system_clock::time_point t, bool millis) {
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<days>(ms);
  const std::chrono::year_month_day ymd(day);
  const std::chrono::hh_mm_ss<milliseconds> tod(ms - day);
  std::string out =
      fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  tod.hours().count(), tod.minutes().count(), tod.seconds().count());
  if (millis) out += fmt::format(".{:03d}", tod.subseconds().count());
  return out + "Z";
}

// Exactly `n` digits at s[*pos..] into `out`; advances *pos.
bool Digits(std::string_view s, std::size_t* pos, std::size_t n, unsigned* out) {
  if (*pos + n > s.size()) return false;
  unsigned v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

unsigned DaysInMonth(std::int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

Status NotATime(std::string_view s) {
  return InvalidArgument(
      "\"{}\" is not a time (ISO 8601: YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.ffffff]][Z|+hh:mm])", s);
}

// The offset from UTC in minutes of s[pos..]: nothing, Z, or +hh, +hhmm,
// +hh:mm (or '-').
Result<std::int64_t> ParseZone(std::string_view s, std::size_t pos) {
  if (pos == s.size()) return std::int64_t{0};
  const char sign = s[pos];
  if ((sign == 'Z' || sign == 'z') && pos + 1 == s.size()) return std::int64_t{0};
  if (sign != '+' && sign != '-') return NotATime(s);
  ++pos;
  unsigned oh = 0, om = 0;
  if (!Digits(s, &pos, 2, &oh)) return NotATime(s);
  if (pos < s.size() && s[pos] == ':') ++pos;
  if (pos < s.size() && !Digits(s, &pos, 2, &om)) return NotATime(s);
  if (pos != s.size() || oh > 23 || om > 59) return NotATime(s);
  return (sign == '+' ? 1 : -1) * static_cast<std::int64_t>(oh * 60 + om);
}

}  // namespace

std::string FormatUtc(std::chrono::system_clock::time_point t) {
  return Format(t, false);
}

std::string FormatUtcMillis(std::chrono::system_clock::time_point t) {
  return Format(t, true);
}

std::string UtcNow() {
  return FormatUtc(std::chrono::system_clock::now());
}

Result<std::int64_t> ParseIsoMicros(std::string_view s) {
  std::size_t pos = 0;
  unsigned year = 0, month = 0, day = 0;
  if (!Digits(s, &pos, 4, &year) || pos >= s.size() || s[pos++] != '-' ||
      !Digits(s, &pos, 2, &month) || pos >= s.size() || s[pos++] != '-' ||
      !Digits(s, &pos, 2, &day))
    return NotATime(s);
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month))
    return InvalidArgument("\"{}\": no such date", s);
  unsigned hour = 0, minute = 0, second = 0;
  std::int64_t micros = 0;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == 't' || s[pos] == ' ')) {
    ++pos;
    if (!Digits(s, &pos, 2, &hour) || pos >= s.size() || s[pos++] != ':' ||
        !Digits(s, &pos, 2, &minute))
      return NotATime(s);
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      if (!Digits(s, &pos, 2, &second)) return NotATime(s);
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
        const std::size_t start = ++pos;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
        const std::size_t n = pos - start;
        if (n == 0) return NotATime(s);
        if (n > 6)
          return InvalidArgument("\"{}\": more than 6 fractional digits (microseconds)", s);
        for (std::size_t i = 0; i < 6; ++i) micros = micros * 10 + (i < n ? s[start + i] - '0' : 0);
      }
    }
    if (hour > 23 || minute > 59 || second > 59)
      return InvalidArgument("\"{}\": no such time of day", s);
  }
  HPCML_ASSIGN_OR_RETURN(std::int64_t offset_minutes, ParseZone(s, pos));
  const std::int64_t secs = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 +
                            second - offset_minutes * 60;
  return secs * 1'000'000 + micros;
}

Result<std::int64_t> ParseIsoMillis(std::string_view text) {
  HPCML_ASSIGN_OR_RETURN(std::int64_t micros, ParseIsoMicros(text));
  return micros >= 0 ? micros / 1000 : -((-micros + 999) / 1000);
}

Result<std::int64_t> ParseDurationMicros(std::string_view s) {
  std::size_t i = 0;
  bool dot = false, digits = false;
  for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && !dot)); ++i) {
    dot = dot || s[i] == '.';
    digits = digits || s[i] != '.';
  }
  const std::string_view num = s.substr(0, i), unit = s.substr(i);
  if (!digits) return InvalidArgument("\"{}\" is not a duration (use e.g. 90s, 15m, 2h, 7d)", s);
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"", 1e6},     {"s", 1e6},    {"us", 1},      {"ms", 1e3},       {"m", 60e6},
      {"min", 60e6}, {"h", 3600e6}, {"d", 86400e6}, {"w", 7 * 86400e6}};
  double factor = 0;
  for (const auto& [name, f] : kUnits) {
    if (unit == name) factor = f;
  }
  if (factor == 0)
    return InvalidArgument("\"{}\": unknown duration unit \"{}\" (us, ms, s, m, h, d, w)", s, unit);
  double value = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (ec != std::errc() || p != num.data() + num.size())
    return InvalidArgument("\"{}\" is not a duration", s);
  const double micros = std::round(value * factor);
  if (!(micros < 9.2e18)) return InvalidArgument("\"{}\": duration out of range", s);
  return static_cast<std::int64_t>(micros);
}

std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void CivilFromDays(std::int64_t z, std::int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<std::int64_t>(yoe) + era * 400 + (*m <= 2);
}

}  // namespace hpcml
