// Validation metrics of hpcml-train (docs/trainer.md, "Validation"): pure
// functions over host arrays, computed in double. No MPI: the trainer adds
// each rank's rows into EvalSums, sums them over the ranks, and gathers the
// binary scores for the AUC, so every metric is computed once over all rows.
//
// Thread safety: none needed (no shared state).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

// Sums over validation rows; parts from several ranks add up field by field.
struct EvalSums {
  double rows = 0;      // rows seen (a double so that one all-reduce carries every field)
  double loss_sum = 0;  // ce: sum of -log softmax(z)[label]; mse: sum of (y - t)^2 over all values
  double correct = 0;   // ce: rows whose arg max (the first one on a tie) is the label
  double values = 0;    // mse: rows * outputs
  void Add(const EvalSums& o) {
    rows += o.rows;
    loss_sum += o.loss_sum;
    correct += o.correct;
    values += o.values;
  }
};

// Rows [0, rows) of logits [rows, classes] against class labels (class
// indices as floats, already checked to be in [0, classes)). With two
// classes and `scores` non-null, appends each row's score z1 - z0 (it
// orders rows as p(class 1) does) and whether its label is 1.
void AddCrossEntropy(const float* logits, const float* labels, std::int64_t rows,
                     std::int64_t classes, EvalSums* sums, std::vector<double>* scores = nullptr,
                     std::vector<std::uint8_t>* positive = nullptr);
// Rows [0, rows) of outputs [rows, width] against targets of the same shape.
void AddSquaredError(const float* outputs, const float* targets, std::int64_t rows,
                     std::int64_t width, EvalSums* sums);

inline constexpr double kNoMetric = std::numeric_limits<double>::quiet_NaN();

// Mean log loss (natural log) per row; NaN without rows.
double LogLoss(const EvalSums& s);
// Share of rows classified correctly; NaN without rows.
double Accuracy(const EvalSums& s);
// sqrt(mean of (y - t)^2 over every value); NaN without values.
double Rmse(const EvalSums& s);
// Area under the ROC curve: the probability that a random positive row
// scores above a random negative one, a tie counting one half (the
// Mann-Whitney U statistic from midranks, exact for any ties). NaN when
// either class is absent. O(n log n); takes its arguments by value (sorts).
double RocAuc(std::vector<double> scores, std::span<const std::uint8_t> positive);

// The share of positive rows; NaN without rows.
double PositiveRate(std::span<const std::uint8_t> positive);
// What always predicting the base rate `p` scores on rows with that share of
// positives, the baseline a binary model must beat: log loss
// -(p ln p + (1-p) ln(1-p)) (0 when p is 0 or 1) and accuracy max(p, 1-p).
double BaseRateLogLoss(double p);
double BaseRateAccuracy(double p);

// One evaluation's results. Fields that do not apply to the loss are NaN.
struct EvalMetrics {
  std::int64_t step = 0;  // the optimisation steps done when it ran
  std::int64_t rows = 0;
  LossKind loss = LossKind::kCrossEntropy;
  bool binary = false;  // ce with two classes: the auc applies (NaN when a class is absent)
  double log_loss = kNoMetric, accuracy = kNoMetric, auc = kNoMetric;  // ce (auc: two classes)
  double positive_rate = kNoMetric;          // two classes: the share of rows labelled 1
  double mse = kNoMetric, rmse = kNoMetric;  // mse

  // The value best-model selection and early stopping watch (lower is
  // better): log loss for ce, RMSE for mse.
  double monitored() const { return loss == LossKind::kCrossEntropy ? log_loss : rmse; }
  static std::string_view MonitorName(LossKind loss) {
    return loss == LossKind::kCrossEntropy ? "log_loss" : "rmse";
  }
};

}  // namespace hpcml::trainer
