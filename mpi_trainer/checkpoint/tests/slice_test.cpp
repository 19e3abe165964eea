#include "hpcml/checkpoint/slice.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace hpcml::checkpoint {
namespace {

TEST(Slice, SplitAlongEachDimension) {
  auto rows = SplitAlong({8, 6}, 0, 1, 4);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->offset, (Shape{2, 0}));
  EXPECT_EQ(rows->shape, (Shape{2, 6}));
  auto cols = SplitAlong({8, 6}, 1, 2, 3);
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(cols->ToString(), "[0:8, 4:6]");
  EXPECT_EQ(cols->elements(), 16);
  EXPECT_FALSE(SplitAlong({8, 6}, 1, 0, 4).ok());  // 6 / 4 is not exact
  EXPECT_FALSE(SplitAlong({8, 6}, 2, 0, 2).ok());
  EXPECT_FALSE(SplitAlong({8, 6}, 0, 4, 4).ok());
}

TEST(Slice, Intersect) {
  Slice a{{0, 0}, {4, 6}}, b{{2, 3}, {4, 6}};
  auto r = Intersect(a, b);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Slice{{2, 3}, {2, 3}}));
  EXPECT_FALSE(
      Intersect(Slice{{0}, {2}}, Slice{{2}, {2}}).has_value());  // touching, not overlapping
}

TEST(Slice, CopyRegionBetweenLayouts) {
  // A 4x6 tensor with value 10*row + col; saved as two row halves, read as
  // three column thirds.
  Shape g{4, 6};
  auto value = [](std::int64_t r, std::int64_t c) { return static_cast<float>(10 * r + c); };
  std::vector<std::vector<float>> halves(2);
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 6; ++c) halves[static_cast<size_t>(h)].push_back(value(2 * h + r, c));
    }
  }
  for (int third = 0; third < 3; ++third) {
    Slice want = *SplitAlong(g, 1, third, 3);
    std::vector<float> out(static_cast<size_t>(want.elements()), -1.f);
    for (int h = 0; h < 2; ++h) {
      Slice src = *SplitAlong(g, 0, h, 2);
      auto region = Intersect(src, want);
      ASSERT_TRUE(region);
      CopyRegion(*region, src, halves[static_cast<size_t>(h)].data(), want, out.data());
    }
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 2; ++c)
        EXPECT_EQ(out[static_cast<size_t>(r * 2 + c)], value(r, 2 * third + c));
    }
  }
}

TEST(Slice, OneAndThreeDimensions) {
  std::vector<float> src(10);
  std::iota(src.begin(), src.end(), 0.f);
  std::vector<float> dst(4);
  CopyRegion(Slice{{3}, {4}}, Slice{{0}, {10}}, src.data(), Slice{{3}, {4}}, dst.data());
  EXPECT_EQ(dst, (std::vector<float>{3, 4, 5, 6}));
  // 3-d: 2x3x4, copy the box [1:2, 1:3, 2:4].
  std::vector<float> cube(24);
  std::iota(cube.begin(), cube.end(), 0.f);
  std::vector<float> box(4);
  Slice region{{1, 1, 2}, {1, 2, 2}};
  CopyRegion(region, Slice{{0, 0, 0}, {2, 3, 4}}, cube.data(), region, box.data());
  EXPECT_EQ(box, (std::vector<float>{18, 19, 22, 23}));
}

}  // namespace
}  // namespace hpcml::checkpoint
