// ZeRO-1 (--zero1): every layout with a data-parallel degree >= 2 trains to
// the same losses and weights as the unsharded run on the same layout, holds
// about 1/dp of the optimizer state per rank, and saves and resumes
// checkpoints (the moments of every shard survive a restart, with or
// without --zero1 on resume). Run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "checkpointing.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/trainer/trainer.hpp"
#include "layout_cases.hpp"
#include "model_io.hpp"

namespace hpcml::trainer {
namespace {

std::vector<Case> Cases() {
  std::vector<Case> out;
  out.push_back(GeluCeGpipe("gelu_ce_gpipe_decay_clip", {16, 8, 8}, /*lr_steps=*/6));
  out.push_back(TanhMse1F1B(/*lr_steps=*/6));
  out.push_back(EmbeddedCe(/*lr_steps=*/6));
  return out;
}

// One training run on `grid`; the members outlive the trainer.
struct Session {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<BatchSource> source;
  std::unique_ptr<Trainer> trainer;
};

Result<Session> Open(const Case& c, const ProcessGrid& grid, bool zero1) {
  Session s;
  s.backend = MakeCpuBackend(&grid);
  HPCML_ASSIGN_OR_RETURN(
      s.source, MakeCaseSource(c.model, c.train.global_batch, grid.dp_idx(), grid.shape().dp));
  TrainConfig tc = c.train;
  tc.zero1 = zero1;
  HPCML_ASSIGN_OR_RETURN(s.trainer,
                         Trainer::Create(tc, c.model, &grid, s.backend.get(), s.source.get()));
  return s;
}

struct Outcome {
  std::vector<double> losses;
  std::vector<FullTensor> params;  // rank 0
  std::size_t optimizer_floats = 0;
  std::size_t num_params = 0;
};

Result<Outcome> Train(const Case& c, const ProcessGrid& grid, bool zero1, int steps) {
  HPCML_ASSIGN_OR_RETURN(Session s, Open(c, grid, zero1));
  Outcome out;
  for (int i = 0; i < steps; ++i) {
    HPCML_ASSIGN_OR_RETURN(StepStats st, s.trainer->Step());
    out.losses.push_back(st.loss);
  }
  HPCML_ASSIGN_OR_RETURN(out.params,
                         GatherModel(s.trainer->model(), &grid, *s.backend, WhichTensor::kParams));
  out.optimizer_floats = s.trainer->optimizer_state_floats();
  out.num_params = s.trainer->model().num_params();
  return out;
}

void ExpectTensorsNear(const std::vector<FullTensor>& got, const std::vector<FullTensor>& want,
                       double rel, double abs, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].shape, want[k].shape) << what << " " << want[k].name;
    for (size_t i = 0; i < got[k].data.size(); ++i) {
      const double w = want[k].data[i];
      ASSERT_NEAR(got[k].data[i], w, abs + rel * std::abs(w))
          << what << " " << want[k].name << "[" << i << "]";
    }
  }
}

constexpr int kSteps = 6;

TEST(Zero1, MatchesTheUnshardedRunAndShardsTheOptimizerState) {
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int checked = 0;
  for (const Case& c : Cases()) {
    for (const GridShape& shape : Layouts(n, /*min_dp=*/2)) {
      const std::string what = std::string(c.name) + " on " + shape.ToString();
      auto grid = ProcessGrid::Create(MPI_COMM_WORLD, shape);
      ASSERT_TRUE(grid.ok()) << grid.status().ToString();
      auto plain = Train(c, *grid, false, kSteps);
      auto sharded = Train(c, *grid, true, kSteps);
      ASSERT_TRUE(plain.ok()) << what << ": " << plain.status().ToString();
      ASSERT_TRUE(sharded.ok()) << what << ": " << sharded.status().ToString();
      for (int i = 0; i < kSteps; ++i) {
        const double want = plain->losses[static_cast<size_t>(i)];
        EXPECT_NEAR(sharded->losses[static_cast<size_t>(i)], want, 1e-5 * std::abs(want))
            << what << " step " << i + 1;
      }
      // The weights moved (a run that never updated would match trivially
      // only if the unsharded one did not move either).
      EXPECT_NE(plain->losses.front(), plain->losses.back()) << what;
      if (rank == 0) ExpectTensorsNear(sharded->params, plain->params, 1e-5, 1e-7, what);
      // Two moments of the whole buffer unsharded; of one shard (ceil(N/dp)
      // or what is left of N for the last replica) with --zero1.
      const std::size_t np = plain->num_params, dp = static_cast<std::size_t>(shape.dp);
      EXPECT_EQ(plain->optimizer_floats, 2 * np) << what;
      EXPECT_LE(sharded->optimizer_floats, 2 * ((np + dp - 1) / dp)) << what;
      std::size_t total = sharded->optimizer_floats;  // over the data group: exactly 2N
      MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, grid->dp_comm());
      EXPECT_EQ(total, 2 * np) << what;
      ++checked;
    }
  }
  EXPECT_EQ(checked,
            static_cast<int>(Cases().size()) * static_cast<int>(Layouts(n, /*min_dp=*/2).size()));
}

