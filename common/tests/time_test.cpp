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

TEST(ParseIsoMillis, ReadsDatesTimesAndOffsets) {
  EXPECT_EQ(*ParseIsoMillis("1970-01-01"), 0);
  EXPECT_EQ(*ParseIsoMillis("2024-02-29T23:59:59Z"), 1709251199000);
  EXPECT_EQ(*ParseIsoMillis("2024-02-29T23:59:59.123Z"), 1709251199123);
  EXPECT_EQ(*ParseIsoMillis("2024-02-29T23:59:59.1234567Z"), 1709251199123);
  EXPECT_EQ(*ParseIsoMillis("2024-02-29 23:59"), 1709251140000);
  EXPECT_EQ(*ParseIsoMillis("2024-03-01T01:59:59+02:00"), 1709251199000);
  EXPECT_EQ(*ParseIsoMillis("2024-02-29T20:59:59-03:00"), 1709251199000);
  // What FormatUtcMillis writes reads back.
  const auto t = system_clock::time_point{milliseconds{1709251199123}};
  EXPECT_EQ(*ParseIsoMillis(FormatUtcMillis(t)), 1709251199123);
  for (const char* bad :
       {"", "2024", "2024-13-01", "2024-02-30x", "2024-02-29T24:00", "2024-02-29T23:59:59.",
        "2024-02-29T23:59Zjunk", "2024-02-29T23:59+2", "yesterday"}) {
    auto r = ParseIsoMillis(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("ISO 8601"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace hpcml
