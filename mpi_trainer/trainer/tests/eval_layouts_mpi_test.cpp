// Trainer::Evaluate in every dp x pp x tp layout (and ZeRO-1 where dp >= 2)
// gives the single-process run's validation metrics at every evaluation,
// over a held-out set whose size leaves short and empty batches on some
// replicas; evaluating changes nothing in training. Run under mpirun with 2
// and 4 ranks.
//
// Tolerance: log loss, MSE and RMSE to 1e-5 relative (the losses' tolerance
// in trainer_layouts: float forward passes in another order); accuracy and
// AUC exactly (1e-12): they count rows and pairs, and no logit here is close
// enough to a tie for float rounding to flip one (if that ever happens, a
// flip moves accuracy by 1/rows and the AUC by 1/(positives x negatives)).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "hpcml/trainer/eval_metrics.hpp"
#include "hpcml/trainer/trainer.hpp"
#include "layout_cases.hpp"

namespace hpcml::trainer {
namespace {

constexpr int kSteps = 3;
constexpr std::int64_t kValRows = 37;  // prime: uneven replica parts, padded microbatches

std::vector<Case> Cases() {
  std::vector<Case> out;
  out.push_back(GeluCeGpipe("gelu_ce3_gpipe", {8, 8, 8}, kSteps));
  Case binary = GeluCeGpipe("gelu_ce2_gpipe", {8, 8, 8}, kSteps);
  binary.model.output_dim = 2;  // the AUC applies
  out.push_back(binary);
  out.push_back(TanhMse1F1B(kSteps));
  return out;
}

struct Run {
  std::vector<double> losses;
  std::vector<EvalMetrics> evals;  // before the first step and after each step
};

// `grid` null: a single process. `evaluate` false: the same training without evaluations.
Result<Run> Train(const Case& c, const ProcessGrid* grid, bool zero1, bool evaluate) {
  Run run;
  auto backend = MakeCpuBackend(grid);
  const int replica = grid ? grid->dp_idx() : 0, replicas = grid ? grid->shape().dp : 1;
  TrainConfig tc = c.train;
  tc.zero1 = zero1;
  HPCML_ASSIGN_OR_RETURN(auto source,
                         MakeSyntheticSource(DataFor(c.model), tc.global_batch, replica, replicas));
  HPCML_ASSIGN_OR_RETURN(auto trainer,
                         Trainer::Create(tc, c.model, grid, backend.get(), source.get()));
  SyntheticConfig vc = DataFor(c.model);
  vc.held_out = true;
  vc.samples = kValRows;
  HPCML_ASSIGN_OR_RETURN(auto val,
                         MakeSyntheticEvalSource(vc, trainer->replica_rows(), replica, replicas));
  for (int i = 0; i <= kSteps; ++i) {
    if (i > 0) {
      HPCML_ASSIGN_OR_RETURN(StepStats st, trainer->Step());
      run.losses.push_back(st.loss);
    }
    if (evaluate) {
      HPCML_ASSIGN_OR_RETURN(EvalMetrics m, trainer->Evaluate(val.get()));
      run.evals.push_back(m);
    }
  }
  return run;
}

double RelDiff(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-30);
}

TEST(EvalLayouts, EveryLayoutEvaluatesLikeTheSingleProcessRun) {
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int checked = 0;
  double worst_rel = 0, worst_count = 0;
  for (const Case& c : Cases()) {
    auto serial = Train(c, nullptr, false, true);
    ASSERT_TRUE(serial.ok()) << serial.status().ToString();
    ASSERT_EQ(serial->evals.size(), static_cast<size_t>(kSteps + 1));
    // Evaluating changes nothing in training: the same losses, bit for bit.
    auto plain = Train(c, nullptr, false, false);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->losses, serial->losses) << c.name;
    for (const GridShape& shape : Layouts(n)) {
      for (bool zero1 : {false, true}) {
        if (zero1 && shape.dp < 2) continue;
        const std::string what =
            std::string(c.name) + " on " + shape.ToString() + (zero1 ? " zero1" : "");
        auto grid = ProcessGrid::Create(MPI_COMM_WORLD, shape);
        ASSERT_TRUE(grid.ok()) << grid.status().ToString();
        auto run = Train(c, &*grid, zero1, true);
        if (!run.ok()) {
          ADD_FAILURE() << what << ": " << run.status().ToString();
          continue;
        }
        ASSERT_EQ(run->evals.size(), serial->evals.size()) << what;
        for (size_t e = 0; e < run->evals.size(); ++e) {
          const EvalMetrics &got = run->evals[e], &want = serial->evals[e];
          const std::string at = what + " eval " + std::to_string(e);
          EXPECT_EQ(got.rows, kValRows) << at;
          EXPECT_EQ(got.step, static_cast<std::int64_t>(e)) << at;
          if (c.model.loss == LossKind::kCrossEntropy) {
            EXPECT_LE(RelDiff(got.log_loss, want.log_loss), 1e-5) << at;
            EXPECT_NEAR(got.accuracy, want.accuracy, 1e-12) << at;
            worst_rel = std::max(worst_rel, RelDiff(got.log_loss, want.log_loss));
            worst_count = std::max(worst_count, std::abs(got.accuracy - want.accuracy));
            EXPECT_EQ(got.binary, c.model.output_dim == 2) << at;
            if (got.binary) {
              EXPECT_FALSE(std::isnan(want.auc)) << at;
              EXPECT_NEAR(got.auc, want.auc, 1e-12) << at;
              worst_count = std::max(worst_count, std::abs(got.auc - want.auc));
            }
          } else {
            EXPECT_LE(RelDiff(got.rmse, want.rmse), 1e-5) << at;
            EXPECT_LE(RelDiff(got.mse, want.mse), 1e-5) << at;
            worst_rel = std::max(worst_rel, RelDiff(got.rmse, want.rmse));
          }
        }
        ++checked;
      }
    }
  }
  int expected = 0;
  for (const GridShape& s : Layouts(n)) expected += s.dp >= 2 ? 2 : 1;
  EXPECT_EQ(checked, 3 * expected);
  if (rank == 0) {
    std::printf(
        "eval layouts (%d ranks): %d runs; largest relative difference of log loss / RMSE %.3g, "
        "largest difference of accuracy / AUC %.3g\n",
        n, checked, worst_rel, worst_count);
  }
}

}  // namespace
}  // namespace hpcml::trainer
