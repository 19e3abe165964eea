// `hpcml-infer score`: a model (an MLP or a GBDT model file,
// scoring_model.hpp) over a feature-cache version or a CSV, on one or
// several MPI ranks, to a new feature-cache version or a CSV.
//
// Sharding: rows are cut into blocks of `batch` rows; block b is scored by
// rank b % ranks (every rank reads only its own blocks' features). Rank 0
// then writes the output in row order, receiving the other ranks' blocks in
// turn, so the output is the same whatever the number of ranks. Memory: each
// rank holds the predictions of its blocks (rows / ranks x outputs floats).
//
// Inside a guarded job the input is opened through the feature cache's
// access checks (path approved, zone, classification), the output likewise,
// and a model trained on another zone's data is refused.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/log.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/inference/engine.hpp"

namespace hpcml::inference {

struct ScoreOptions {
  std::string model;
  std::string data;               // a feature set (.h5) ...
  std::string data_version;       // ... and its version ("" = latest)
  std::string csv;                // or a CSV with a header row
  std::vector<std::string> keep;  // CSV input: columns copied to the output
  std::string output;             // ".csv": a CSV; else a feature set (a new version)
  std::string classification;     // of a new output set; default: the input's
  std::int64_t batch = 4096;
  Precision precision = Precision::kFloat32;
  // Training/serving skew (skew.hpp): features whose mean moved more than
  // skew_warn training standard deviations are reported; more than
  // max_skew (when > 0) fails the run before scoring.
  double skew_warn = 0.25, max_skew = 0;
  int threads = 0;  // 0: OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or this rank's cores
};

// What the options alone show to be wrong (--batch, exactly one of --data and
// --csv): pure, the same on every rank. hpcml-infer checks it before any
// work, for a usage error; RunScore checks it again.
Status CheckScoreOptions(const ScoreOptions& options);

// Collective over `world`: every rank returns the same status.
Status RunScore(const ScoreOptions& options, MPI_Comm world, Logger& log);

}  // namespace hpcml::inference
