#include "hpcml/trainer/eval_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hpcml::trainer {

void AddCrossEntropy(const float* logits, const float* labels, std::int64_t rows,
                     std::int64_t classes, EvalSums* sums, std::vector<double>* scores,
                     std::vector<std::uint8_t>* positive) {
  const bool binary = classes == 2 && scores != nullptr && positive != nullptr;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    const auto label = static_cast<std::int64_t>(labels[r]);
    // Stable log-sum-exp in double; the arg max is the first maximum (numpy's rule).
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c) {
      if (z[c] > z[best]) best = c;
    }
    const double zmax = z[best];
    double e = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) e += std::exp(static_cast<double>(z[c]) - zmax);
    sums->loss_sum += zmax + std::log(e) - static_cast<double>(z[label]);
    sums->correct += best == label ? 1.0 : 0.0;
    if (binary) {
      scores->push_back(static_cast<double>(z[1]) - static_cast<double>(z[0]));
      positive->push_back(label == 1 ? 1 : 0);
    }
  }
  sums->rows += static_cast<double>(rows);
}

void AddSquaredError(const float* outputs, const float* targets, std::int64_t rows,
                     std::int64_t width, EvalSums* sums) {
  const std::int64_t n = rows * width;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(outputs[i]) - static_cast<double>(targets[i]);
    sums->loss_sum += d * d;
  }
  sums->rows += static_cast<double>(rows);
  sums->values += static_cast<double>(n);
}

double LogLoss(const EvalSums& s) {
  return s.rows > 0 ? s.loss_sum / s.rows : kNoMetric;
}

double Accuracy(const EvalSums& s) {
  return s.rows > 0 ? s.correct / s.rows : kNoMetric;
}

double Rmse(const EvalSums& s) {
  return s.values > 0 ? std::sqrt(s.loss_sum / s.values) : kNoMetric;
}

double PositiveRate(std::span<const std::uint8_t> positive) {
  if (positive.empty()) return kNoMetric;
  const auto n = std::count_if(positive.begin(), positive.end(), [](std::uint8_t v) { return v; });
  return static_cast<double>(n) / static_cast<double>(positive.size());
}

double BaseRateLogLoss(double p) {
  if (std::isnan(p)) return kNoMetric;
  if (p <= 0.0 || p >= 1.0) return 0.0;
  return -(p * std::log(p) + (1.0 - p) * std::log(1.0 - p));
}

double BaseRateAccuracy(double p) {
  return std::isnan(p) ? kNoMetric : std::max(p, 1.0 - p);
}

double RocAuc(std::vector<double> scores, std::span<const std::uint8_t> positive) {
  const std::size_t n = scores.size();
  if (positive.size() != n) return kNoMetric;
  // A diverged model's NaN scores have no order (and would break the sort).
  if (std::any_of(scores.begin(), scores.end(), [](double v) { return std::isnan(v); })) {
    return kNoMetric;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positive rows.
  double rank_sum = 0.0, pos = 0.0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double midrank = 0.5 * static_cast<double>(i + 1 + j);  // mean of i+1 .. j
    for (std::size_t k = i; k < j; ++k) {
      if (positive[order[k]] != 0) {
        rank_sum += midrank;
        pos += 1.0;
      }
    }
    i = j;
  }
  const double neg = static_cast<double>(n) - pos;
  if (pos == 0.0 || neg == 0.0) return kNoMetric;
  return (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg);
}

}  // namespace hpcml::trainer
