#include "hpcml/trainer/data.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hpcml::trainer {
namespace {

SyntheticConfig Config(bool classification) {
  SyntheticConfig c;
  c.features = 5;
  c.outputs = 3;
  c.classification = classification;
  c.seed = 99;
  return c;
}

struct Batch {
  std::vector<float> x, y;
};

Batch Read(BatchSource& s, std::int64_t rows) {
  Batch b;
  b.x.resize(static_cast<size_t>(rows * s.feature_dim()));
  b.y.resize(static_cast<size_t>(rows * s.target_dim()));
  EXPECT_TRUE(s.Next(rows, b.x.data(), b.y.data()).ok());
  return b;
}

TEST(Synthetic, ReplicasReadDisjointSlicesOfTheSameGlobalBatch) {
  for (bool cls : {true, false}) {
    auto whole = MakeSyntheticSource(Config(cls), 8, 0, 1);
    ASSERT_TRUE(whole.ok());
    std::vector<Batch> full;
    for (int step = 0; step < 3; ++step) full.push_back(Read(**whole, 8));
    for (int r = 0; r < 4; ++r) {
      auto part = MakeSyntheticSource(Config(cls), 8, r, 4);
      ASSERT_TRUE(part.ok());
      for (int step = 0; step < 3; ++step) {
        Batch b = Read(**part, 2);
        const auto& f = full[static_cast<size_t>(step)];
        const size_t tdim = cls ? 1 : 3;
        EXPECT_EQ(b.x, std::vector<float>(f.x.begin() + r * 2 * 5, f.x.begin() + (r + 1) * 2 * 5));
        EXPECT_EQ(b.y, std::vector<float>(f.y.begin() + static_cast<long>(r * 2 * tdim),
                                          f.y.begin() + static_cast<long>((r + 1) * 2 * tdim)));
      }
    }
    // Consecutive batches differ (fresh samples).
    EXPECT_NE(full[0].x, full[1].x);
  }
}

TEST(Synthetic, LabelsAreValidClassesAndNotAllEqual) {
  auto s = MakeSyntheticSource(Config(true), 64, 0, 1);
  ASSERT_TRUE(s.ok());
  Batch b = Read(**s, 64);
  std::vector<int> count(3, 0);
  for (float y : b.y) {
    ASSERT_GE(y, 0.0f);
    ASSERT_LT(y, 3.0f);
    count[static_cast<size_t>(y)]++;
  }
  for (int c : count) EXPECT_GT(c, 0);
}

TEST(Synthetic, RegressionTargetsAreBoundedByTanh) {
  auto s = MakeSyntheticSource(Config(false), 16, 0, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->target_dim(), 3);
  EXPECT_EQ((*s)->num_classes(), 0);
  Batch b = Read(**s, 16);
  for (float y : b.y) EXPECT_LT(std::abs(y), 1.0f);
}

TEST(Synthetic, FiniteDataSetWrapsAround) {
  SyntheticConfig c = Config(true);
  c.samples = 8;
  auto s = MakeSyntheticSource(c, 8, 0, 1);
  ASSERT_TRUE(s.ok());
  Batch a = Read(**s, 8), b = Read(**s, 8);
  EXPECT_EQ(a.x, b.x);
}

TEST(Synthetic, SaveAndRestorePosition) {
  auto s = MakeSyntheticSource(Config(true), 4, 0, 1);
  ASSERT_TRUE(s.ok());
  Read(**s, 4);
  const std::string pos = (*s)->SavePosition();
  Batch a = Read(**s, 4);
  ASSERT_TRUE((*s)->RestorePosition(pos).ok());
  Batch b = Read(**s, 4);
  EXPECT_EQ(a.x, b.x);
  EXPECT_FALSE((*s)->RestorePosition("x1").ok());
  EXPECT_FALSE((*s)->RestorePosition("-1").ok());
}

TEST(Synthetic, NullBuffersSkipOutputButAdvance) {
  auto s = MakeSyntheticSource(Config(true), 4, 0, 1);
  auto t = MakeSyntheticSource(Config(true), 4, 0, 1);
  ASSERT_TRUE(s.ok() && t.ok());
  ASSERT_TRUE((*s)->Next(4, nullptr, nullptr).ok());
  Read(**t, 4);
  EXPECT_EQ(Read(**s, 4).x, Read(**t, 4).x);
}

TEST(Synthetic, RejectsBadShapes) {
  EXPECT_FALSE(MakeSyntheticSource(Config(true), 10, 0, 4).ok());  // 10 rows over 4 replicas
  EXPECT_FALSE(MakeSyntheticSource(Config(true), 8, 4, 4).ok());
  SyntheticConfig c = Config(true);
  c.outputs = 1;
  EXPECT_FALSE(MakeSyntheticSource(c, 8, 0, 1).ok());
  auto s = MakeSyntheticSource(Config(true), 8, 0, 2);
  ASSERT_TRUE(s.ok());
  std::vector<float> x(100), y(100);
  EXPECT_FALSE((*s)->Next(8, x.data(), y.data()).ok());  // more than its share
}

// 10 held-out samples over 4 replicas in batches of 2: parts of 3, 3, 2, 2
// rows, 2 batches each (2+1, 2+1, 2+0, 2+0 rows); together every sample once,
// in order, the same on the next pass.
TEST(SyntheticEval, ReplicaPartsCoverEveryRowOnceWithShortAndEmptyBatches) {
  SyntheticConfig c = Config(true);
  c.samples = 10;
  c.held_out = true;
  auto whole = MakeSyntheticEvalSource(c, 10, 0, 1);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ((*whole)->batches(), 1);
  std::vector<float> all_x(50), all_y(10);
  ASSERT_EQ(*(*whole)->Next(10, all_x.data(), all_y.data()), 10);
  std::vector<float> got_x, got_y;
  const std::vector<std::vector<std::int64_t>> want_rows = {{2, 1}, {2, 1}, {2, 0}, {2, 0}};
  for (int r = 0; r < 4; ++r) {
    auto part = MakeSyntheticEvalSource(c, 2, r, 4);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ((*part)->batches(), 2);
    EXPECT_EQ((*part)->rows(), 10);
    for (int pass = 0; pass < 2; ++pass) {
      for (int b = 0; b < 2; ++b) {
        std::vector<float> x(10, -7.0f), y(2, -7.0f);
        auto n = (*part)->Next(2, x.data(), y.data());
        ASSERT_TRUE(n.ok());
        EXPECT_EQ(*n, want_rows[static_cast<size_t>(r)][static_cast<size_t>(b)]);
        if (pass == 0) {
          got_x.insert(got_x.end(), x.begin(), x.begin() + *n * 5);
          got_y.insert(got_y.end(), y.begin(), y.begin() + *n);
        }
      }
    }
  }
  EXPECT_EQ(got_x, all_x);
  EXPECT_EQ(got_y, all_y);
  // Held out: other features than the training stream's.
  auto train = MakeSyntheticSource(Config(true), 10, 0, 1);
  ASSERT_TRUE(train.ok());
  std::vector<float> tx(50), ty(10);
  ASSERT_TRUE((*train)->Next(10, tx.data(), ty.data()).ok());
  EXPECT_NE(tx, all_x);
  EXPECT_FALSE(MakeSyntheticEvalSource(Config(true), 2, 0, 1).ok());  // no samples
}

}  // namespace
}  // namespace hpcml::trainer
