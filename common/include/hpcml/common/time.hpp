// Times as hpcml writes them: UTC in ISO 8601, from <chrono>'s calendar, so
// no call loads /etc/localtime (tzset) or depends on the locale.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml {

// "2026-11-24T05:06:37Z" (whole seconds, rounded down).
std::string FormatUtc(std::chrono::system_clock::time_point t);

// "2026-11-24T05:06:37.123Z" (milliseconds, rounded down).
std::string FormatUtcMillis(std::chrono::system_clock::time_point t);

// FormatUtc of now.
std::string UtcNow();

// Microseconds since the epoch of an ISO 8601 date or time: the one
// grammar every hpcml tool reads (CSV timestamps, --since/--as-of options,
// the times hpcml writes). "YYYY-MM-DD" (midnight), or that, 'T', 't' or one
// space, and "hh:mm[:ss[.f]]" (1 to 6 fractional digits after '.' or ','),
// then nothing (UTC, as every time hpcml writes is), "Z"/"z", or an offset
// "+hh", "+hhmm", "+hh:mm" (or '-'). The date must exist (days per month,
// leap years); 24:00 and leap seconds (:60) are refused. The error says what
// is wrong, without a location: callers add the file, line or option.
Result<std::int64_t> ParseIsoMicros(std::string_view text);

// ParseIsoMicros in milliseconds, rounded down.
Result<std::int64_t> ParseIsoMillis(std::string_view text);

// A length of time in microseconds (>= 0): a number, fractions allowed, and
// a unit: "us", "ms", "s" (or none), "m" or "min", "h", "d", "w" ("90s",
// "1.5h", "7d").
Result<std::int64_t> ParseDurationMicros(std::string_view text);

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's
// algorithms), over the whole int64 range of days: <chrono>'s year stops at
// +-32767, and a timestamp column may hold any int64.
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d);
void CivilFromDays(std::int64_t days, std::int64_t* y, unsigned* m, unsigned* d);

}  // namespace hpcml
