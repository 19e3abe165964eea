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

}  // namespace hpcml
