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

TEST(UtcNow, HasTheShapeOfFormatUtc) {
  EXPECT_TRUE(std::regex_match(UtcNow(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

}  // namespace
}  // namespace hpcml
