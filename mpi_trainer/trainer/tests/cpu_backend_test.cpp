// CPU backend math against straightforward loops (no MPI: null grid).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {
namespace {

std::vector<float> Random(size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(GaussianAt(seed, i));
  return v;
}

TEST(CpuBackend, GemmMatchesNaiveForEveryTransposition) {
  auto be = MakeCpuBackend(nullptr);
  const int m = 5, n = 7, k = 3;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2), c = Random(m * n, 3);
      std::vector<float> want = c;
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p) {
            double av = ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
            double bv = tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
            s += av * bv;
          }
          want[static_cast<size_t>(i * n + j)] =
              static_cast<float>(2.0 * s + 0.5 * c[static_cast<size_t>(i * n + j)]);
        }
      }
      be->Gemm(ta != 0, tb != 0, m, n, k, 2.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.5f,
               c.data(), n);
      for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], want[i], 1e-5) << ta << tb << i;
    }
  }
}

// oneDNN (the default) and OpenBLAS (the fallback) on strided operands, every
// transposition, alpha and both betas the model uses.
TEST(CpuBackend, GemmLibrariesAgree) {
  auto dnnl = MakeCpuBackend(nullptr, {GemmLibrary::kOneDnn, 1});
  auto blas = MakeCpuBackend(nullptr, {GemmLibrary::kOpenBlas, 1});
  const int pad = 3;
  // Small (oneDNN's matmul) and large (its packed sgemm) products.
  for (auto [m, n, k] : {std::tuple{67, 45, 131}, std::tuple{515, 530, 521}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f}) {
          const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
          std::vector<float> a = Random(static_cast<size_t>((ta ? k : m) * lda), 4);
          std::vector<float> b = Random(static_cast<size_t>((tb ? n : k) * ldb), 5);
          std::vector<float> c1 = Random(static_cast<size_t>(m * ldc), 6), c2 = c1;
          dnnl->Gemm(ta != 0, tb != 0, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c1.data(),
                     ldc);
          blas->Gemm(ta != 0, tb != 0, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c2.data(),
                     ldc);
          for (size_t i = 0; i < c1.size(); ++i) {
            ASSERT_NEAR(c1[i], c2[i], 1e-4f * (1.0f + std::fabs(c2[i])))
                << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " beta " << beta
                << " at " << i;
          }
        }
      }
    }
  }
}

// The fused layer forward (one oneDNN matmul with bias and ReLU post-ops, or
// bias then the activation loop) against Gemm then AddBiasAct on OpenBLAS.
// ReLU may leave z unwritten: only a is compared there (the contract).
TEST(CpuBackend, FusedDenseForwardMatchesGemmThenBiasAct) {
  auto dnnl = MakeCpuBackend(nullptr, {GemmLibrary::kOneDnn, 1});
  auto blas = MakeCpuBackend(nullptr, {GemmLibrary::kOpenBlas, 1});
  const int rows = 33, in = 70, out = 50;
  const std::vector<float> x = Random(rows * in, 7), w = Random(out * in, 8), b = Random(out, 9);
  for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
    for (bool with_act : {true, false}) {
      std::vector<float> z1(rows * out, -7.0f), a1(rows * out), z2(rows * out), a2(rows * out);
      dnnl->DenseForward(x.data(), w.data(), b.data(), rows, in, out, act, z1.data(),
                         with_act ? a1.data() : nullptr);
      blas->Gemm(false, true, rows, out, in, 1.0f, x.data(), in, w.data(), in, 0.0f, z2.data(),
                 out);
      blas->AddBiasAct(act, z2.data(), b.data(), with_act ? a2.data() : nullptr, rows, out);
      for (size_t i = 0; i < z2.size(); ++i) {
        if (with_act) {
          ASSERT_NEAR(a1[i], a2[i], 1e-5f) << Name(act) << " a at " << i;
        }
        if (!with_act || act != Activation::kRelu) {
          ASSERT_NEAR(z1[i], z2[i], 1e-5f) << Name(act) << " z at " << i;
        }
      }
    }
  }
}

