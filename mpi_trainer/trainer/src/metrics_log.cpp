#include "metrics_log.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"

namespace hpcml::trainer {
namespace {

nlohmann::json BubbleJson(const Bubble& b) {
  return b ? nlohmann::json(*b) : nlohmann::json();
}

nlohmann::ordered_json Number(double v) {
  return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
}

// The metrics that apply to the loss (ce: log_loss, accuracy and with two
// classes auc; mse: mse and rmse) into `j`; a NaN (no rows) is null.
void AddEvalMetrics(const EvalMetrics& m, nlohmann::ordered_json& j) {
  if (m.loss == LossKind::kCrossEntropy) {
    j["log_loss"] = Number(m.log_loss);
    j["accuracy"] = Number(m.accuracy);
    if (m.binary) {
      j["auc"] = Number(m.auc);
      j["positive_rate"] = Number(m.positive_rate);
      j["base_rate_log_loss"] = Number(BaseRateLogLoss(m.positive_rate));
      j["base_rate_accuracy"] = Number(BaseRateAccuracy(m.positive_rate));
    }
  } else {
    j["mse"] = Number(m.mse);
    j["rmse"] = Number(m.rmse);
  }
}

}  // namespace

std::string EvalMetricsJson(const EvalMetrics& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  AddEvalMetrics(m, j);
  return JsonText(j);
}

Status MetricsLog::Open(const std::string& path) {
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_) return IoError("--metrics {}: cannot open for writing", path);
  return Status::Ok();
}

void MetricsLog::Line(const std::string& json) {
  if (out_.is_open()) out_ << json << '\n' << std::flush;
}

void MetricsLog::Write(const RunStarted& e) {
  Line(JsonText(nlohmann::json{{"event", "start"},
                               {"time", UtcNow()},
                               {"grid", e.grid.ToString()},
                               {"dp", e.grid.dp},
                               {"pp", e.grid.pp},
                               {"tp", e.grid.tp},
                               {"backend", e.backend},
                               {"batch", e.batch},
                               {"microbatches", e.microbatches},
                               {"schedule", e.schedule},
                               {"zero1", e.zero1},
                               {"steps", e.steps},
                               {"ideal_bubble", e.ideal_bubble}}));
}

void MetricsLog::Write(const StepDone& e) {
  const StepStats& st = e.stats;
  Line(JsonText(nlohmann::json{{"step", st.step},
                               {"loss", st.loss},
                               {"lr", st.lr},
                               {"grad_norm", st.grad_norm},
                               {"step_time_s", st.step_time_s},
                               {"samples_per_s", st.samples_per_s},
                               {"bubble", BubbleJson(e.bubble)}}));
}

void MetricsLog::Write(const RunStopped& e) {
  Line(JsonText(nlohmann::json{
      {"event", "stopped"}, {"time", UtcNow()}, {"step", e.step}, {"reason", e.reason}}));
}

void MetricsLog::Write(const EvalDone& e) {
  const EvalMetrics& m = e.metrics;
  nlohmann::ordered_json j{
      {"event", "eval"}, {"time", UtcNow()}, {"step", m.step}, {"rows", m.rows}};
  AddEvalMetrics(m, j);
  j["monitor"] = EvalMetrics::MonitorName(m.loss);
  j["value"] = Number(m.monitored());
  j["best"] = e.improved;
  j["best_step"] = e.best_step;
  j["best_value"] =
      e.best_step > 0 ? nlohmann::ordered_json(e.best_value) : nlohmann::ordered_json();
  j["evals_since_best"] = e.evals_since_best;
  j["eval_time_s"] = e.seconds;
  Line(JsonText(j));
}

void MetricsLog::Write(const EarlyStopped& e) {
  Line(JsonText(nlohmann::ordered_json{{"event", "early_stop"},
                                       {"time", UtcNow()},
                                       {"step", e.step},
                                       {"monitor", e.monitor},
                                       {"best_step", e.best_step},
                                       {"best_value", e.best_value},
                                       {"patience", e.patience}}));
}

void MetricsLog::Write(const RunDone& e) {
  Line(JsonText(nlohmann::json{{"event", "done"},
                               {"time", UtcNow()},
                               {"steps", e.steps},
                               {"first_loss", e.first_loss},
                               {"final_loss", e.final_loss},
                               {"mean_step_time_s", e.mean_step_time_s},
                               {"mean_bubble", BubbleJson(e.mean_bubble)},
                               {"oversubscribed", e.oversubscribed},
                               {"ideal_bubble", e.ideal_bubble},
                               {"early_stopped", e.early_stopped}}));
}

}  // namespace hpcml::trainer
