// Checkpoints of a GBDT run (train.hpp's GbdtCheckpoint) in a directory:
//
//   <dir>/gbdt-round-000000000050.h5   one file per checkpoint
//
// Each file is written whole under a temporary name, fsynced and renamed
// (common/fs CommitFile): a checkpoint is complete iff its file exists.
// HDF5, readable with h5py:
//   /booster   uint8 [n]: XGBoost's UBJSON model of every tree so far
//   root attributes: format "hpcml-gbdt-checkpoint-1", round (int64),
//   run_key, booster_sha256 (checked on loading), rounds (JSON: each
//   round's figures, RoundMetrics).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trees/train.hpp"

namespace hpcml::trees {

inline constexpr const char* kGbdtCheckpointFormat = "hpcml-gbdt-checkpoint-1";

// Writes `c` into `dir` (created if needed), then removes all but the
// newest `keep` (>= 1) checkpoints.
Status SaveGbdtCheckpoint(const std::string& dir, int keep, const GbdtCheckpoint& c);

// The newest checkpoint in `dir` that reads and verifies; nullopt when
// there is none (a fresh start, also when `dir` does not exist). A damaged
// newer one is skipped and described in `warnings`.
Result<std::optional<GbdtCheckpoint>> LoadLatestGbdtCheckpoint(const std::string& dir,
                                                               std::vector<std::string>* warnings);

// A checkpoint's figures and key as one text (JSON; the booster's bytes
// apart), and back: what rank 0 hands the other ranks on resuming.
std::string GbdtCheckpointHeader(const GbdtCheckpoint& c);
Result<GbdtCheckpoint> ParseGbdtCheckpointHeader(const std::string& text, std::string booster);

}  // namespace hpcml::trees
