#include "hpcml/common/time.hpp"

#include <fmt/format.h>

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

// `n` digits of `s` at `pos` into `out`.
bool Digits(std::string_view s, std::size_t pos, std::size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
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

Result<std::int64_t> ParseIsoMillis(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument(
        "time '{}' is not ISO 8601 (YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.fff]][Z|+HH:MM])", text);
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0;
  if (!Digits(text, 0, 4, &y) || text.size() < 10 || text[4] != '-' || !Digits(text, 5, 2, &mo) ||
      text[7] != '-' || !Digits(text, 8, 2, &d))
    return bad();
  std::size_t pos = 10;
  std::int64_t offset_min = 0;
  if (pos < text.size()) {
    if (text[pos] != 'T' && text[pos] != ' ') return bad();
    if (!Digits(text, pos + 1, 2, &h) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !Digits(text, pos + 4, 2, &mi))
      return bad();
    pos += 6;
    if (pos < text.size() && text[pos] == ':') {
      if (!Digits(text, pos + 1, 2, &sec)) return bad();
      pos += 3;
      if (pos < text.size() && text[pos] == '.') {
        std::size_t i = pos + 1;
        int scale = 100;
        for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, scale /= 10)
          ms += (text[i] - '0') * scale;
        if (i == pos + 1) return bad();
        pos = i;
      }
    }
    if (pos < text.size()) {
      int oh = 0, om = 0;
      if (text[pos] == 'Z' && pos + 1 == text.size()) {
        pos += 1;
      } else if ((text[pos] == '+' || text[pos] == '-') && text.size() == pos + 6 &&
                 Digits(text, pos + 1, 2, &oh) && text[pos + 3] == ':' &&
                 Digits(text, pos + 4, 2, &om) && oh < 24 && om < 60) {
        offset_min = (text[pos] == '-' ? -1 : 1) * (oh * 60 + om);
        pos += 6;
      } else {
        return bad();
      }
    }
  }
  if (pos != text.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return bad();
  const std::int64_t s =
      DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
      mi * 60 + sec - offset_min * 60;
  return s * 1000 + ms;
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
