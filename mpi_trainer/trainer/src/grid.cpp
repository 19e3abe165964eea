#include "hpcml/trainer/grid.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpcml::trainer {

std::string GridShape::ToString() const {
  return fmt::format("{}x{}x{}", dp, pp, tp);
}

int RankOf(const GridShape& shape, int dp_idx, int pp_idx, int tp_idx) {
  return (dp_idx * shape.pp + pp_idx) * shape.tp + tp_idx;
}

void MpiCommTraits::Close(MPI_Comm c) noexcept {
  if (c != MPI_COMM_WORLD && c != MPI_COMM_SELF) MPI_Comm_free(&c);
}

int MpiComm::rank() const {
  int r = -1;
  if (valid()) MPI_Comm_rank(get(), &r);
  return r;
}

int MpiComm::size() const {
  int s = 0;
  if (valid()) MPI_Comm_size(get(), &s);
  return s;
}

Result<ProcessGrid> ProcessGrid::Create(MPI_Comm world, const GridShape& shape) {
  int world_size = 0, rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &rank);
  if (shape.dp < 1 || shape.pp < 1 || shape.tp < 1) {
    return InvalidArgument("grid {}: every dimension (--dp, --pp, --tp) must be at least 1",
                           shape.ToString());
  }
  if (shape.size() != world_size) {
    return InvalidArgument("grid {} (dp x pp x tp) needs {} ranks but the job has {}",
                           shape.ToString(), shape.size(), world_size);
  }
  ProcessGrid g;
  g.shape_ = shape;
  g.rank_ = rank;
  g.tp_idx_ = rank % shape.tp;
  g.pp_idx_ = (rank / shape.tp) % shape.pp;
  g.dp_idx_ = rank / (shape.tp * shape.pp);

  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(world, &c);
  g.world_.reset(c);
  // Colours identify the group, keys order ranks inside it by the index
  // along the group's axis.
  MPI_Comm_split(g.world_.get(), g.dp_idx_ * shape.pp + g.pp_idx_, g.tp_idx_, &c);
  g.tp_.reset(c);
  MPI_Comm_split(g.world_.get(), g.dp_idx_ * shape.tp + g.tp_idx_, g.pp_idx_, &c);
  g.pp_.reset(c);
  MPI_Comm_split(g.world_.get(), g.pp_idx_ * shape.tp + g.tp_idx_, g.dp_idx_, &c);
  g.dp_.reset(c);
  return g;
}

}  // namespace hpcml::trainer
