#include "hpcml/featurecache/timeutil.hpp"

#include "hpcml/common/time.hpp"

#include <gtest/gtest.h>

namespace hpcml::featurecache {
namespace {

constexpr int64_t kS = 1'000'000;

TEST(Timestamp, IsoForms) {
  EXPECT_EQ(*ParseTimestamp("1970-01-01"), 0);
  EXPECT_EQ(*ParseTimestamp("1970-01-01T00:00:01Z"), kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01T12:00:00Z"), 1709294400 * kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01 12:00:00"), 1709294400 * kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01T12:00"), 1709294400 * kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01T14:00:00+02:00"), 1709294400 * kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01T07:30:00-0430"), 1709294400 * kS);
  EXPECT_EQ(*ParseTimestamp("2024-03-01T12:00:00.25Z"), 1709294400 * kS + 250000);
  EXPECT_EQ(*ParseTimestamp("1969-12-31T23:59:59Z"), -kS);
  EXPECT_EQ(*ParseTimestamp("2000-02-29"), 951782400 * kS);
}

TEST(Timestamp, EpochSeconds) {
  EXPECT_EQ(*ParseTimestamp("1700000000"), 1700000000 * kS);
  EXPECT_EQ(*ParseTimestamp("1700000000.5"), 1700000000 * kS + 500000);
  EXPECT_EQ(*ParseTimestamp("-1.5"), -1500000);
}

TEST(Timestamp, Rejects) {
  for (const char* bad :
       {"", "yesterday", "2024-13-01", "2023-02-29", "2024-01-01T25:00", "2024-01-01T10:00:00+",
        "2024-1-1", "2024-01-01T10:00:00.1234567", "2024-01-01X"}) {
    EXPECT_FALSE(ParseTimestamp(bad).ok()) << bad;
  }
}

TEST(Timestamp, FormatRoundTrips) {
  for (int64_t t : {int64_t{0}, int64_t{1709294400} * kS, int64_t{1709294400} * kS + 250000, -kS,
                    int64_t{-1}, int64_t{253402300799} * kS}) {
    auto back = ParseTimestamp(FormatTimestamp(t));
    ASSERT_TRUE(back.ok()) << FormatTimestamp(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(FormatTimestamp(1709294400 * kS), "2024-03-01T12:00:00Z");
  EXPECT_EQ(FormatTimestamp(1709294400 * kS + 250000), "2024-03-01T12:00:00.25Z");
  EXPECT_EQ(FormatTimestamp(-1), "1969-12-31T23:59:59.999999Z");
}

TEST(Now, LooksLikeATimestamp) {
  auto t = ParseTimestamp(UtcNow());
  ASSERT_TRUE(t.ok());
  EXPECT_GT(*t, 1700000000 * kS);
}

}  // namespace
}  // namespace hpcml::featurecache
