#include "hpcml/featurecache/timeutil.hpp"

#include <charconv>
#include <chrono>
#include <limits>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"

namespace hpcml::featurecache {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;
constexpr int64_t kMicrosPerDay = 86'400 * kMicrosPerSecond;

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

}  // namespace

Result<int64_t> ParseTimestamp(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  if (s.empty()) return InvalidArgument("empty time");
  if (IsPlainNumber(s)) return SecondsToMicros(s);
  return ParseIsoMicros(s);
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

}  // namespace hpcml::featurecache
