// The --metrics-textfile of hpcml-train: the run's latest figures as gauges
// in the Prometheus text format, for node_exporter's textfile collector
// (names in docs/monitoring.md). Rank 0 writes it at each log interval, each
// time whole: a temporary file in the same directory renamed over it, so the
// collector never reads half a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpcml/common/status.hpp"
#include "metrics_log.hpp"

namespace hpcml::trainer {

struct TrainerGauges {
  std::string job_id;  // SLURM_JOB_ID; "" outside Slurm (then no job_id label)
  int attempt = 0;     // SLURM_RESTART_COUNT
  std::int64_t step = 0, steps = 0;
  std::optional<double> loss;  // none before the first step of this attempt
  double samples_per_s = 0;
  Bubble bubble;                               // none when not measured
  std::optional<double> last_checkpoint_unix;  // the newest complete set's time
  double now_unix = 0;                         // when these figures were taken
};

// The text of the file.
std::string FormatTrainerGauges(const TrainerGauges& g);

class MetricsTextfile {
 public:
  // `path` must end in ".prom" (the collector reads nothing else) and its
  // directory must exist; errors name --metrics-textfile. Writes `first`.
  Status Open(const std::string& path, const TrainerGauges& first);
  // Replaces the file; a no-op when never opened.
  Status Write(const TrainerGauges& g) const;
  bool is_open() const { return !path_.empty(); }

 private:
  std::string path_;
};

}  // namespace hpcml::trainer
