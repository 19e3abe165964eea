// Checkpoint sets on disk.
//
//   <dir>/step-000000000123/shard-00000.h5   one per rank, HDF5
//   <dir>/step-000000000123/manifest.json    written last
//
// A shard holds, per tensor, the slice the rank owns with its global shape
// and offset, plus the rank's own state (JSON). The manifest lists every
// shard with its checksum (XXH3-128) and size, every tensor piece, and the run's shared
// state (step, layout, loader position, ...). It is written with temp file,
// fsync, rename and fsync of the directory, after the shard files and the set
// directory were fsync'd (HDF5 itself never fsyncs). A set is complete iff its
// manifest parses: a set without one is never used. Loading verifies the
// checksums and falls back to the previous set when a shard is corrupt.
//
// Every element of a tensor is saved by exactly one rank (with data
// parallelism, replica 0 saves the parameters).
//
// Thread safety: a CheckpointDir is immutable after Open and may be shared;
// WriteShard may run on a background thread (HDF5 here is thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpcml/checkpoint/slice.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::checkpoint {

// A slice of a tensor to save. `data` is borrowed until WriteShard returns.
struct TensorRef {
  std::string name;
  Shape global_shape;
  Slice slice;
  const float* data = nullptr;
};

struct Piece {
  std::string tensor;
  Shape global_shape;
  Slice slice;
};

struct ShardInfo {
  int rank = 0;
  std::string file;      // relative to the set directory
  std::string checksum;  // "xxh3-128:<32 hex digits>" of the shard's content
  std::uint64_t bytes = 0;
  std::vector<Piece> pieces;
};
nlohmann::json ToJson(const ShardInfo& s);
Result<ShardInfo> ShardFromJson(const nlohmann::json& j);

struct Manifest {
  std::int64_t step = 0;
  std::string created_at;  // UTC, ISO 8601
  nlohmann::json state;    // shared run state: layout, loader position, schedule ...
  std::vector<ShardInfo> shards;
};

class LoadedSet;

class CheckpointDir {
 public:
  // Creates `dir` if needed. `keep` >= 1 complete sets are kept by Commit.
  static Result<CheckpointDir> Open(const std::string& dir, int keep);

  const std::string& dir() const { return dir_; }
  std::string SetPath(std::int64_t step) const;

  // Writes this rank's shard of set `step` durably and returns its
  // description for the manifest. Safe to call concurrently for different ranks.
  Result<ShardInfo> WriteShard(std::int64_t step, int rank, const std::vector<TensorRef>& tensors,
                               const nlohmann::json& rank_state) const;

  // Called once, after every rank's WriteShard succeeded: writes the
  // manifest (the commit point), then removes all but the newest `keep`
  // complete sets and any incomplete set older than this one.
  Status Commit(const Manifest& manifest) const;

  // Steps of the sets present (complete or not), newest first.
  std::vector<std::int64_t> ListSteps() const;

  // The newest complete set whose shards all verify (sizes, and SHA-256
  // when `verify`). Sets skipped on the way are described in `warnings`.
  // NotFound when there is none (a fresh start).
  Result<LoadedSet> LoadLatest(bool verify, std::vector<std::string>* warnings) const;
  Result<LoadedSet> Load(std::int64_t step, bool verify) const;

 private:
  CheckpointDir(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {}
  std::string dir_;
  int keep_ = 2;
};

class LoadedSet {
 public:
  const Manifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }

  // Global shape of a saved tensor; NotFound if the set lacks it.
  Result<Shape> GlobalShape(const std::string& name) const;

  // Fills `out` (laid out as `want`) with that part of tensor `name`,
  // gathering from every saved piece that overlaps: any saved layout can
  // be read into any new one. Fails if `want` is not fully covered.
  Status Read(const std::string& name, const Slice& want, float* out) const;

  // The state saved by `rank` (NotFound when that rank did not exist).
  Result<nlohmann::json> RankState(int rank) const;

 private:
  friend class CheckpointDir;
  Manifest manifest_;
  std::string path_;
};

// Recomputes a shard's checksum from what it holds (tensor data, shapes,
// rank state), as WriteShard computed it from memory while writing:
// "xxh3-128:<hex>". XXH3 (libxxhash) rather than SHA-256, and over the
// content rather than the file bytes, so saving pays no extra read of the
// file: checksumming the file with SHA-256 cut save throughput in half.
// Damaged HDF5 metadata makes the read fail, which is reported as well.
Result<std::string> ChecksumShard(const std::string& path, const ShardInfo& info);

}  // namespace hpcml::checkpoint
