#include "metrics_textfile.hpp"

#include <filesystem>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/prometheus.hpp"

namespace hpcml::trainer {

std::string FormatTrainerGauges(const TrainerGauges& g) {
  // One run per job: the job id says which; rank 0 alone writes, so no rank label.
  MetricLabels labels;
  if (!g.job_id.empty()) labels.emplace_back("job_id", g.job_id);
  MetricsText m;
  auto gauge = [&](const char* name, const char* help, double v) {
    m.Family(name, MetricType::kGauge, help);
    m.Sample(labels, v);
  };
  gauge("hpcml_train_step", "The last training step completed.", static_cast<double>(g.step));
  gauge("hpcml_train_target_steps", "The step training ends at (--steps).",
        static_cast<double>(g.steps));
  if (g.loss) gauge("hpcml_train_loss", "Training loss at the last step.", *g.loss);
  gauge("hpcml_train_samples_per_second",
        "Training throughput: samples per second, mean over this attempt's steps.",
        g.samples_per_s);
  if (g.bubble) {
    gauge("hpcml_train_pipeline_bubble_ratio",
          "Share of the last step the pipeline stages waited (0..1); absent when not measured.",
          *g.bubble);
  }
  if (g.last_checkpoint_unix) {
    gauge("hpcml_train_last_checkpoint_timestamp_seconds",
          "When the newest complete checkpoint set was written, seconds since the epoch.",
          *g.last_checkpoint_unix);
    gauge("hpcml_train_seconds_since_checkpoint",
          "Seconds from the newest complete checkpoint to when this file was written.",
          g.now_unix - *g.last_checkpoint_unix);
  }
  gauge("hpcml_train_attempt", "The job's attempt: Slurm's restart count (0: first).",
        static_cast<double>(g.attempt));
  gauge("hpcml_train_metrics_timestamp_seconds",
        "When these figures were written, seconds since the epoch.", g.now_unix);
  return m.text();
}

Status MetricsTextfile::Open(const std::string& path, const TrainerGauges& first) {
  if (!path.ends_with(".prom") || path.ends_with("/.prom")) {
    return InvalidArgument(
        "--metrics-textfile {}: the name must end in .prom (node_exporter's textfile collector "
        "reads only *.prom files)",
        path);
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return NotFound("--metrics-textfile {}: no directory {}", path, dir.string());
  }
  path_ = path;
  Status s = Write(first);
  if (!s.ok()) path_.clear();
  return s;
}

Status MetricsTextfile::Write(const TrainerGauges& g) const {
  if (path_.empty()) return Status::Ok();
  Status s = WriteFileAtomic(path_, FormatTrainerGauges(g));
  return s.ok() ? s : std::move(s).WithContext("--metrics-textfile " + path_);
}

}  // namespace hpcml::trainer
