#include "hpcml/common/time.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace hpcml {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::system_clock;

TEST(FormatUtc, WritesIso8601InUtc) {
  EXPECT_EQ(FormatUtc(system_clock::time_point{}), "1970-01-01T00:00:00Z");
  // 2024-02-29T23:59:59Z (a leap day) and 1969-12-31T23:59:59Z (before the epoch).
  EXPECT_EQ(FormatUtc(system_clock::time_point{seconds{1709251199}}), "2024-02-29T23:59:59Z");
  EXPECT_EQ(FormatUtc(system_clock::time_point{seconds{-1}}), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatUtc(system_clock::time_point{milliseconds{1999}}), "1970-01-01T00:00:01Z");
}

TEST(FormatUtcMillis, KeepsMilliseconds) {
  EXPECT_EQ(FormatUtcMillis(system_clock::time_point{milliseconds{1709251199123}}),
            "2024-02-29T23:59:59.123Z");
  EXPECT_EQ(FormatUtcMillis(system_clock::time_point{milliseconds{-1}}),
            "1969-12-31T23:59:59.999Z");
}

TEST(CivilDays, RoundTripsAndMatchesChrono) {
  EXPECT_EQ(DaysFromCivil(1970, 1, 1), 0);
  EXPECT_EQ(DaysFromCivil(2024, 2, 29), 19782);
  EXPECT_EQ(DaysFromCivil(1969, 12, 31), -1);
  for (std::int64_t days : {std::int64_t{-1000000}, std::int64_t{-1}, std::int64_t{0},
                            std::int64_t{19782}, std::int64_t{2932896}}) {
    std::int64_t y = 0;
    unsigned m = 0, d = 0;
    CivilFromDays(days, &y, &m, &d);
    EXPECT_EQ(DaysFromCivil(y, m, d), days);
    const std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{days}}};
    EXPECT_EQ(y, static_cast<int>(ymd.year()));
    EXPECT_EQ(m, static_cast<unsigned>(ymd.month()));
    EXPECT_EQ(d, static_cast<unsigned>(ymd.day()));
  }
}

TEST(UtcNow, HasTheShapeOfFormatUtc) {
  EXPECT_TRUE(std::regex_match(UtcNow(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

// One grammar for every time hpcml reads: each case is the text and the
// microseconds it means.
TEST(ParseIsoMicros, ReadsEveryFormOfTheGrammar) {
  constexpr std::int64_t kS = 1'000'000;
  const std::pair<const char*, std::int64_t> cases[] = {
      {"1970-01-01", 0},
      {"1969-12-31T23:59:59Z", -kS},
      {"2024-02-29T23:59:59Z", 1709251199 * kS},
      {"2024-02-29t23:59:59z", 1709251199 * kS},
      {"2024-02-29 23:59", 1709251140 * kS},
      {"2024-02-29T23:59:59.123Z", 1709251199 * kS + 123000},
      {"2024-02-29T23:59:59,5", 1709251199 * kS + 500000},
      {"2024-02-29T23:59:59.000001", 1709251199 * kS + 1},
      {"2024-03-01T01:59:59+02:00", 1709251199 * kS},
      {"2024-03-01T01:59:59+0200", 1709251199 * kS},
      {"2024-03-01T01:59:59+02", 1709251199 * kS},
      {"2024-02-29T20:29:59-03:30", 1709251199 * kS},
      {"2000-02-29", 951782400 * kS},
      {"9999-12-31T23:59:59Z", 253402300799 * kS},
  };
  for (const auto& [text, micros] : cases) {
    auto r = ParseIsoMicros(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    EXPECT_EQ(*r, micros) << text;
  }
}

TEST(ParseIsoMicros, RefusesWhatIsNoTime) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "is not a time"},
      {"yesterday", "is not a time"},
      {"2024", "is not a time"},
      {"2024-1-01", "is not a time"},
      {"2024-13-01", "no such date"},
      {"2023-02-29", "no such date"},
      {"2024-04-31", "no such date"},
      {"2024-02-29T24:00", "no such time of day"},
      {"2024-02-29T23:59:60", "no such time of day"},
      {"2024-02-29T23:59:59.", "is not a time"},
      {"2024-02-29T23:59:59.1234567Z", "more than 6 fractional digits"},
      {"2024-02-29T23:59Zjunk", "is not a time"},
      {"2024-02-29T23:59+2", "is not a time"},
      {"2024-02-29T23:59+24:00", "is not a time"},
      {"2024-02-29X", "is not a time"},
  };
  for (const auto& [text, why] : cases) {
    auto r = ParseIsoMicros(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(why), std::string::npos)
        << text << ": " << r.status().message();
  }
}

TEST(ParseIsoMillis, RoundsDownWhatFormatUtcMillisWrites) {
  const auto t = system_clock::time_point{milliseconds{1709251199123}};
  EXPECT_EQ(*ParseIsoMillis(FormatUtcMillis(t)), 1709251199123);
  EXPECT_EQ(*ParseIsoMillis(FormatUtc(t)), 1709251199000);
  EXPECT_EQ(*ParseIsoMillis("1969-12-31T23:59:59.9995Z"), -1);
  EXPECT_FALSE(ParseIsoMillis("2024-02-30").ok());
}

TEST(ParseDurationMicros, ReadsANumberAndAUnit) {
  constexpr std::int64_t kS = 1'000'000;
  const std::pair<const char*, std::int64_t> cases[] = {
      {"90", 90 * kS},        {"90s", 90 * kS},
      {"15m", 900 * kS},      {"15min", 900 * kS},
      {"1.5h", 5400 * kS},    {"7d", 7 * 86400 * kS},
      {"1w", 7 * 86400 * kS}, {"250ms", 250000},
      {"10us", 10},           {"0", 0},
      {".5s", 500000},
  };
  for (const auto& [text, micros] : cases) {
    auto r = ParseDurationMicros(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    EXPECT_EQ(*r, micros) << text;
  }
  for (const char* bad : {"", "s", "5y", "-5s", "1.2.3s", "5 s", "1e3s", "99999999999999w"})
    EXPECT_FALSE(ParseDurationMicros(bad).ok()) << bad;
}

}  // namespace
}  // namespace hpcml
