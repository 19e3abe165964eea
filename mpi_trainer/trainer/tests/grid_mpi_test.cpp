// ProcessGrid and AgreeOnStatus under mpirun (2 and 4 ranks).
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "hpcml/trainer/grid.hpp"

namespace hpcml::trainer {
namespace {

int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<GridShape> Layouts(int n) {
  std::vector<GridShape> out;
  for (int dp = 1; dp <= n; ++dp)
    for (int pp = 1; pp <= n; ++pp)
      for (int tp = 1; tp <= n; ++tp)
        if (dp * pp * tp == n) out.push_back({dp, pp, tp});
  return out;
}

TEST(Grid, CoordinatesAndGroupsFollowTpInnermostOrder) {
  for (const GridShape& shape : Layouts(WorldSize())) {
    auto g = ProcessGrid::Create(MPI_COMM_WORLD, shape);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(RankOf(shape, g->dp_idx(), g->pp_idx(), g->tp_idx()), g->rank());
    int tp_rank = -1, tp_size = 0, pp_rank = -1, pp_size = 0, dp_rank = -1, dp_size = 0;
    MPI_Comm_rank(g->tp_comm(), &tp_rank);
    MPI_Comm_size(g->tp_comm(), &tp_size);
    MPI_Comm_rank(g->pp_comm(), &pp_rank);
    MPI_Comm_size(g->pp_comm(), &pp_size);
    MPI_Comm_rank(g->dp_comm(), &dp_rank);
    MPI_Comm_size(g->dp_comm(), &dp_size);
    EXPECT_EQ(tp_size, shape.tp);
    EXPECT_EQ(pp_size, shape.pp);
    EXPECT_EQ(dp_size, shape.dp);
    EXPECT_EQ(tp_rank, g->tp_idx());
    EXPECT_EQ(pp_rank, g->pp_idx());
    EXPECT_EQ(dp_rank, g->dp_idx());
    // Members of my tensor group share my (dp, pp): sum their world ranks.
    int sum = 0;
    int me = g->rank();
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, g->tp_comm());
    int want = 0;
    for (int t = 0; t < shape.tp; ++t) want += RankOf(shape, g->dp_idx(), g->pp_idx(), t);
    EXPECT_EQ(sum, want) << shape.ToString();
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, g->dp_comm());
    want = 0;
    for (int d = 0; d < shape.dp; ++d) want += RankOf(shape, d, g->pp_idx(), g->tp_idx());
    EXPECT_EQ(sum, want) << shape.ToString();
  }
}

TEST(Grid, WrongProductFailsOnEveryRank) {
  auto g = ProcessGrid::Create(MPI_COMM_WORLD, GridShape{WorldSize() + 1, 1, 1});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("ranks but the job has"), std::string::npos);
  EXPECT_FALSE(ProcessGrid::Create(MPI_COMM_WORLD, GridShape{0, 1, WorldSize()}).ok());
}

TEST(Grid, AgreeOnStatusSpreadsTheFirstFailure) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = WorldSize();
  EXPECT_TRUE(AgreeOnStatus(MPI_COMM_WORLD, Status::Ok()).ok());
  // Ranks n-1 and n-2 fail: everyone reports the lower one's message.
  Status local = rank >= n - 2 ? NotFound("missing shard {}", rank) : Status::Ok();
  Status s = AgreeOnStatus(MPI_COMM_WORLD, local);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(fmt::format("missing shard {}", n - 2)), std::string::npos)
      << s.message();
}

TEST(Grid, MpiCommFreesAndMoves) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MpiComm a(dup);
  EXPECT_EQ(a.size(), WorldSize());
  MpiComm b = std::move(a);
  EXPECT_EQ(a.get(), MPI_COMM_NULL);
  EXPECT_EQ(b.size(), WorldSize());
  b.reset();
  EXPECT_EQ(b.get(), MPI_COMM_NULL);
}

}  // namespace
}  // namespace hpcml::trainer
