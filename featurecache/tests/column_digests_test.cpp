#include "column_digests.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hpcml::featurecache {
namespace {

std::string Bytes(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

TEST(ColumnDigests, HashEachColumnsBytesAcrossBlocks) {
  const float x[] = {1, 2, 3, 4};
  const float y[] = {0, 1};
  const int64_t e[] = {5, 6}, t[] = {7, 8};
  RowBlock block(2, 0, 1, true);  // one-row chunks; blocks of many
  ColumnDigests d;
  for (uint64_t row = 0; row < 2; ++row) {
    block.Take(x, y, e, t, nullptr, nullptr, row, 1);
    for (Column c : {Column::kX, Column::kY, Column::kEntity, Column::kTime}) d.Update(c, block);
    block.Clear();
  }
  DatasetDigests got = d.Finish(true);
  EXPECT_EQ(got.features, Sha256::Hex(Bytes(x, sizeof x)));
  EXPECT_EQ(got.labels, Sha256::Hex(Bytes(y, sizeof y)));
  EXPECT_EQ(got.entity_ids, Sha256::Hex(Bytes(e, sizeof e)));
  EXPECT_EQ(got.timestamps, Sha256::Hex(Bytes(t, sizeof t)));
  EXPECT_EQ(got.entity_keys, "");
}

TEST(ColumnDigests, NoLabelDigestWithoutLabels) {
  ColumnDigests d;
  DatasetDigests got = d.Finish(false);
  EXPECT_EQ(got.labels, "");
  EXPECT_EQ(got.features, Sha256::Hex(""));
}

}  // namespace
}  // namespace hpcml::featurecache