// Several math threads split the elementwise work; the results match one
// thread: exactly where each element (or column sum) keeps its order, within
// rounding where partial sums are combined.
TEST(CpuBackend, TwoThreadsMatchOne) {
  const std::int64_t rows = 256, cols = 300;
  const auto n = static_cast<size_t>(rows * cols);
  const std::vector<float> z = Random(n, 10), dout = Random(n, 11), g = Random(n, 12);
  std::vector<float> targets(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    targets[static_cast<size_t>(r)] = static_cast<float>(r % cols);
  struct Out {
    std::vector<float> dpre, db, dlogits, p, m, v;
    double loss, sq;
  };
  auto run = [&](int threads) {
    auto be = MakeCpuBackend(nullptr, {GemmLibrary::kOneDnn, threads});
    Out o{std::vector<float>(n),
          std::vector<float>(cols, 0.5f),
          std::vector<float>(n),
          z,
          std::vector<float>(n, 0.1f),
          std::vector<float>(n, 0.2f),
          0,
          0};
    be->ActBackwardBiasGrad(Activation::kGelu, z.data(), dout.data(), o.dpre.data(), rows, cols,
                            o.db.data());
    o.loss = be->LossAndGrad(LossKind::kCrossEntropy, z.data(), targets.data(), rows, cols,
                             1.0f / rows, o.dlogits.data());
    o.sq = be->SumSquares(g.data(), n);
    AdamWStep st;
    st.weight_decay = 0.01f;
    st.step = 3;
    be->AdamW(o.p.data(), g.data(), o.m.data(), o.v.data(), n, st);
    return o;
  };
  const Out two = run(2);
  const Out one = run(1);
  EXPECT_EQ(two.dpre, one.dpre);
  EXPECT_EQ(two.db, one.db);
  EXPECT_EQ(two.dlogits, one.dlogits);
  EXPECT_EQ(two.p, one.p);
  EXPECT_EQ(two.m, one.m);
  EXPECT_EQ(two.v, one.v);
  EXPECT_NEAR(two.loss, one.loss, 1e-9 * std::fabs(one.loss));
  EXPECT_NEAR(two.sq, one.sq, 1e-12 * one.sq);
}

TEST(CpuBackend, BiasAddAndGrad) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> y{1, 2, 3, 4, 5, 6}, b{10, 20, 30}, db{1, 1, 1};
  be->AddBias(y.data(), b.data(), 2, 3);
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  be->BiasGrad(y.data(), 2, 3, db.data());
  EXPECT_EQ(db, (std::vector<float>{26, 48, 70}));
}

TEST(CpuBackend, ActivationDerivativesMatchFiniteDifferences) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> x{-2.0f, -0.7f, -0.1f, 0.3f, 1.1f, 2.5f};
  for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
    std::vector<float> ones(x.size(), 1.0f), d(x.size()), lo(x.size()), hi(x.size());
    be->ActBackward(act, x.data(), ones.data(), d.data(), x.size());
    const float h = 1e-3f;
    std::vector<float> xl = x, xh = x;
    for (auto& v : xl) v -= h;
    for (auto& v : xh) v += h;
    be->ActForward(act, xl.data(), lo.data(), x.size());
    be->ActForward(act, xh.data(), hi.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(d[i], (hi[i] - lo[i]) / (2 * h), 2e-3) << Name(act) << " at " << x[i];
    }
  }
  std::vector<float> out(1);
  float v = 1.0f;
  be->ActForward(Activation::kGelu, &v, out.data(), 1);
  EXPECT_NEAR(out[0], 0.841192f, 1e-5);  // tanh-approximate GELU(1)
}

TEST(CpuBackend, CrossEntropyLossAndGradient) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> z{1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f}, t{2.0f, 0.0f}, dz(6);
  double loss = be->LossAndGrad(LossKind::kCrossEntropy, z.data(), t.data(), 2, 3, 0.5f, dz.data());
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(loss, (lse - 3.0) + std::log(3.0), 1e-6);
  EXPECT_NEAR(dz[2], 0.5 * (std::exp(3.0 - lse) - 1.0), 1e-6);
  EXPECT_NEAR(dz[0], 0.5 * std::exp(1.0 - lse), 1e-6);
  EXPECT_NEAR(dz[3], 0.5 * (1.0 / 3.0 - 1.0), 1e-6);
  // An out-of-range label poisons the loss instead of reading out of bounds.
  std::vector<float> bad{3.0f, 0.0f};
  EXPECT_TRUE(std::isnan(
      be->LossAndGrad(LossKind::kCrossEntropy, z.data(), bad.data(), 2, 3, 1.0f, dz.data())));
}

