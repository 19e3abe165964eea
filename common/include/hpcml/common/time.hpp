// Times as hpcml writes them: UTC in ISO 8601, from <chrono>'s calendar, so
// no call loads /etc/localtime (tzset) or depends on the locale.
#pragma once

#include <chrono>
#include <string>

namespace hpcml {

// "2026-11-24T05:06:37Z" (whole seconds, rounded down).
std::string FormatUtc(std::chrono::system_clock::time_point t);

// "2026-11-24T05:06:37.123Z" (milliseconds, rounded down).
std::string FormatUtcMillis(std::chrono::system_clock::time_point t);

// FormatUtc of now.
std::string UtcNow();

}  // namespace hpcml
