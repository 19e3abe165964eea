#include "metrics_log.hpp"

#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"

namespace hpcml::trainer {
namespace {

nlohmann::json BubbleJson(const Bubble& b) {
  return b ? nlohmann::json(*b) : nlohmann::json();
}

}  // namespace

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

void MetricsLog::Write(const RunDone& e) {
  Line(JsonText(nlohmann::json{{"event", "done"},
                               {"time", UtcNow()},
                               {"steps", e.steps},
                               {"first_loss", e.first_loss},
                               {"final_loss", e.final_loss},
                               {"mean_step_time_s", e.mean_step_time_s},
                               {"mean_bubble", BubbleJson(e.mean_bubble)},
                               {"oversubscribed", e.oversubscribed},
                               {"ideal_bubble", e.ideal_bubble}}));
}

}  // namespace hpcml::trainer
