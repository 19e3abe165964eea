// Gradient-boosted trees from a feature-cache version, through XGBoost's C
// API (hist, categorical splits on category features). One process; the
// rows stream from the version into XGBoost's quantile matrix (no second
// full copy in hpcml). docs/trainer.md ("Trees") is the reference.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/model_file.hpp"

namespace hpcml::trees {

// XGBoost's parameters, with its defaults (the values python3-xgboost's
// XGBClassifier uses when none are given).
struct GbdtParams {
  std::int64_t rounds = 100;
  int max_depth = 6;
  double eta = 0.3;
  double min_child_weight = 1.0;
  double lambda = 1.0;
  double colsample_bytree = 1.0;
  // Rows per round, sampled by hpcml rather than XGBoost (whose sampler's
  // state a resumed run cannot restore): row i takes part in round r when
  // UniformAt(DeriveSeed(seed, r), i) < subsample; the others' gradients
  // and hessians are 0 (XGBoosterBoostOneIter). 1: every row, XGBoost's own
  // objective (XGBoosterUpdateOneIter).
  double subsample = 1.0;
  int max_bin = 256;
  int threads = 1;
  std::uint64_t seed = 0;
  // 0: off; else stop after this many rounds without a lower validation
  // loss, and keep the trees up to the best round.
  int early_stopping_rounds = 0;
  std::vector<float> class_weights;  // per class; empty: 1
  // Instead: rows / (classes * class rows) from the training label's statistics.
  bool balanced_weights = false;
  // The training loss is evaluated at round 1, every this many rounds and
  // the last (a pass over the training rows' predictions; logging needs no
  // more). The validation loss is evaluated every round (early stopping).
  std::int64_t train_loss_every = 1;
};

struct GbdtData {
  std::string path, version;  // a feature set and its version ("": latest)
};

// One round's figures: the training loss and, with validation, the
// validation loss (logloss, mlogloss or rmse) and AUC (binary only).
struct RoundMetrics {
  std::int64_t round = 0;            // 1-based
  std::optional<double> train_loss;  // at the rounds GbdtParams::train_loss_every says
  std::optional<double> val_loss, val_auc;
  double seconds = 0.0;  // wall time of the round
};

struct GbdtRun {
  GbdtModelFile model;  // ready for SaveGbdtModel (path, sha256 unset); empty when interrupted
  std::int64_t best_round = 0;       // 1-based; the last round without early stopping
  std::vector<RoundMetrics> rounds;  // every round of the run, resumed ones included
  std::int64_t resumed_round = 0;    // 0: a fresh start
  bool interrupted = false;          // saved and stopped at hooks.after_round's request
  std::uint64_t train_rows = 0;      // rows of the training version
  double load_seconds = 0.0;
};

// A run's state after a round: every tree so far and every round's
// figures (early stopping's state is recomputed from them). trees/checkpoint.hpp
// stores it.
struct GbdtCheckpoint {
  std::int64_t round = 0;  // rounds done
  std::string booster;     // XGBoost's UBJSON model
  // SHA-256 of the settings and the training and validation versions'
  // digests: a run resumes only from its own checkpoints.
  std::string run_key;
  std::vector<RoundMetrics> rounds;
};

// A run across ranks, each a process of XGBoost's collective. Every rank
// reads its shard of every version: rows split contiguously in file order
// (ShardPlan's rule without shuffle), so rank r's rows follow rank r-1's.
// `agree` turns each rank's status at a phase boundary into the run's (an
// error on any rank is one on all, so none is left waiting in a
// collective); `connect` joins the collective once every rank has its data
// open, before the first matrix is built.
struct GbdtRanks {
  std::uint32_t rank = 0, world = 1;
  std::function<Status(const Status&)> agree;
  std::function<Status()> connect;
};

// What a caller does around the rounds (all optional).
struct GbdtHooks {
  std::function<void(const RoundMetrics&)> on_round;  // after every round (logging)
  enum class Action { kContinue, kSave, kSaveAndStop };
  // After on_round (and unless early stopping ends the run): whether to
  // save a checkpoint now, and whether to stop after it.
  std::function<Action(std::int64_t round)> after_round;
  std::function<Status(const GbdtCheckpoint&)> save;
  // Continue from this state (its run_key must be this run's).
  std::optional<GbdtCheckpoint> resume;
  // The settings that shape the model (text), part of the run key.
  std::string settings;
  // One rank unless set. after_round's answer and save's status must be the
  // same on every rank (the caller agrees on them); resume too.
  GbdtRanks ranks;
};

// Trains on `train` (labels: `classes` classes, or 0 for regression),
// validating on `val` when given (its features and label must be the
// training version's; its categories are mapped by value). `lineage` is
// completed with the data, input schema and encoding, class rows and
// validation record. A run resumed from a checkpoint ends with the model an
// uninterrupted run would (bitwise, the same XGBoost, thread count and
// ranks). Across ranks, the model is every rank's; on data with at most
// max_bin distinct values per feature it is the one-rank model (continuous
// features get other cut points from the merged quantile sketch).
Result<GbdtRun> TrainGbdt(const GbdtData& train, const std::optional<GbdtData>& val,
                          std::int64_t classes, const GbdtParams& params,
                          trainer::ModelLineage lineage, const GbdtHooks& hooks = {});

}  // namespace hpcml::trees
