// The process grid: world = dp x pp x tp, tensor-parallel index innermost.
//
//   world rank = (dp_idx * pp + pp_idx) * tp + tp_idx
//
// Each rank belongs to three sub-communicators: its tensor group (same dp,
// pp), its pipeline group (same dp, tp; rank in it = pp_idx) and its data
// group (same pp, tp; rank in it = dp_idx). MpiComm owns one communicator and
// frees it on destruction, so a ProcessGrid must be destroyed before
// MPI_Finalize. Not thread-safe; one grid per training run.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>

#include "hpcml/common/mpi.hpp"
#include "hpcml/common/owner.hpp"  // AgreeOnStatus, used with the grid
#include "hpcml/common/status.hpp"

namespace hpcml::trainer {

struct GridShape {
  int dp = 1;
  int pp = 1;
  int tp = 1;

  int size() const { return dp * pp * tp; }
  std::string ToString() const;  // "2x1x2" (dp x pp x tp)
  bool operator==(const GridShape&) const = default;
};

// World rank of the coordinates (dp_idx, pp_idx, tp_idx).
int RankOf(const GridShape& shape, int dp_idx, int pp_idx, int tp_idx);

// Owner (owner.hpp) of an MPI communicator: MPI_Comm_free on release, never
// for MPI_COMM_WORLD/SELF, which are not freed.
struct MpiCommTraits {
  using Handle = MPI_Comm;
  static Handle Null() noexcept { return MPI_COMM_NULL; }
  static void Close(Handle c) noexcept;
};

class MpiComm : public Owner<MpiCommTraits> {
 public:
  using Owner::Owner;
  int rank() const;  // -1 when null
  int size() const;  // 0 when null
};

class ProcessGrid {
 public:
  // Collective over `world`. Fails (identically on every rank, before any
  // communication) when shape.size() differs from the size of `world` or a
  // dimension is < 1. The grid duplicates `world`, so its traffic never mixes
  // with the caller's.
  static Result<ProcessGrid> Create(MPI_Comm world, const GridShape& shape);

  ProcessGrid(ProcessGrid&&) noexcept = default;
  ProcessGrid& operator=(ProcessGrid&&) noexcept = default;

  const GridShape& shape() const { return shape_; }
  int rank() const { return rank_; }
  int size() const { return shape_.size(); }
  int dp_idx() const { return dp_idx_; }
  int pp_idx() const { return pp_idx_; }
  int tp_idx() const { return tp_idx_; }
  bool first_stage() const { return pp_idx_ == 0; }
  bool last_stage() const { return pp_idx_ == shape_.pp - 1; }

  MPI_Comm world() const { return world_.get(); }
  MPI_Comm tp_comm() const { return tp_.get(); }
  MPI_Comm pp_comm() const { return pp_.get(); }
  MPI_Comm dp_comm() const { return dp_.get(); }

 private:
  ProcessGrid() = default;

  GridShape shape_;
  int rank_ = 0;
  int dp_idx_ = 0, pp_idx_ = 0, tp_idx_ = 0;
  MpiComm world_, tp_, pp_, dp_;
};

}  // namespace hpcml::trainer
