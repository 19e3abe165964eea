#include "hpcml/common/finite.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace hpcml {
namespace {

TEST(CheckFinite, FiniteValuesPass) {
  std::vector<float> v{0.0f, -1.5f, std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::denorm_min()};
  EXPECT_TRUE(CheckFinite(v, "w").ok());
  EXPECT_TRUE(CheckFinite({}, "empty").ok());
}

TEST(CheckFinite, NamesCountAndFirst) {
  std::vector<float> v{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f,
                       -std::numeric_limits<float>::infinity()};
  Status s = CheckFinite(v, "layer0.weight");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "layer0.weight holds 2 non-finite values of 4 (the first, at index 1, is nan)");
  std::vector<float> inf{std::numeric_limits<float>::infinity()};
  EXPECT_EQ(CheckFinite(inf, "b").message(),
            "b holds 1 non-finite values of 1 (the first, at index 0, is inf)");
}

}  // namespace
}  // namespace hpcml
