// hpcml-train --model gbdt: gradient-boosted trees on one rank through
// hpcml::trees (XGBoost), with the MLP's input options, validation, early
// stopping, logging, metrics file and lineage (docs/trainer.md "Trees").
#pragma once

#include "hpcml/common/log.hpp"
#include "hpcml/common/status.hpp"
#include "train_options.hpp"

namespace hpcml::trainer {

// The command line for trees: --data, one rank, a validation version for
// early stopping, no column sampling in a checkpointed run (XGBoost's
// sampler cannot resume exactly); usage errors (exit 2).
Status CheckTreeOptions(const TrainOptions& o);

// Trains and writes --output (the trees up to the best validation round
// with early stopping). With --checkpoint-dir: resumes from the newest
// checkpoint, saves every --checkpoint-every rounds / --checkpoint-seconds,
// and saves and stops on SIGTERM, SIGUSR1, a spot notice or
// --stop-before-end (true: stopped, exit --stop-exit-code for a requeue).
// Collective over MPI_COMM_WORLD only in refusing more than one rank.
Result<bool> RunGbdt(const TrainOptions& o, Logger& log);

}  // namespace hpcml::trainer
