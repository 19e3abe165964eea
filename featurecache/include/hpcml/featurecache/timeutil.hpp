// Event times: int64 microseconds since 1970-01-01T00:00:00Z (UTC), which is
// what the `timestamps` dataset stores.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

// An ISO 8601 date or time (hpcml::ParseIsoMicros, common/time.hpp: the one
// grammar), or a plain number of seconds since the epoch ("1700000000",
// "1700000000.25", negative allowed); blanks around it are ignored. The
// error says what was wrong, without a location: callers add the file, line
// and column.
Result<int64_t> ParseTimestamp(std::string_view text);

// "2024-03-01T12:00:00Z", with ".ffffff" (trailing zeros trimmed) when the
// time has a fraction of a second.
std::string FormatTimestamp(int64_t micros);

}  // namespace hpcml::featurecache