// A checkpoint directory shared by all ranks (rank 0 names it).
std::string SharedTempDir(const char* name) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char buf[512] = {};
  if (rank == 0) {
    const auto dir =
        std::filesystem::temp_directory_path() / fmt::format("hpcml_zero1_{}_{}", ::getpid(), name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::snprintf(buf, sizeof buf, "%s", dir.c_str());
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf;
}

// Trains to `stop` with --zero1 and a save at that step, then resumes in a
// fresh trainer (--zero1 or not) and trains to kSteps: the losses after the
// restart and the final weights equal those of an uninterrupted run.
TEST(Zero1, CheckpointsSaveAndRestoreTheShardedMoments) {
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const Case c = Cases()[0];
  const GridShape shape{n, 1, 1};
  auto grid = ProcessGrid::Create(MPI_COMM_WORLD, shape);
  ASSERT_TRUE(grid.ok());
  auto reference = Train(c, *grid, true, kSteps);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  Logger log("zero1_test");
  constexpr int kStop = 3;
  for (bool resume_zero1 : {true, false}) {
    const std::string what = resume_zero1 ? "resumed with --zero1" : "resumed without --zero1";
    const std::string dir = SharedTempDir(resume_zero1 ? "z" : "plain");
    CheckpointOptions opt;
    opt.dir = dir;
    opt.every_steps = kStop;
    opt.async = false;
    auto checkpointer = [&](Session& run) {
      return Checkpointer::Create(opt, &*grid, run.trainer.get(), run.backend.get(),
                                  run.source.get(), &log);
    };
    {
      auto first = Open(c, *grid, true);
      ASSERT_TRUE(first.ok()) << first.status().ToString();
      auto ck = checkpointer(*first);
      ASSERT_TRUE(ck.ok()) << ck.status().ToString();
      auto resumed = (*ck)->Resume();
      ASSERT_TRUE(resumed.ok() && *resumed == 0) << what;
      for (int i = 0; i < kStop; ++i) {
        auto st = first->trainer->Step();
        ASSERT_TRUE(st.ok()) << st.status().ToString();
        auto after = (*ck)->AfterStep(*st);
        ASSERT_TRUE(after.ok()) << after.status().ToString();
      }
      EXPECT_EQ((*ck)->stats().last_saved_step, kStop) << what;
    }
    auto second = Open(c, *grid, resume_zero1);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    auto ck = checkpointer(*second);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    auto resumed = (*ck)->Resume();
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    EXPECT_EQ(*resumed, kStop) << what;
    for (int i = kStop; i < kSteps; ++i) {
      auto st = second->trainer->Step();
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      const double want = reference->losses[static_cast<size_t>(i)];
      EXPECT_NEAR(st->loss, want, 1e-5 * std::abs(want)) << what << " step " << i + 1;
    }
    auto params =
        GatherModel(second->trainer->model(), &*grid, *second->backend, WhichTensor::kParams);
    ASSERT_TRUE(params.ok());
    if (rank == 0) ExpectTensorsNear(*params, reference->params, 1e-5, 1e-7, what);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace hpcml::trainer
