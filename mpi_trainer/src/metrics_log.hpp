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

struct RunDone {
  std::int64_t steps = 0;
  double first_loss = 0, final_loss = 0, mean_step_time_s = 0;
  Bubble mean_bubble;
  bool oversubscribed = false;
  double ideal_bubble = 0;
};

class MetricsLog {
 public:
  // Truncates `path`; the error names it as --metrics.
  Status Open(const std::string& path);

  void Write(const RunStarted& e);
  void Write(const StepDone& e);
  void Write(const RunStopped& e);
  void Write(const RunDone& e);

 private:
  void Line(const std::string& json);
  std::ofstream out_;
};

}  // namespace hpcml::trainer
