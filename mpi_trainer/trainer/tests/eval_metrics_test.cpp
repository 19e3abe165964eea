// The validation metrics against hand computations (and the AUC against the
// pairwise definition on data with many ties).
#include "hpcml/trainer/eval_metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace hpcml::trainer {
namespace {

TEST(EvalMetrics, LogLossAndAccuracyByHand) {
  // Row 0: a tie, arg max is the first class (0), label 1: wrong, loss ln 2.
  // Row 1: label 1, loss log(1 + e^-2); row 2: label 0, loss log(1 + e^-3).
  const std::vector<float> z = {0, 0, 1, 3, 2, -1};
  const std::vector<float> y = {1, 1, 0};
  EvalSums s;
  std::vector<double> scores;
  std::vector<std::uint8_t> pos;
  AddCrossEntropy(z.data(), y.data(), 3, 2, &s, &scores, &pos);
  const double want = (std::log(2.0) + std::log1p(std::exp(-2.0)) + std::log1p(std::exp(-3.0))) / 3;
  EXPECT_NEAR(LogLoss(s), want, 1e-12);
  EXPECT_NEAR(LogLoss(s), 0.2895541, 1e-6);
  EXPECT_DOUBLE_EQ(Accuracy(s), 2.0 / 3.0);
  EXPECT_EQ(scores, (std::vector<double>{0.0, 2.0, -3.0}));  // z1 - z0
  EXPECT_EQ(pos, (std::vector<std::uint8_t>{1, 1, 0}));
}

TEST(EvalMetrics, ThreeClassesAddNoScoresAndSumsAddUp) {
  // log-sum-exp of [1, 2, 3] = 3 + log(1 + e^-1 + e^-2).
  const std::vector<float> z = {1, 2, 3, 5, 0, 0};
  const std::vector<float> y = {2, 1};
  EvalSums a, b;
  std::vector<double> scores;
  std::vector<std::uint8_t> pos;
  AddCrossEntropy(z.data(), y.data(), 1, 3, &a, &scores, &pos);
  AddCrossEntropy(z.data() + 3, y.data() + 1, 1, 3, &b, &scores, &pos);
  EXPECT_TRUE(scores.empty());
  a.Add(b);
  const double l0 = std::log1p(std::exp(-1.0) + std::exp(-2.0));
  const double l1 = 5 + std::log1p(2 * std::exp(-5.0));
  EXPECT_EQ(a.rows, 2);
  EXPECT_NEAR(LogLoss(a), (l0 + l1) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(Accuracy(a), 0.5);
}

TEST(EvalMetrics, RmseByHand) {
  const std::vector<float> out = {1, 2, 3, 4}, t = {1, 0, 0, 4};
  EvalSums s;
  AddSquaredError(out.data(), t.data(), 2, 2, &s);
  EXPECT_EQ(s.values, 4);
  EXPECT_DOUBLE_EQ(Rmse(s), std::sqrt(13.0 / 4.0));
  EXPECT_TRUE(std::isnan(Rmse(EvalSums{})));
  EXPECT_TRUE(std::isnan(LogLoss(EvalSums{})));
}

TEST(EvalMetrics, AucWithTiesByHand) {
  // Positives 0.35, 0.8, 0.4 against negatives 0.1, 0.4, 0.1:
  // 2 + 3 + 2.5 (the 0.4 tie counts one half) wins of 9 pairs.
  const std::vector<double> s = {0.1, 0.4, 0.35, 0.8, 0.4, 0.1};
  const std::vector<std::uint8_t> p = {0, 0, 1, 1, 1, 0};
  EXPECT_NEAR(RocAuc(s, p), 7.5 / 9.0, 1e-15);
  EXPECT_DOUBLE_EQ(RocAuc({1, 1, 1, 1}, std::vector<std::uint8_t>{0, 1, 0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(RocAuc({1, 2, 3}, std::vector<std::uint8_t>{0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({1, 2, 3}, std::vector<std::uint8_t>{1, 0, 0}), 0.0);
  EXPECT_TRUE(std::isnan(RocAuc({1, 2}, std::vector<std::uint8_t>{1, 1})));
  EXPECT_TRUE(std::isnan(RocAuc({1, NAN}, std::vector<std::uint8_t>{0, 1})));
}

TEST(EvalMetrics, AucMatchesThePairwiseDefinitionOnManyTies) {
  std::mt19937_64 rng(11);
  std::vector<double> s;
  std::vector<std::uint8_t> p;
  for (int i = 0; i < 2000; ++i) {
    s.push_back(static_cast<double>(rng() % 37));  // 37 distinct values: ties everywhere
    p.push_back(rng() % 3 == 0 ? 1 : 0);
  }
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (p[i] == 0) continue;
    for (size_t j = 0; j < s.size(); ++j) {
      if (p[j] != 0) continue;
      wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      pairs += 1;
    }
  }
  EXPECT_NEAR(RocAuc(s, p), wins / pairs, 1e-12);
}

TEST(EvalMetrics, MonitoredValueIsLogLossOrRmse) {
  EvalMetrics ce;
  ce.log_loss = 0.3;
  ce.rmse = 9;
  EXPECT_EQ(ce.monitored(), 0.3);
  EvalMetrics mse;
  mse.loss = LossKind::kMse;
  mse.rmse = 0.2;
  EXPECT_EQ(mse.monitored(), 0.2);
  EXPECT_EQ(EvalMetrics::MonitorName(LossKind::kMse), "rmse");
}

// Always predicting the base rate: 3 positives of 12, p = 0.25.
TEST(EvalMetrics, BaseRateByHand) {
  const std::vector<std::uint8_t> positive{1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  EXPECT_DOUBLE_EQ(PositiveRate(positive), 0.25);
  EXPECT_NEAR(BaseRateLogLoss(0.25), -(0.25 * std::log(0.25) + 0.75 * std::log(0.75)), 1e-15);
  EXPECT_NEAR(BaseRateLogLoss(0.25), 0.5623351446188083, 1e-15);
  EXPECT_DOUBLE_EQ(BaseRateAccuracy(0.25), 0.75);
  EXPECT_DOUBLE_EQ(BaseRateAccuracy(0.9), 0.9);
  EXPECT_EQ(BaseRateLogLoss(0.0), 0.0);
  EXPECT_EQ(BaseRateLogLoss(1.0), 0.0);
  EXPECT_TRUE(std::isnan(PositiveRate({})));
  EXPECT_TRUE(std::isnan(BaseRateLogLoss(kNoMetric)));
}

}  // namespace
}  // namespace hpcml::trainer
