#include "row_block.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace hpcml::featurecache {
namespace {

TEST(RowBlock, HoldsWholeChunksOfAbout4MiB) {
  // 1 MiB chunks: four to a block.
  RowBlock big(256, 0, 1024, false);
  std::vector<float> x(256 * 4096 * 2);
  std::vector<int64_t> e(4096 * 2), t(4096 * 2);
  EXPECT_EQ(big.Take(x.data(), nullptr, e.data(), t.data(), nullptr, nullptr, 0, 4096 * 2), 4096u);
  EXPECT_TRUE(big.full());
  // A chunk over 4 MiB: one to a block.
  RowBlock one(2048, 0, 1024, false);
  EXPECT_EQ(one.Take(x.data(), nullptr, e.data(), t.data(), nullptr, nullptr, 0, 2048), 1024u);
  EXPECT_TRUE(one.full());
}

TEST(RowBlock, TakesRowsFromAnOffsetByColumn) {
  RowBlock b(2, 0, 4, true);
  const float x[] = {0, 1, 10, 11, 20, 21};
  const float y[] = {0.5f, 1.5f, 2.5f};
  const int64_t e[] = {7, 8, 9}, t[] = {100, 200, 300};
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.Take(x, y, e, t, nullptr, nullptr, 1, 2), 2u);
  EXPECT_EQ(b.rows(), 2u);
  EXPECT_FALSE(b.full());
  EXPECT_EQ(std::memcmp(b.data(Column::kX), x + 2, 4 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b.data(Column::kY), y + 1, 2 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b.data(Column::kEntity), e + 1, 2 * sizeof(int64_t)), 0);
  EXPECT_EQ(std::memcmp(b.data(Column::kTime), t + 1, 2 * sizeof(int64_t)), 0);
  EXPECT_EQ(b.bytes(Column::kX), 4 * sizeof(float));
  EXPECT_EQ(b.bytes(Column::kY), 2 * sizeof(float));
  EXPECT_EQ(b.bytes(Column::kEntity), 2 * sizeof(int64_t));
  EXPECT_EQ(b.labels(), b.data(Column::kY));
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.bytes(Column::kX), 0u);

  RowBlock unlabelled(2, 0, 4, false);
  EXPECT_EQ(unlabelled.labels(), nullptr);
}

}  // namespace
}  // namespace hpcml::featurecache