TEST(CpuBackend, ClassWeightsScaleEachRowsLossAndGradient) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> z{1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f}, t{2.0f, 0.0f}, dz(6), dw(6);
  const std::vector<float> w{4.0f, 1.0f, 0.25f};
  const double plain =
      be->LossAndGrad(LossKind::kCrossEntropy, z.data(), t.data(), 2, 3, 1.0f, dz.data());
  const double weighted =
      be->LossAndGrad(LossKind::kCrossEntropy, z.data(), t.data(), 2, 3, 1.0f, dw.data(), w.data());
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(plain, (lse - 3.0) + std::log(3.0), 1e-6);
  EXPECT_NEAR(weighted, 0.25 * (lse - 3.0) + 4.0 * std::log(3.0), 1e-6);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(dw[static_cast<size_t>(c)], 0.25f * dz[static_cast<size_t>(c)], 1e-7);  // class 2
    EXPECT_NEAR(dw[static_cast<size_t>(3 + c)], 4.0f * dz[static_cast<size_t>(3 + c)], 1e-6);
  }
}

TEST(CpuBackend, EmbedLookupFillsSlotsAndGradAddsRowsPerCode) {
  auto be = MakeCpuBackend(nullptr);
  // Table of 3 codes x 2; rows of stride 4 with the slot at column 1.
  const std::vector<float> table{1, 2, 3, 4, 5, 6};
  std::vector<float> x{9, 2, 0, 9, 9, 0, 0, 9, 9, 2, 0, 9};
  std::vector<float> codes(3);
  be->EmbedLookup(table.data(), 2, x.data() + 1, 4, 3, codes.data());
  EXPECT_EQ(codes, (std::vector<float>{2, 0, 2}));
  EXPECT_EQ(x, (std::vector<float>{9, 5, 6, 9, 9, 1, 2, 9, 9, 5, 6, 9}));
  std::vector<float> dx{0, 1, 10, 0, 0, 100, 1000, 0, 0, 2, 20, 0};
  std::vector<float> dt(6, 0.5f);
  be->EmbedGrad(dx.data() + 1, 4, codes.data(), 3, 2, dt.data());
  EXPECT_EQ(dt, (std::vector<float>{100.5f, 1000.5f, 0.5f, 0.5f, 3.5f, 30.5f}));
}

TEST(CpuBackend, MseLossAndGradient) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> y{1.0f, 2.0f}, t{0.0f, 4.0f}, dy(2);
  double loss = be->LossAndGrad(LossKind::kMse, y.data(), t.data(), 1, 2, 1.0f, dy.data());
  EXPECT_NEAR(loss, (1.0 + 4.0) / 2.0, 1e-9);
  EXPECT_NEAR(dy[0], 2.0 * 1.0 / 2.0, 1e-6);
  EXPECT_NEAR(dy[1], 2.0 * -2.0 / 2.0, 1e-6);
}

TEST(CpuBackend, AdamWStepMatchesTheFormula) {
  auto be = MakeCpuBackend(nullptr);
  std::vector<float> p{1.0f, -2.0f}, g{0.5f, -0.25f}, m(2, 0.0f), v(2, 0.0f);
  AdamWStep st;
  st.lr = 0.1f;
  st.weight_decay = 0.01f;
  st.grad_scale = 0.5f;
  for (int step = 1; step <= 2; ++step) {
    st.step = step;
    be->AdamW(p.data(), g.data(), m.data(), v.data(), 2, st);
  }
  // Reference in double.
  double pr[2] = {1.0, -2.0}, mr[2] = {0, 0}, vr[2] = {0, 0};
  for (int step = 1; step <= 2; ++step) {
    for (int i = 0; i < 2; ++i) {
      double gi = 0.5 * (i == 0 ? 0.5 : -0.25);
      mr[i] = 0.9 * mr[i] + 0.1 * gi;
      vr[i] = 0.999 * vr[i] + 0.001 * gi * gi;
      double mh = mr[i] / (1 - std::pow(0.9, step)), vh = vr[i] / (1 - std::pow(0.999, step));
      pr[i] = pr[i] * (1 - 0.1 * 0.01) - 0.1 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  EXPECT_NEAR(p[0], pr[0], 1e-5);
  EXPECT_NEAR(p[1], pr[1], 1e-5);
}

TEST(CpuBackend, BuffersAreZeroedAndCommunicationIsANoOpWithoutGrid) {
  auto be = MakeCpuBackend(nullptr);
  Buffer b = be->Alloc(4);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(b.data()[i], 0.0f);
  be->Fill(b.data(), 4, 2.0f);
  be->Allreduce(b.data(), 4, Group::kWorld);
  be->StartAllreduce(b.data(), 4, Group::kData);
  be->WaitAllreduces();
  EXPECT_EQ(b.data()[3], 2.0f);
  EXPECT_DOUBLE_EQ(be->SumSquares(b.data(), 4), 16.0);
  Buffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), 4u);
}

}  // namespace
}  // namespace hpcml::trainer
