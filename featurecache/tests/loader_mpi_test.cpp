// The loader across real MPI ranks (2 and 4): each rank opens the same
// feature set with its own rank; the shards must be disjoint and complete,
// the same seed must give the same order, and a loader restored from a
// position saved mid-epoch must continue exactly where an uninterrupted one
// goes. Rank 0 creates the data; only rank 0 prints.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>

#include "hpcml/featurecache/loader.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int World() {
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

// Rank 0 makes the file; everyone learns its path.
std::string SharedFeatureSet(uint64_t rows, uint64_t chunk_rows, int compression) {
  static int counter = 0;
  std::string path;
  if (Rank() == 0) {
    std::string dir =
        (std::filesystem::temp_directory_path() / ("fcache-mpi-" + std::to_string(::getpid())))
            .string();
    std::filesystem::create_directories(dir);
    path = dir + "/fs" + std::to_string(counter) + ".h5";
    testing::MakeVersion(
        path, {.rows = rows, .features = 3, .chunk_rows = chunk_rows, .compression = compression});
  }
  ++counter;
  int len = static_cast<int>(path.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(static_cast<size_t>(len));
  MPI_Bcast(path.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

std::vector<uint64_t> RunEpoch(Loader& l, uint64_t* batches) {
  std::vector<uint64_t> ids;
  *batches = 0;
  const uint64_t epoch = l.epoch();
  while (l.epoch() == epoch) {
    auto b = l.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) break;
    for (size_t i = 0; i < b->rows(); ++i) {
      uint64_t id = b->row_ids()[i];
      EXPECT_EQ(b->x()[i * 3 + 1], testing::Value(id, 1));
      ids.push_back(id);
    }
    ++*batches;
  }
  return ids;
}

// All ranks' ids on every rank.
std::vector<uint64_t> Gather(const std::vector<uint64_t>& mine) {
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(World())), displs(static_cast<size_t>(World()));
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    displs[i] = total;
    total += counts[i];
  }
  std::vector<uint64_t> all(static_cast<size_t>(total));
  MPI_Allgatherv(mine.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(),
                 MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}

class LoaderMpi : public ::testing::TestWithParam<std::tuple<bool, int, uint64_t>> {};

TEST_P(LoaderMpi, ShardsAreDisjointCompleteAndInLockStep) {
  auto [shuffle, compression, rows] = GetParam();
  std::string path = SharedFeatureSet(rows, 500, compression);
  LoaderOptions o;
  o.rank = static_cast<uint32_t>(Rank());
  o.world = static_cast<uint32_t>(World());
  o.batch_rows = 64;
  o.seed = 1234;
  o.shuffle = shuffle;
  o.shuffle_window_rows = 1000;
  auto l = Loader::Open(path, "", o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<uint64_t> previous;
  for (int epoch = 0; epoch < 3; ++epoch) {
    uint64_t batches = 0;
    auto mine = RunEpoch(*l, &batches);
    uint64_t min_b = 0, max_b = 0;
    MPI_Allreduce(&batches, &min_b, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&batches, &max_b, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(min_b, max_b) << "every rank runs the same number of steps";
    auto all = Gather(mine);
    std::vector<uint64_t> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted.size(), rows) << "epoch " << epoch;
    for (uint64_t i = 0; i < rows; ++i)
      ASSERT_EQ(sorted[i], i) << "every row exactly once, epoch " << epoch;
    if (shuffle && epoch > 0) {
      EXPECT_NE(all, previous) << "a new order each epoch";
    }
    previous = all;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LoaderMpi,
                         ::testing::Values(std::make_tuple(true, 0, uint64_t{10007}),
                                           std::make_tuple(false, 0, uint64_t{10000}),
                                           std::make_tuple(true, 3, uint64_t{4099})));

TEST(LoaderMpiOrder, SameSeedSameOrderAndResumeMidEpoch) {
  std::string path = SharedFeatureSet(8191, 256, 0);
  LoaderOptions o;
  o.rank = static_cast<uint32_t>(Rank());
  o.world = static_cast<uint32_t>(World());
  o.batch_rows = 50;
  o.seed = 99;
  o.threads = 2;
  auto a = Loader::Open(path, "", o);
  auto b = Loader::Open(path, "", o);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<uint64_t>> reference;
  const uint64_t total = a->batches_per_epoch() * 2 + 3;
  for (uint64_t i = 0; i < total; ++i) {
    auto x = a->Next();
    auto y = b->Next();
    ASSERT_TRUE(x.ok() && y.ok());
    std::vector<uint64_t> ids(x->row_ids().begin(), x->row_ids().end());
    ASSERT_EQ(ids, std::vector<uint64_t>(y->row_ids().begin(), y->row_ids().end()))
        << "same seed, same order";
    reference.push_back(ids);
  }
  // Interrupt in the middle of epoch 1; rank 0's saved position is shared
  // with every rank (as the trainer's checkpoint manifest does).
  const uint64_t cut = a->batches_per_epoch() + a->batches_per_epoch() / 2;
  auto c = Loader::Open(path, "", o);
  for (uint64_t i = 0; i < cut; ++i) ASSERT_TRUE(c->Next().ok());
  std::string saved = c->Save().ToString();
  int len = static_cast<int>(saved.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  saved.resize(static_cast<size_t>(len));
  MPI_Bcast(saved.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  auto pos = Position::Parse(saved);
  ASSERT_TRUE(pos.ok()) << saved;
  auto d = Loader::Open(path, "", o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->Restore(*pos).ok());
  for (uint64_t i = cut; i < total; ++i) {
    auto x = d->Next();
    ASSERT_TRUE(x.ok());
    ASSERT_EQ(std::vector<uint64_t>(x->row_ids().begin(), x->row_ids().end()), reference[i])
        << "batch " << i;
  }
}

}  // namespace
}  // namespace hpcml::featurecache

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (hpcml::featurecache::Rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (hpcml::featurecache::Rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(
        std::filesystem::temp_directory_path() / ("fcache-mpi-" + std::to_string(::getpid())), ec);
  }
  MPI_Finalize();
  return worst;
}
