// Event times: int64 microseconds since 1970-01-01T00:00:00Z (UTC), which is
// what the `timestamps` dataset stores.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

// Accepts ISO 8601 "YYYY-MM-DD", "YYYY-MM-DDThh:mm[:ss[.ffffff]]" (a space may
// replace the T) with an optional "Z" or "+hh:mm"/"-hhmm" offset (no offset
// means UTC), or a plain number of seconds since the epoch ("1700000000",
// "1700000000.25", negative allowed). The error says what was wrong, without
// a location: callers add the file, line and column.
Result<int64_t> ParseTimestamp(std::string_view text);

// "2024-03-01T12:00:00Z", with ".ffffff" (trailing zeros trimmed) when the
// time has a fraction of a second.
std::string FormatTimestamp(int64_t micros);

// "90s", "15m", "2h", "7d", "1w", "250ms", "10us", or a plain number of
// seconds; fractions allowed ("1.5h"). Returns microseconds; must be >= 0.
Result<int64_t> ParseDuration(std::string_view text);

}  // namespace hpcml::featurecache
