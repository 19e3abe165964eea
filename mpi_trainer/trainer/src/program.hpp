// One run of hpcml-train on every rank: grid, binding, backend, input,
// trainer, checkpoints, the step loop and its reports, in that order.
//
// Error contract: every phase ends in an agreement (AgreeOnStatus) so that all
// ranks fail together, with the message of the lowest failing rank; a
// collective inside a phase would hang if a peer had already failed, so
// collectives sit between the agreements.
#pragma once

#include <fstream>
#include <memory>
#include <optional>

#include "checkpointing.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/data.hpp"
#include "hpcml/trainer/eval_metrics.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trainer/trainer.hpp"
#include "metrics_log.hpp"
#include "metrics_textfile.hpp"
#include "train_options.hpp"

namespace hpcml::trainer {

class Program {
 public:
  explicit Program(const TrainOptions& o) : o_(o) {}

  Status Run();

  // Set when training stopped early (signal, spot notice, time limit) after a save.
  const std::optional<StopRequest>& stopped() const { return stop_; }

 private:
  // This attempt's running figures, for the log lines and the done record.
  struct Figures {
    double time_sum = 0, bubble_sum = 0, first_loss = 0, last_loss = 0;
    std::int64_t timed = 0, steps = 0;
    double mean_step() const { return timed > 0 ? time_sum / static_cast<double>(timed) : 0.0; }
    double mean_bubble() const { return timed > 0 ? bubble_sum / static_cast<double>(timed) : 0.0; }
  };

  template <typename T>
  Result<std::unique_ptr<T>> Agree(Result<T> r) {
    Status s = AgreeOnStatus(MPI_COMM_WORLD, r.status());
    if (!s.ok()) return s;
    return std::make_unique<T>(std::move(r).value());
  }
  Status Agree(const Status& s) { return AgreeOnStatus(grid_->world(), s); }

  // Validation (docs/trainer.md, "Validation"): the held-out set, the best
  // evaluation so far and the patience count, the same on every rank (the
  // metrics are agreed by Trainer::Evaluate), saved with each checkpoint.
  struct Validation {
    std::unique_ptr<EvalSource> source;  // first and last stages
    TrainingData data;                   // first/last stages: the version (empty path: synthetic)
    std::string best_path;               // the best model's file; empty: none written
    double best = 0;                     // valid when best_step > 0
    std::int64_t best_step = 0;
    int evals = 0, since_best = 0;
    std::optional<EvalMetrics> last;  // the latest evaluation (the final model's figures)
    std::string early_stop;           // why training stopped early; empty: it did not
  };

  Status Bind();
  Status MakeBackend();
  Status MakeCpuBackend();
  Status OpenInput();
  void ShareEmbeddings();
  void LogEncoding(const InputEncoding& enc);
  Status MakeTrainer();
  bool validating() const {
    return o_.val_samples > 0 || !o_.val_data.empty() || !o_.val_version.empty();
  }
  Status OpenValidation();
  Status StartCheckpointing();
  Status Train();
  Result<Trainer::AfterStep> OnStep(const StepStats& st);
  Status Evaluate(const StepStats& st);
  void LogEval(const EvalMetrics& m, bool improved, double seconds);
  // Collective: gathers the model and writes it to `path` on rank 0.
  Status SaveModel(const std::string& path, const std::string& option,
                   const std::optional<ValidationRecord>& validation);
  ValidationRecord Record(const EvalMetrics& m, const char* selected) const;
  nlohmann::json ValidationState() const;
  Status RestoreValidationState(const nlohmann::json& state);
  void LogStep(const StepStats& st);
  // Rank 0: the run's gauges now (`st`: the step just done, if any).
  TrainerGauges Gauges(const StepStats* st) const;
  // Rank 0: replaces the textfile; a failure is a warning, said once.
  void WriteTextfile(const StepStats* st);
  Status Finish();
  ModelLineage Lineage() const;
  std::string SettingsJson() const;
  void PublishUsage(std::int64_t first_step, double wall_s, std::int64_t start_time);

  // With more ranks than cores, a stage's busy time includes waiting for a
  // core, so the bubble measures the scheduler, not the pipeline: n/a.
  Bubble Measured(double b) const { return oversubscribed_ ? Bubble() : Bubble(b); }
  static std::string BubbleText(const Bubble& b);

  TrainOptions o_;
  std::unique_ptr<ProcessGrid> grid_;
  bool rank0_ = false;
  bool oversubscribed_ = false;
  std::unique_ptr<Backend> backend_;
  ModelConfig mc_;
  TrainConfig tc_;
  std::unique_ptr<BatchSource> source_;
  Validation val_;
  ModelLineage input_lineage_;  // rank 0: the training data and its schema
  std::unique_ptr<Trainer> trainer_;
  MetricsLog metrics_;
  MetricsTextfile textfile_;
  bool textfile_warned_ = false;
  std::optional<double> last_loss_;  // rank 0: of the last step, for the textfile
  Bubble last_bubble_;
  Logger log_{"hpcml-train"};
  std::unique_ptr<Checkpointer> ckpt_;
  std::optional<StopRequest> stop_;
  Figures fig_;
};

}  // namespace hpcml::trainer
