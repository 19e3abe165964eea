#include "row_tally.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace hpcml::featurecache {
namespace {

TEST(RowTally, EntityRangeOverEveryBlock) {
  RowTally tally;
  EXPECT_EQ(tally.min_entity(), INT64_MAX);
  EXPECT_EQ(tally.max_entity(), INT64_MIN);
  EXPECT_FALSE(tally.has_statistics());
  const float x[] = {1, 2, 3};
  const int64_t e[] = {4, -2, 9}, t[] = {0, 0, 0};
  RowBlock block(1, 0, 2, false);
  block.Take(x, nullptr, e, t, nullptr, nullptr, 0, 2);
  tally.Add(block);
  block.Clear();
  block.Take(x, nullptr, e, t, nullptr, nullptr, 2, 1);
  tally.Add(block);
  EXPECT_EQ(tally.min_entity(), -2);
  EXPECT_EQ(tally.max_entity(), 9);
}

TEST(RowTally, StatisticsWhenAsked) {
  RowTally tally(true, {"f", "label"}, true);
  ASSERT_TRUE(tally.has_statistics());
  const float x[] = {1, 3};
  const float y[] = {0, 1};
  const int64_t e[] = {0, 1}, t[] = {0, 0};
  RowBlock block(1, 0, 4, true);
  block.Take(x, y, e, t, nullptr, nullptr, 0, 2);
  tally.Add(block);
  VersionStats s = tally.Statistics();
  EXPECT_EQ(s.rows, 2u);
  ASSERT_EQ(s.columns.size(), 2u);
  EXPECT_EQ(s.columns[0].name, "f");
  EXPECT_DOUBLE_EQ(s.columns[0].mean, 2.0);
  EXPECT_EQ(s.columns[1].name, "label");

  RowTally without(false, {"f"}, false);
  EXPECT_FALSE(without.has_statistics());
}

}  // namespace
}  // namespace hpcml::featurecache
