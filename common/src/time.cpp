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
