// hpcml-train --model gbdt: gradient-boosted trees on one rank through
// hpcml::trees (XGBoost), with the MLP's input options, validation, early
// stopping, logging, metrics file and lineage (docs/trainer.md "Trees").
#pragma once

#include "hpcml/common/log.hpp"
#include "hpcml/common/status.hpp"
#include "train_options.hpp"

namespace hpcml::trainer {

// The command line for trees: --data, one rank, a validation version for
// early stopping, no checkpoints yet; usage errors (exit 2).
Status CheckTreeOptions(const TrainOptions& o);

// Trains and writes --output (and --best-output's role is the model's: the
// trees up to the best validation round). Collective over MPI_COMM_WORLD
// only in refusing more than one rank.
Status RunGbdt(const TrainOptions& o, Logger& log);

}  // namespace hpcml::trainer
