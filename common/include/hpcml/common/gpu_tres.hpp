// The GPUs of a Slurm TRES string: the one rule the guard (a role's
// max_gpus) and accounting (GPU-hours) share, so the number that decides a
// launch is the number that is billed.
//
// Slurm writes untyped GPUs as gres/gpu=N and typed ones as gres/gpu:TYPE=N.
// Which appear depends on AccountingStorageTRES: both (gres/gpu=2 beside
// gres/gpu:h100=2), only the typed ones, or only the untyped one. The untyped
// entry counts every GPU, typed ones included, so a job's GPUs are
// max(untyped, sum of typed), and its GPUs of no known type are the
// difference.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml {

struct GpuTres {
  std::optional<double> untyped;                      // gres/gpu=N
  std::vector<std::pair<std::string, double>> typed;  // gres/gpu:TYPE=N, first-seen order

  // max(untyped, sum of typed).
  double total() const;
  // GPUs the typed entries do not account for (untyped - sum of typed, >= 0).
  double of_no_type() const;

  // Takes one TRES entry (name, count) if it is a GPU entry: returns true if
  // it was one. A repeated type replaces the earlier count, as Slurm's own
  // parser does. Error: an empty type ("gres/gpu:=1").
  Result<bool> Add(std::string_view name, double count);
};

// The GPU entries of a whole TRES string ("cpu=2,mem=1G,gres/gpu:h100=2"),
// strictly: every GPU count a non-negative integer below 10^9. Other
// entries are skipped unread.
Result<GpuTres> ParseGpuTres(std::string_view tres);

}  // namespace hpcml
