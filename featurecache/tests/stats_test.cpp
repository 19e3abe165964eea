#include "hpcml/featurecache/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

// Against a two-pass computation in double, with NaN cells, a large mean
// (1e6: the shifted sums keep the precision) and an all-missing column.
TEST(Stats, MatchATwoPassComputation) {
  const uint64_t rows = 10000;
  const size_t f = 3;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(rows * f), y(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    x[r * f] = 1e6f + nd(gen);
    x[r * f + 1] = r % 7 == 0 ? NAN : 3.0f * nd(gen) - 2.0f;
    x[r * f + 2] = NAN;
    y[r] = static_cast<float>(r % 2);
  }
  StatsAccumulator acc({"big", "holes", "empty", "label"}, true, 1);
  acc.Add(x.data(), y.data(), 4000);  // in two calls, as the writer's blocks
  acc.Add(x.data() + 4000 * f, y.data() + 4000, rows - 4000);
  const VersionStats s = acc.Finish();
  ASSERT_EQ(s.columns.size(), 4u);
  EXPECT_EQ(s.rows, rows);
  for (size_t c = 0; c < 2; ++c) {
    double n = 0, sum = 0, mn = INFINITY, mx = -INFINITY;
    for (uint64_t r = 0; r < rows; ++r) {
      const double v = x[r * f + c];
      if (std::isnan(v)) continue;
      n += 1;
      sum += v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    double ss = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      const double v = x[r * f + c];
      if (!std::isnan(v)) ss += (v - sum / n) * (v - sum / n);
    }
    const ColumnStats& cs = s.columns[c];
    EXPECT_EQ(cs.count, static_cast<uint64_t>(n)) << cs.name;
    EXPECT_EQ(cs.missing, rows - static_cast<uint64_t>(n)) << cs.name;
    EXPECT_EQ(cs.min, mn) << cs.name;
    EXPECT_EQ(cs.max, mx) << cs.name;
    EXPECT_NEAR(cs.mean, sum / n, 1e-9 * std::abs(sum / n) + 1e-12) << cs.name;
    EXPECT_NEAR(cs.std, std::sqrt(ss / n), 1e-6 * std::sqrt(ss / n)) << cs.name;
  }
  EXPECT_EQ(s.columns[2].count, 0u);
  EXPECT_EQ(s.columns[2].missing, rows);
  EXPECT_TRUE(std::isnan(s.columns[2].mean));
  EXPECT_NEAR(s.columns[3].mean, 0.5, 1e-12);
  // The sample: full, deterministic, and its median near the column's.
  EXPECT_EQ(s.sample_rows(), kStatsSampleRows);
  EXPECT_NEAR(s.Quantile(0, 0.5), 1e6, 0.1);
  StatsAccumulator again({"big", "holes", "empty", "label"}, true, 1);
  again.Add(x.data(), y.data(), 4000);
  again.Add(x.data() + 4000 * f, y.data() + 4000, rows - 4000);
  const std::vector<float> twice = again.Finish().sample;
  ASSERT_EQ(twice.size(), s.sample.size());
  EXPECT_EQ(0, std::memcmp(twice.data(), s.sample.data(), twice.size() * sizeof(float)))
      << "the same rows and seed give the same sample (NaN cells included)";
}

// Written by the writer with the version, read back through FeatureSet.
TEST(Stats, StoredWithTheVersion) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 500, .features = 2});
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto s = fs->Stats("v1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rows, 500u);
  ASSERT_GE(s->columns.size(), 2u);
  EXPECT_EQ(s->columns[0].name, "f0");
  EXPECT_EQ(s->columns[0].count, 500u);
  EXPECT_EQ(s->sample_rows(), 500u);
  auto missing = fs->Stats("v9");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace hpcml::featurecache
