// Every dp x pp x tp layout that fits the world size trains to the same
// losses, gradients and weights as a single-process run computed in-process
// (no MPI) on every rank. Run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
#include <vector>

#include "hpcml/trainer/trainer.hpp"
#include "layout_cases.hpp"
#include "model_io.hpp"

namespace hpcml::trainer {
namespace {

std::vector<Case> Cases() {
  std::vector<Case> out;
  {
    Case c = GeluCeGpipe("gelu_ce_gpipe", {8, 8, 8}, /*lr_steps=*/4);
    c.train.bucket_bytes = 64;  // several buckets per stage
    out.push_back(c);
  }
  out.push_back(TanhMse1F1B(/*lr_steps=*/4));
  {
    Case c{"relu_ce_1f1b_no_overlap", {}, {}};
    c.model.input_dim = 4;
    c.model.hidden = {8, 8, 8, 8};
    c.model.output_dim = 4;
    c.model.seed = 9;
    c.train.global_batch = 8;
    c.train.microbatches = 2;
    c.train.schedule = ScheduleKind::k1F1B;
    c.train.lr = {0.01, 0.001, 2, 4};
    c.train.overlap_dp = false;
    out.push_back(c);
  }
  out.push_back(EmbeddedCe(/*lr_steps=*/4));
  return out;
}

constexpr int kSteps = 4;

struct Run {
  std::vector<double> losses;
  std::vector<FullTensor> grads0;  // gradients of the first batch (rank 0)
  std::vector<FullTensor> params;  // after kSteps (rank 0)
};

// Trains kSteps; `grid` null means a single process.
Result<Run> Train(const Case& c, const ProcessGrid* grid) {
  Run run;
  auto backend = MakeCpuBackend(grid);
  const int replica = grid ? grid->dp_idx() : 0, replicas = grid ? grid->shape().dp : 1;
  HPCML_ASSIGN_OR_RETURN(auto source,
                         MakeCaseSource(c.model, c.train.global_batch, replica, replicas));
  HPCML_ASSIGN_OR_RETURN(auto trainer,
                         Trainer::Create(c.train, c.model, grid, backend.get(), source.get()));
  // Gradients of batch 0, then rewind the data so the steps see it again.
  const std::string pos = source->SavePosition();
  HPCML_ASSIGN_OR_RETURN(double loss0, trainer->ForwardBackward());
  (void)loss0;
  HPCML_ASSIGN_OR_RETURN(run.grads0,
                         GatherModel(trainer->model(), grid, *backend, WhichTensor::kGrads));
  HPCML_RETURN_IF_ERROR(source->RestorePosition(pos));
  for (int i = 0; i < kSteps; ++i) {
    HPCML_ASSIGN_OR_RETURN(StepStats st, trainer->Step());
    run.losses.push_back(st.loss);
  }
  HPCML_ASSIGN_OR_RETURN(run.params,
                         GatherModel(trainer->model(), grid, *backend, WhichTensor::kParams));
  return run;
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

TEST(Layouts, EveryLayoutMatchesTheSingleProcessRun) {
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int checked = 0;
  for (const Case& c : Cases()) {
    auto serial = Train(c, nullptr);
    ASSERT_TRUE(serial.ok()) << serial.status().ToString();
    ASSERT_EQ(serial->losses.size(), static_cast<size_t>(kSteps));
    for (const GridShape& shape : Layouts(n)) {
      const std::string what = std::string(c.name) + " on " + shape.ToString();
      auto grid = ProcessGrid::Create(MPI_COMM_WORLD, shape);
      ASSERT_TRUE(grid.ok()) << grid.status().ToString();
      auto run = Train(c, &*grid);
      // Layout errors are identical on every rank, so skipping is collective.
      if (!run.ok()) {
        ADD_FAILURE() << what << ": " << run.status().ToString();
        continue;
      }
      for (int i = 0; i < kSteps; ++i) {
        const double want = serial->losses[static_cast<size_t>(i)];
        EXPECT_NEAR(run->losses[static_cast<size_t>(i)], want, 1e-5 * std::abs(want))
            << what << " step " << i + 1;
      }
      if (rank == 0) {
        ExpectTensorsNear(run->grads0, serial->grads0, 1e-4, 1e-6, what + " gradients");
        ExpectTensorsNear(run->params, serial->params, 1e-4, 1e-5, what + " weights");
      }
      ++checked;
    }
  }
  // 2 ranks: 3 layouts; 4 ranks: 6 layouts; for each of the 4 cases.
  EXPECT_EQ(checked, 4 * static_cast<int>(Layouts(n).size()));
}

// A source that fails on one rank at its second batch.
class FailingSource final : public BatchSource {
 public:
  FailingSource(std::unique_ptr<BatchSource> inner, bool fail)
      : inner_(std::move(inner)), fail_(fail) {}
  std::int64_t feature_dim() const override { return inner_->feature_dim(); }
  std::int64_t target_dim() const override { return inner_->target_dim(); }
  std::int64_t num_classes() const override { return inner_->num_classes(); }
  Status Next(std::int64_t rows, float* f, float* t) override {
    if (fail_ && ++calls_ == 2) return IoError("shard file unreadable");
    return inner_->Next(rows, f, t);
  }
  std::string SavePosition() const override { return inner_->SavePosition(); }
  Status RestorePosition(std::string_view p) override { return inner_->RestorePosition(p); }

 private:
  std::unique_ptr<BatchSource> inner_;
  bool fail_;
  int calls_ = 0;
};

TEST(Layouts, AReadErrorOnOneRankStopsEveryRankWithItsMessage) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const Case c = Cases()[0];
  auto grid = ProcessGrid::Create(MPI_COMM_WORLD, GridShape{n, 1, 1});
  ASSERT_TRUE(grid.ok());
  auto backend = MakeCpuBackend(&*grid);
  auto inner = MakeCaseSource(c.model, c.train.global_batch, grid->dp_idx(), n);
  ASSERT_TRUE(inner.ok());
  FailingSource source(std::move(*inner), grid->rank() == n - 1);
  auto trainer = Trainer::Create(c.train, c.model, &*grid, backend.get(), &source);
  ASSERT_TRUE(trainer.ok());
  EXPECT_TRUE((*trainer)->Step().ok());
  auto second = (*trainer)->Step();
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("shard file unreadable"), std::string::npos)
      << second.status().message();
  EXPECT_EQ((*trainer)->step(), 1);
}

}  // namespace
}  // namespace hpcml::trainer
