// The CUDA backend against the CPU backend: every operation on the same
// inputs, and a short serial training run. Exits 77 when no GPU is visible.
// bf16 GEMM inputs: products agree to about 1e-2 relative, not 1e-6.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/random.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace hpcml::trainer {
namespace {

std::vector<float> Random(size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(GaussianAt(seed, i));
  return v;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = MakeCudaBackend(nullptr);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(*b);
    cpu_ = MakeCpuBackend(nullptr);
  }
  Buffer Up(const std::vector<float>& h) {
    Buffer d = gpu_->Alloc(h.size());
    gpu_->ToDevice(d.data(), h.data(), h.size());
    return d;
  }
  std::vector<float> Down(const Buffer& d) {
    std::vector<float> h(d.size());
    gpu_->ToHost(h.data(), d.data(), d.size());
    return h;
  }
  std::unique_ptr<Backend> gpu_, cpu_;
};

TEST_F(CudaBackendTest, GemmMatchesCpuForEveryTransposition) {
  const int m = 33, n = 17, k = 65;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      auto a = Random(m * k, 1), b = Random(k * n, 2), c = Random(m * n, 3);
      Buffer da = Up(a), db = Up(b), dc = Up(c);
      cpu_->Gemm(ta, tb, m, n, k, 1.5f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.5f, c.data(),
                 n);
      gpu_->Gemm(ta, tb, m, n, k, 1.5f, da.data(), ta ? m : k, db.data(), tb ? k : n, 0.5f,
                 dc.data(), n);
      auto got = Down(dc);
      for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(got[i], c[i], 0.1 + 1e-2 * std::abs(c[i]));
    }
  }
  EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().ToString();
}

TEST_F(CudaBackendTest, ElementwiseLossNormAndAdamMatchCpu) {
  const int rows = 7, cols = 5;
  auto z = Random(rows * cols, 4), g = Random(rows * cols, 5), bias = Random(cols, 6);
  for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
    std::vector<float> out(z.size()), dpre(z.size());
    cpu_->ActForward(act, z.data(), out.data(), z.size());
    cpu_->ActBackward(act, z.data(), g.data(), dpre.data(), z.size());
    Buffer dz = Up(z), dg = Up(g), dout = gpu_->Alloc(z.size()), ddpre = gpu_->Alloc(z.size());
    gpu_->ActForward(act, dz.data(), dout.data(), z.size());
    gpu_->ActBackward(act, dz.data(), dg.data(), ddpre.data(), z.size());
    auto o = Down(dout), d = Down(ddpre);
    for (size_t i = 0; i < z.size(); ++i) {
      EXPECT_NEAR(o[i], out[i], 1e-5);
      EXPECT_NEAR(d[i], dpre[i], 1e-5);
    }
  }
  std::vector<float> y = z, db(cols, 0.0f);
  cpu_->AddBias(y.data(), bias.data(), rows, cols);
  cpu_->BiasGrad(y.data(), rows, cols, db.data());
  Buffer dy = Up(z), dbias = Up(bias), ddb = gpu_->Alloc(cols);
  gpu_->AddBias(dy.data(), dbias.data(), rows, cols);
  gpu_->BiasGrad(dy.data(), rows, cols, ddb.data());
  auto gy = Down(dy), gdb = Down(ddb);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(gy[i], y[i], 1e-5);
  for (int i = 0; i < cols; ++i)
    EXPECT_NEAR(gdb[static_cast<size_t>(i)], db[static_cast<size_t>(i)], 1e-4);

  std::vector<float> labels{0, 1, 2, 3, 4, 0, 1}, dl(z.size());
  Buffer dlab = Up(labels), ddl = gpu_->Alloc(z.size()), dzz = Up(z);
  const double lc = cpu_->LossAndGrad(LossKind::kCrossEntropy, z.data(), labels.data(), rows, cols,
                                      0.5f, dl.data());
  const double lg = gpu_->LossAndGrad(LossKind::kCrossEntropy, dzz.data(), dlab.data(), rows, cols,
                                      0.5f, ddl.data());
  EXPECT_NEAR(lg, lc, 1e-6 * std::abs(lc));
  auto gdl = Down(ddl);
  for (size_t i = 0; i < dl.size(); ++i) EXPECT_NEAR(gdl[i], dl[i], 1e-6);
  const double mc =
      cpu_->LossAndGrad(LossKind::kMse, z.data(), g.data(), rows, cols, 1.0f, dl.data());
  Buffer dgg = Up(g);
  const double mg =
      gpu_->LossAndGrad(LossKind::kMse, dzz.data(), dgg.data(), rows, cols, 1.0f, ddl.data());
  EXPECT_NEAR(mg, mc, 1e-6 * std::abs(mc));
  EXPECT_NEAR(gpu_->SumSquares(dzz.data(), z.size()), cpu_->SumSquares(z.data(), z.size()), 1e-4);

  auto p = Random(100, 7), gr = Random(100, 8);
  std::vector<float> m(100, 0.0f), v(100, 0.0f);
  Buffer dp = Up(p), dgr = Up(gr), dm = gpu_->Alloc(100), dv = gpu_->Alloc(100);
  AdamWStep st;
  st.lr = 0.01f;
  st.weight_decay = 0.1f;
  st.grad_scale = 0.7f;
  for (int s = 1; s <= 3; ++s) {
    st.step = s;
    cpu_->AdamW(p.data(), gr.data(), m.data(), v.data(), 100, st);
    gpu_->AdamW(dp.data(), dgr.data(), dm.data(), dv.data(), 100, st);
  }
  auto gp = Down(dp);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(gp[i], p[i], 1e-5);
  EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().ToString();
}

TEST_F(CudaBackendTest, TrainingTracksTheCpuRun) {
  ModelConfig mc;
  mc.input_dim = 16;
  mc.hidden = {64, 64};
  mc.output_dim = 4;
  mc.activation = Activation::kGelu;
  TrainConfig tc;
  tc.global_batch = 64;
  tc.microbatches = 2;
  tc.lr = {3e-3, 3e-4, 2, 20};
  tc.clip = 1.0f;
  SyntheticConfig sc;
  sc.features = 16;
  sc.outputs = 4;
  std::vector<double> losses[2];
  Backend* backends[2] = {cpu_.get(), gpu_.get()};
  for (int i = 0; i < 2; ++i) {
    auto src = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
    ASSERT_TRUE(src.ok());
    auto t = Trainer::Create(tc, mc, nullptr, backends[i], src->get());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Run(20,
                          [&](const StepStats& s) {
                            losses[i].push_back(s.loss);
                            return Status::Ok();
                          })
                    .ok());
  }
  for (size_t s = 0; s < losses[0].size(); ++s) {
    EXPECT_NEAR(losses[1][s], losses[0][s], 2e-2 * std::abs(losses[0][s])) << "step " << s + 1;
  }
  EXPECT_LT(losses[1].back(), losses[1].front());
}

}  // namespace
}  // namespace hpcml::trainer

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("trainer_cuda_backend_test: skipped: no GPU visible\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
