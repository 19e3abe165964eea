// Run under mpirun with 2 and 4 ranks.
#include "hpcml/common/mpi.hpp"

#include <gtest/gtest.h>

namespace hpcml {
namespace {

int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int Size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
// Rank r sends r copies of 'a' + r (rank 0 sends nothing).
std::string Piece(int r) {
  return std::string(static_cast<std::size_t>(r), static_cast<char>('a' + r));
}

TEST(GatherStrings, CollectsEveryRanksTextInOrderAtTheRoot) {
  const int root = Size() - 1;
  auto all = GatherStrings(MPI_COMM_WORLD, Piece(Rank()), root);
  if (Rank() != root) {
    EXPECT_TRUE(all.empty());
    return;
  }
  ASSERT_EQ(all.size(), static_cast<std::size_t>(Size()));
  for (int r = 0; r < Size(); ++r) EXPECT_EQ(all[static_cast<std::size_t>(r)], Piece(r));
}

TEST(AllGatherStrings, GivesEveryRankEveryText) {
  auto all = AllGatherStrings(MPI_COMM_WORLD, Piece(Rank()));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(Size()));
  for (int r = 0; r < Size(); ++r) EXPECT_EQ(all[static_cast<std::size_t>(r)], Piece(r));
}

TEST(AgreeOnStatus, EveryRankGetsTheLowestFailingRanksStatus) {
  EXPECT_TRUE(AgreeOnStatus(MPI_COMM_WORLD, Status::Ok()).ok());
  Status local = Rank() >= 1 ? InvalidArgument("bad on {}", Rank()) : Status::Ok();
  Status agreed = AgreeOnStatus(MPI_COMM_WORLD, local);
  EXPECT_EQ(agreed.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(agreed.message(), "rank 1: bad on 1");
}

TEST(AgreeOnExitCode, IsTheWorstCode) {
  EXPECT_EQ(AgreeOnExitCode(MPI_COMM_WORLD, Rank() == 1 ? 3 : 0), 3);
  EXPECT_EQ(AgreeOnExitCode(MPI_COMM_WORLD, 0), 0);
}

}  // namespace
}  // namespace hpcml
