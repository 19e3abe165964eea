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
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trainer/trainer.hpp"
#include "metrics_log.hpp"
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

  Status Bind();
  Status MakeBackend();
  Status MakeCpuBackend();
  Status OpenInput();
  Status MakeTrainer();
  Status StartCheckpointing();
  Status Train();
  Status OnStep(const StepStats& st);
  void LogStep(const StepStats& st);
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
  ModelLineage input_lineage_;  // rank 0: the training data and its schema
  std::unique_ptr<Trainer> trainer_;
  MetricsLog metrics_;
  Logger log_{"hpcml-train"};
  std::unique_ptr<Checkpointer> ckpt_;
  std::optional<StopRequest> stop_;
  Figures fig_;
};

}  // namespace hpcml::trainer
