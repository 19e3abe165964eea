// The --metrics file of hpcml-train: JSON lines, one typed event per line
// (fields in docs/trainer.md, "Metrics"). Written by rank 0 only; a log that
// was never opened ignores every event. Each line is flushed when written, so
// a job killed mid-run leaves every event before the kill.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/eval_metrics.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace hpcml::trainer {

// A bubble that cannot be measured (ranks outnumber cores) is nullopt: JSON null.
using Bubble = std::optional<double>;

struct RunStarted {
  GridShape grid;
  std::string backend;
  std::int64_t batch = 0;
  int microbatches = 1;
  std::string schedule;
  bool zero1 = false;
  std::int64_t steps = 0;
  double ideal_bubble = 0;
};

struct StepDone {
  const StepStats& stats;
  Bubble bubble;
};

struct RunStopped {
  std::int64_t step = 0;
  std::string reason;
};

// One evaluation on the validation set, and where the best one stands.
struct EvalDone {
  const EvalMetrics& metrics;
  bool improved = false;  // this evaluation is the new best
  std::int64_t best_step = 0;
  double best_value = 0;
  int evals_since_best = 0;
  double seconds = 0;  // wall time of the evaluation
};

struct EarlyStopped {
  std::int64_t step = 0;
  std::string monitor;
  std::int64_t best_step = 0;
  double best_value = 0;
  int patience = 0;
};

struct RunDone {
  std::int64_t steps = 0;
  double first_loss = 0, final_loss = 0, mean_step_time_s = 0;
  Bubble mean_bubble;
  bool oversubscribed = false;
  double ideal_bubble = 0;
  bool early_stopped = false;
};

// The metrics that apply to the loss as a JSON object: log_loss, accuracy
// and (two classes) auc for ce; mse and rmse for mse; NaN (no rows) as null.
std::string EvalMetricsJson(const EvalMetrics& m);

class MetricsLog {
 public:
  // Truncates `path`; the error names it as --metrics.
  Status Open(const std::string& path);

  void Write(const RunStarted& e);
  void Write(const StepDone& e);
  void Write(const RunStopped& e);
  void Write(const EvalDone& e);
  void Write(const EarlyStopped& e);
  void Write(const RunDone& e);

 private:
  void Line(const std::string& json);
  std::ofstream out_;
};

}  // namespace hpcml::trainer
