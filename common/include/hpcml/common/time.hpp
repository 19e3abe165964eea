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

// Milliseconds since the epoch of an ISO 8601 date or time: "YYYY-MM-DD"
// (midnight), "YYYY-MM-DDTHH:MM[:SS[.fff...]]" ('T' or one space), then "Z",
// "+HH:MM" / "-HH:MM", or nothing. With no offset the time is UTC, as every
// time hpcml writes is. Digits after milliseconds are dropped. Other text is
// an InvalidArgument naming it.
Result<std::int64_t> ParseIsoMillis(std::string_view text);

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's
// algorithms), over the whole int64 range of days: <chrono>'s year stops at
// +-32767, and a timestamp column may hold any int64.
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d);
void CivilFromDays(std::int64_t days, std::int64_t* y, unsigned* m, unsigned* d);

}  // namespace hpcml
