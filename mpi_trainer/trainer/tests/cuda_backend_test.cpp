// The CUDA backend against the CPU backend, and the properties a GPU run
// must have: zero-filled allocations ordered before later work, copies
// that survive the host buffer's reuse, deterministic reductions (a run
// repeats bit for bit, so does a resume from a checkpoint), errors of
// device work surfacing through status().
//
// Needs a GPU. Exits 77 (ctest: skipped) only when this machine has no
// NVIDIA GPU at all (cuda::CountDevices, kernels.cuh); any other CUDA error
// prints its name and fails. HPCML_REQUIRE_GPU=1 makes "no GPU" a failure
// too, for runs on a GPU machine.
//
// Tolerances. GEMM inputs are rounded to bf16 (8 significant bits) and
// accumulated in fp32: products agree with the fp32 CPU GEMM to 1e-2
// relative (plus 0.1 absolute at k = 65). Everything else is fp32 on both
// sides and agrees to float rounding (1e-6 to 1e-4, stated per check).
// Training losses agree with the CPU run to kTrainLossTolerance relative.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../cuda/kernels.cuh"
#include "checkpointing.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/random.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace hpcml::trainer {
namespace {

// bf16 GEMMs against fp32 ones, 20 steps of a 16-64-64-4 GELU MLP
// (docs/trainer.md states the same figure).
constexpr double kTrainLossTolerance = 2e-2;

std::vector<float> Random(size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(GaussianAt(seed, i));
  return v;
}

bool SameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = MakeCudaBackend(nullptr);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(*b);
    cpu_ = MakeCpuBackend(nullptr);
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().ToString();
    }
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
  EXPECT_NEAR(gpu_->SumSquares(dzz.data() + 1, z.size() - 1),  // not 16-byte aligned
              cpu_->SumSquares(z.data() + 1, z.size() - 1), 1e-4);

  // Class weights, then an embedding lookup and its gradient with repeated
  // codes (the GPU adds them with atomics).
  std::vector<float> w(static_cast<size_t>(cols));
  for (int c = 0; c < cols; ++c) w[static_cast<size_t>(c)] = 0.5f + static_cast<float>(c);
  Buffer dw = Up(w);
  const double wc = cpu_->LossAndGrad(LossKind::kCrossEntropy, z.data(), labels.data(), rows, cols,
                                      0.5f, dl.data(), w.data());
  const double wg = gpu_->LossAndGrad(LossKind::kCrossEntropy, dzz.data(), dlab.data(), rows, cols,
                                      0.5f, ddl.data(), dw.data());
  EXPECT_NEAR(wg, wc, 1e-6 * std::abs(wc));
  gdl = Down(ddl);
  for (size_t i = 0; i < dl.size(); ++i) EXPECT_NEAR(gdl[i], dl[i], 1e-6);
  const std::vector<float> table{1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3 codes x 3
  std::vector<float> slots(static_cast<size_t>(rows * cols), 0.0f),
      codes(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r)
    slots[static_cast<size_t>(r * cols + 1)] = static_cast<float>(r % 3);
  Buffer dtable = Up(table), dslots = Up(slots), dcodes = gpu_->Alloc(static_cast<size_t>(rows));
  cpu_->EmbedLookup(table.data(), 3, slots.data() + 1, cols, rows, codes.data());
  gpu_->EmbedLookup(dtable.data(), 3, dslots.data() + 1, cols, rows, dcodes.data());
  EXPECT_EQ(Down(dslots), slots);
  EXPECT_EQ(Down(dcodes), codes);
  std::vector<float> grad(9, 0.0f);
  Buffer dgrad = Up(grad);
  cpu_->EmbedGrad(z.data() + 1, cols, codes.data(), rows, 3, grad.data());
  gpu_->EmbedGrad(dzz.data() + 1, cols, dcodes.data(), rows, 3, dgrad.data());
  auto gg = Down(dgrad);
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(gg[i], grad[i], 1e-5);

  // 103 parameters: 25 float4s and a tail of 3; then the last 102 alone,
  // which are not 16-byte aligned (the kernel's scalar form).
  constexpr size_t kParams = 103;
  auto p = Random(kParams, 7), gr = Random(kParams, 8);
  std::vector<float> m(kParams, 0.0f), v(kParams, 0.0f);
  Buffer dp = Up(p), dgr = Up(gr), dm = gpu_->Alloc(kParams), dv = gpu_->Alloc(kParams);
  AdamWStep st;
  st.lr = 0.01f;
  st.weight_decay = 0.1f;
  st.grad_scale = 0.7f;
  for (int s = 1; s <= 4; ++s) {
    st.step = s;
    const size_t at = s == 4 ? 1 : 0;
    cpu_->AdamW(p.data() + at, gr.data() + at, m.data() + at, v.data() + at, kParams - at, st);
    gpu_->AdamW(dp.data() + at, dgr.data() + at, dm.data() + at, dv.data() + at, kParams - at, st);
  }
  auto gp = Down(dp);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(gp[i], p[i], 1e-5);
}

// The fused epilogue and prologue, and the bias gradient over enough rows
// to be cut into chunks (1000 rows: 16 chunks of partial sums); db
// accumulates into what it held.
TEST_F(CudaBackendTest, FusedBiasActivationAndBiasGradMatchCpu) {
  const int rows = 1000, cols = 300;
  const auto n = static_cast<size_t>(rows * cols);
  auto z = Random(n, 11), dout = Random(n, 12), bias = Random(cols, 13), db0 = Random(cols, 14);
  for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
    std::vector<float> cz = z, cout(n), cdpre(n), cdb = db0;
    cpu_->AddBiasAct(act, cz.data(), bias.data(), cout.data(), rows, cols);
    cpu_->ActBackwardBiasGrad(act, cz.data(), dout.data(), cdpre.data(), rows, cols, cdb.data());
    Buffer gz = Up(z), gb = Up(bias), gout = gpu_->Alloc(n), gdout = Up(dout),
           gdpre = gpu_->Alloc(n), gdb = Up(db0);
    gpu_->AddBiasAct(act, gz.data(), gb.data(), gout.data(), rows, cols);
    gpu_->ActBackwardBiasGrad(act, gz.data(), gdout.data(), gdpre.data(), rows, cols, gdb.data());
    auto hz = Down(gz), hout = Down(gout), hdpre = Down(gdpre), hdb = Down(gdb);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(hz[i], cz[i], 1e-5) << i;
      ASSERT_NEAR(hout[i], cout[i], 1e-5) << i;
      ASSERT_NEAR(hdpre[i], cdpre[i], 1e-5) << i;
    }
    // Float sums of 1000 terms in another order.
    for (int c = 0; c < cols; ++c) {
      const auto i = static_cast<size_t>(c);
      EXPECT_NEAR(hdb[i], cdb[i], 2e-4 + 1e-5 * std::abs(cdb[i])) << "column " << c;
    }
  }
  // No activation: the bias only, and the plain bias gradient.
  std::vector<float> cz = z, cdb = db0;
  cpu_->AddBiasAct(Activation::kRelu, cz.data(), bias.data(), nullptr, rows, cols);
  cpu_->BiasGrad(dout.data(), rows, cols, cdb.data());
  Buffer gz = Up(z), gb = Up(bias), gdout = Up(dout), gdb = Up(db0);
  gpu_->AddBiasAct(Activation::kRelu, gz.data(), gb.data(), nullptr, rows, cols);
  gpu_->BiasGrad(gdout.data(), rows, cols, gdb.data());
  auto hz = Down(gz), hdb = Down(gdb);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(hz[i], cz[i], 1e-5) << i;
  for (int c = 0; c < cols; ++c) {
    const auto i = static_cast<size_t>(c);
    EXPECT_NEAR(hdb[i], cdb[i], 2e-4 + 1e-5 * std::abs(cdb[i])) << "column " << c;
  }
}

// The backend keeps bf16 copies of GEMM operands while their source is
// unchanged (cuda_backend.cpp, Bf16Cache): after every kind of write to A (a
// whole operand, part of one, by a kernel that writes the copy in the same
// pass or not), GEMMs reading A, plain and transposed, match the CPU's on
// A's current values.
TEST_F(CudaBackendTest, GemmOperandsFollowEveryWrite) {
  const int m = 64, k = 48, n = 40;
  const auto mk = static_cast<size_t>(m * k);
  std::vector<float> b = Random(k * n, 22), bt = Random(m * n, 23);
  Buffer da = Up(Random(mk, 21)), db = Up(b), dbt = Up(bt), dc = gpu_->Alloc(m * n),
         dct = gpu_->Alloc(k * n);
  // bf16 rounds each operand to 8 bits (relative error 2^-9 each), so an
  // element may be off by about 2^-8 of the sum of |a||b| over its products:
  // the bound is 1e-2 of that sum. A stale copy is off by the size of the
  // sum itself.
  auto abs_of = [](std::vector<float> v) {
    for (float& x : v) x = std::abs(x);
    return v;
  };
  const std::vector<float> b_abs = abs_of(b), bt_abs = abs_of(bt);
  auto check = [&](const std::string& what) {
    const std::vector<float> a = Down(da), a_abs = abs_of(a);
    std::vector<float> c(m * n), ct(k * n), bound(m * n), bound_t(k * n);
    cpu_->Gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    cpu_->Gemm(true, false, k, n, m, 1.0f, a.data(), k, bt.data(), n, 0.0f, ct.data(), n);
    cpu_->Gemm(false, false, m, n, k, 1e-2f, a_abs.data(), k, b_abs.data(), n, 0.0f, bound.data(),
               n);
    cpu_->Gemm(true, false, k, n, m, 1e-2f, a_abs.data(), k, bt_abs.data(), n, 0.0f, bound_t.data(),
               n);
    gpu_->Gemm(false, false, m, n, k, 1.0f, da.data(), k, db.data(), n, 0.0f, dc.data(), n);
    gpu_->Gemm(true, false, k, n, m, 1.0f, da.data(), k, dbt.data(), n, 0.0f, dct.data(), n);
    const std::vector<float> got = Down(dc), got_t = Down(dct);
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(got[i], c[i], bound[i] + 1e-4) << what << ", element " << i;
    }
    for (size_t i = 0; i < ct.size(); ++i) {
      ASSERT_NEAR(got_t[i], ct[i], bound_t[i] + 1e-4) << what << ", transposed, element " << i;
    }
  };
  check("first read");
  check("second read");
  const std::vector<float> fresh = Random(mk, 24);
  gpu_->ToDevice(da.data(), fresh.data(), mk);
  check("ToDevice");
  Buffer other = Up(Random(mk, 25));
  gpu_->Copy(da.data(), other.data(), mk);
  check("Copy");
  gpu_->Fill(da.data() + 10 * k, static_cast<size_t>(10 * k), 0.75f);
  check("Fill of rows 10-19");
  Buffer g = Up(Random(mk, 26)), mom = gpu_->Alloc(mk), var = gpu_->Alloc(mk);
  AdamWStep st;
  st.lr = 0.5f;
  gpu_->AdamW(da.data(), g.data(), mom.data(), var.data(), mk, st);
  check("AdamW of the whole");
  gpu_->AdamW(da.data() + k, g.data(), mom.data(), var.data(), static_cast<size_t>(k), st);
  check("AdamW of row 1");
  Buffer z = Up(Random(mk, 27)), bias = Up(Random(k, 28)), dbias = gpu_->Alloc(k);
  gpu_->AddBiasAct(Activation::kTanh, z.data(), bias.data(), da.data(), m, k);
  check("AddBiasAct");
  Buffer x = Up(Random(m * 16, 29)), w = Up(Random(k * 16, 30));
  gpu_->DenseForward(x.data(), w.data(), bias.data(), m, 16, k, Activation::kRelu, z.data(),
                     da.data());
  check("DenseForward");
  Buffer dout = Up(Random(mk, 31));
  gpu_->ActBackwardBiasGrad(Activation::kGelu, z.data(), dout.data(), da.data(), m, k,
                            dbias.data());
  check("ActBackwardBiasGrad");
  gpu_->Gemm(false, true, m, k, 16, 1.0f, x.data(), 16, w.data(), 16, 0.0f, da.data(), k);
  check("Gemm into it");
  gpu_->ActForward(Activation::kTanh, z.data(), da.data(), mk);
  check("ActForward");
  gpu_->ActBackward(Activation::kTanh, z.data(), dout.data(), da.data(), mk);
  check("ActBackward");
}

// The fused activation backward writes only the bf16 GEMM copy of its
// output when one is kept (the GEMMs after it read nothing else); the fp32
// gradient is then owed (Bf16Cache) and widened before anything reads it or
// writes part of it. g = dout * relu'(pre) is exactly the CPU's, so the
// values read back are exactly its bf16 rounding.
TEST_F(CudaBackendTest, BackwardOwesItsGradientUntilSomethingReadsIt) {
  const int rows = 256, cols = 128;
  const auto n = static_cast<size_t>(rows * cols);
  const std::vector<float> pre = Random(n, 41), dout = Random(n, 42), ones(cols, 1.0f);
  std::vector<float> dpre(n), db(cols, 0.0f);
  cpu_->ActBackwardBiasGrad(Activation::kRelu, pre.data(), dout.data(), dpre.data(), rows, cols,
                            db.data());
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = static_cast<float>(__nv_bfloat16(dpre[i]));
  Buffer dp = Up(pre), dd = Up(dout), dg = gpu_->Alloc(n), ddb = gpu_->Alloc(cols),
         dones = Up(ones), sink = gpu_->Alloc(rows);
  auto backward = [&](float* g) {
    gpu_->Fill(ddb.data(), cols, 0.0f);
    gpu_->ActBackwardBiasGrad(Activation::kRelu, dp.data(), dd.data(), g, rows, cols, ddb.data());
  };
  auto row_sums = [&] {  // a GEMM reading g (through its copy)
    gpu_->Gemm(false, false, rows, 1, cols, 1.0f, dg.data(), cols, dones.data(), 1, 0.0f,
               sink.data(), 1);
  };
  // No copy kept yet: the fp32 gradient itself, exact.
  backward(dg.data());
  EXPECT_EQ(Down(dg), dpre);
  row_sums();  // now a copy is kept

  backward(dg.data());
  EXPECT_EQ(Down(dg), want) << "ToHost";
  const std::vector<float> gdb = Down(ddb);
  for (int c = 0; c < cols; ++c) {
    const auto i = static_cast<size_t>(c);
    EXPECT_NEAR(gdb[i], db[i], 1e-3 * std::max(1.0f, std::abs(db[i]))) << "db " << c;
  }
  backward(dg.data());
  double ss = 0.0;
  for (float v : want) ss += static_cast<double>(v) * v;
  EXPECT_NEAR(gpu_->SumSquares(dg.data(), n), ss, 1e-6 * ss) << "SumSquares";
  backward(dg.data());
  Buffer copy = gpu_->Alloc(n);
  gpu_->Copy(copy.data(), dg.data(), n);
  EXPECT_EQ(Down(copy), want) << "Copy";
  // A GEMM reads the copy, and leaves g owed.
  backward(dg.data());
  row_sums();
  const std::vector<float> sums = Down(sink);
  for (int r = 0; r < rows; ++r) {
    double t = 0.0, mag = 0.0;
    for (int c = 0; c < cols; ++c) {
      t += want[static_cast<size_t>(r * cols + c)];
      mag += std::abs(want[static_cast<size_t>(r * cols + c)]);
    }
    EXPECT_NEAR(sums[static_cast<size_t>(r)], t, 1e-5 * mag + 1e-6) << "row sum " << r;
  }
  EXPECT_EQ(Down(dg), want) << "after a GEMM read it";
  // A partial write widens the rest first.
  backward(dg.data());
  gpu_->Fill(dg.data() + 5, 10, 3.0f);
  std::vector<float> filled = want;
  std::fill(filled.begin() + 5, filled.begin() + 15, 3.0f);
  EXPECT_EQ(Down(dg), filled) << "after a partial Fill";
  // Freeing another buffer drops every copy: what is owed is widened first.
  backward(dg.data());
  { Buffer gone = gpu_->Alloc(16); }
  EXPECT_EQ(Down(dg), want) << "after a Free";
  // A whole overwrite needs no widening.
  row_sums();
  backward(dg.data());
  gpu_->ToDevice(dg.data(), pre.data(), n);
  EXPECT_EQ(Down(dg), pre) << "after a whole ToDevice";
}

// Rows wider than a warp (the one-warp-per-row loss loops over columns),
// logits large enough that a naive exp would overflow, one bad label.
TEST_F(CudaBackendTest, CrossEntropyOnWideRowsMatchesCpu) {
  const int rows = 300, cols = 1000;
  const auto n = static_cast<size_t>(rows * cols);
  auto z = Random(n, 21);
  for (float& v : z) v = 30.0f * v;
  std::vector<float> labels(rows);
  for (int r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = static_cast<float>(r * 7 % cols);
  std::vector<float> cd(n);
  const double lc = cpu_->LossAndGrad(LossKind::kCrossEntropy, z.data(), labels.data(), rows, cols,
                                      0.25f, cd.data());
  Buffer gz = Up(z), gl = Up(labels), gd = gpu_->Alloc(n);
  const double lg = gpu_->LossAndGrad(LossKind::kCrossEntropy, gz.data(), gl.data(), rows, cols,
                                      0.25f, gd.data());
  EXPECT_NEAR(lg, lc, 1e-5 * std::abs(lc));
  auto hd = Down(gd);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(hd[i], cd[i], 1e-6) << i;

  labels[3] = static_cast<float>(cols);  // out of range: NaN loss, zero gradient row
  Buffer gl2 = Up(labels);
  EXPECT_TRUE(std::isnan(gpu_->LossAndGrad(LossKind::kCrossEntropy, gz.data(), gl2.data(), rows,
                                           cols, 0.25f, gd.data())));
  hd = Down(gd);
  for (int c = 0; c < cols; ++c) EXPECT_EQ(hd[static_cast<size_t>(3 * cols + c)], 0.0f);
}

// The zero-fill runs on the compute stream: whatever this backend does next
// with the buffer comes after it (a fill on the legacy stream could land
// after the initial weights). Repeated, with reused memory.
TEST_F(CudaBackendTest, AllocZeroFillIsOrderedBeforeLaterWork) {
  const size_t n = size_t{1} << 22;
  const std::vector<float> ones(n, 1.0f);
  for (int round = 0; round < 20; ++round) {
    {
      Buffer dirty = gpu_->Alloc(n);
      gpu_->Fill(dirty.data(), n, 7.0f);
    }
    Buffer fresh = gpu_->Alloc(n);
    auto h = Down(fresh);
    ASSERT_EQ(std::count(h.begin(), h.end(), 0.0f), static_cast<long>(n)) << "round " << round;
    Buffer w = gpu_->Alloc(n);
    gpu_->ToDevice(w.data(), ones.data(), n);
    h = Down(w);
    ASSERT_EQ(std::count(h.begin(), h.end(), 1.0f), static_cast<long>(n)) << "round " << round;
  }
}

// A GEMM is ordered with the rest of the backend's work: the kernels that
// write its operands before it, and a copy of its result right after it (a
// product of 8192^3, over a millisecond, so a GEMM queued on another stream
// is still running when the copy reads). cuBLAS once ran on the upload
// stream, and only compute-sanitizer's slower launches showed it.
TEST_F(CudaBackendTest, GemmIsOrderedWithTheOtherWorkOfTheStream) {
  const std::int64_t n = 8192;
  const auto nn = static_cast<size_t>(n * n);
  Buffer a = gpu_->Alloc(nn), b = gpu_->Alloc(nn);
  for (int round = 1; round <= 3; ++round) {
    gpu_->Fill(a.data(), nn, 0.5f * static_cast<float>(round));
    gpu_->Fill(b.data(), nn, 0.25f);
    Buffer c = gpu_->Alloc(nn), d = gpu_->Alloc(nn);
    gpu_->Gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    gpu_->Copy(d.data(), c.data(), nn);
    const std::vector<float> h = Down(d);
    const float want = 0.125f * static_cast<float>(round * n);  // exact in bf16 and fp32
    const auto right = std::count(h.begin(), h.end(), want);
    ASSERT_EQ(right, static_cast<long>(nn))
        << "round " << round << ": " << static_cast<long>(nn) - right << " elements are not "
        << want << " (the copy read C before the GEMM had written it)";
  }
}

// ToDevice returns before the copy is done; the host buffer may be reused at
// once. Also a copy larger than one staging piece (64 MiB).
TEST_F(CudaBackendTest, CopiesSurviveHostReuseAndSpanStagingPieces) {
  std::vector<float> h = Random(1000, 31);
  const std::vector<float> want = h;
  Buffer a = gpu_->Alloc(h.size()), b = gpu_->Alloc(h.size());
  gpu_->ToDevice(a.data(), h.data(), h.size());
  std::fill(h.begin(), h.end(), -1.0f);
  gpu_->ToDevice(b.data(), h.data(), h.size());
  EXPECT_EQ(Down(a), want);
  EXPECT_EQ(Down(b), h);

  const size_t big = (size_t{20} << 20) + 3;
  std::vector<float> large(big);
  for (size_t i = 0; i < big; ++i) large[i] = static_cast<float>(i % 65521);
  Buffer d = Up(large);
  EXPECT_EQ(Down(d), large);
}

// The clip scale depends on the norm: it must not change in the last bits
// between runs (no atomics in the reduction).
TEST_F(CudaBackendTest, SumSquaresIsBitwiseRepeatable) {
  const size_t n = (size_t{10} << 20) + 7;
  auto x = Random(n, 41);
  Buffer d = Up(x);
  const double first = gpu_->SumSquares(d.data(), n);
  for (int i = 0; i < 10; ++i) {
    const double again = gpu_->SumSquares(d.data(), n);
    EXPECT_TRUE(SameBits(first, again)) << first << " vs " << again;
  }
  const double cpu = cpu_->SumSquares(x.data(), n);
  EXPECT_NEAR(first, cpu, 1e-12 * cpu);
}

ModelConfig SmallModel() {
  ModelConfig mc;
  mc.input_dim = 16;
  mc.hidden = {64, 64};
  mc.output_dim = 4;
  mc.activation = Activation::kGelu;
  return mc;
}

TrainConfig SmallTraining() {
  TrainConfig tc;
  tc.global_batch = 64;
  tc.microbatches = 2;
  tc.lr = {3e-3, 3e-4, 2, 20};
  tc.clip = 0.5f;  // small: the clip scale is used on most steps
  return tc;
}

struct History {
  std::vector<double> loss, grad_norm;
  std::vector<float> params;
};

History Train(Backend* backend, int steps) {
  History h;
  SyntheticConfig sc;
  sc.features = 16;
  sc.outputs = 4;
  const TrainConfig tc = SmallTraining();
  auto src = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
  EXPECT_TRUE(src.ok());
  if (!src.ok()) return h;
  auto t = Trainer::Create(tc, SmallModel(), nullptr, backend, src->get());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return h;
  Status run = (*t)->Run(steps, [&](const StepStats& s) {
    h.loss.push_back(s.loss);
    h.grad_norm.push_back(s.grad_norm);
    return Trainer::AfterStep::kContinue;
  });
  EXPECT_TRUE(run.ok()) << run.ToString();
  h.params.resize((*t)->model().num_params());
  backend->ToHost(h.params.data(), (*t)->model().param_data(), h.params.size());
  return h;
}

TEST_F(CudaBackendTest, TrainingTracksTheCpuRunAndRepeatsBitwise) {
  const History cpu = Train(cpu_.get(), 20);
  const History gpu = Train(gpu_.get(), 20);
  ASSERT_EQ(gpu.loss.size(), cpu.loss.size());
  double worst = 0;
  for (size_t s = 0; s < cpu.loss.size(); ++s) {
    const double rel = std::abs(gpu.loss[s] - cpu.loss[s]) / std::abs(cpu.loss[s]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, kTrainLossTolerance) << "step " << s + 1;
  }
  std::printf("cuda vs cpu: largest relative loss difference over 20 steps %.3g (limit %.3g)\n",
              worst, kTrainLossTolerance);
  EXPECT_LT(gpu.loss.back(), gpu.loss.front());

  const History again = Train(gpu_.get(), 20);
  ASSERT_EQ(again.loss.size(), gpu.loss.size());
  for (size_t s = 0; s < gpu.loss.size(); ++s) {
    EXPECT_TRUE(SameBits(again.loss[s], gpu.loss[s])) << "loss, step " << s + 1;
    EXPECT_TRUE(SameBits(again.grad_norm[s], gpu.grad_norm[s])) << "grad norm, step " << s + 1;
  }
  EXPECT_EQ(again.params, gpu.params);
}

// Save at step 5 from GPU memory, resume in a fresh trainer: steps 6-10 and
// the final weights equal the uninterrupted run's bit for bit.
TEST_F(CudaBackendTest, ResumeFromACheckpointIsBitwise) {
  constexpr int kStop = 5, kSteps = 10;
  const History reference = Train(gpu_.get(), kSteps);
  ASSERT_EQ(reference.loss.size(), static_cast<size_t>(kSteps));
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("hpcml-cuda-resume-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  Logger log("trainer_cuda_backend_test");
  CheckpointOptions opt;
  opt.dir = dir;
  opt.every_steps = kStop;
  opt.async = false;
  SyntheticConfig sc;
  sc.features = 16;
  sc.outputs = 4;
  const TrainConfig tc = SmallTraining();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto src = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
    ASSERT_TRUE(src.ok());
    auto t = Trainer::Create(tc, SmallModel(), nullptr, gpu_.get(), src->get());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto ck = Checkpointer::Create(opt, nullptr, t->get(), gpu_.get(), src->get(), &log);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    auto resumed = (*ck)->Resume();
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    ASSERT_EQ(*resumed, attempt == 0 ? 0 : kStop);
    const int until = attempt == 0 ? kStop : kSteps;
    for (std::int64_t s = *resumed; s < until; ++s) {
      auto st = (*t)->Step();
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      if (attempt == 1) {
        EXPECT_TRUE(SameBits(st->loss, reference.loss[static_cast<size_t>(s)]))
            << "step " << s + 1 << ": " << st->loss << " vs "
            << reference.loss[static_cast<size_t>(s)];
      }
      auto after = (*ck)->AfterStep(*st);
      ASSERT_TRUE(after.ok()) << after.status().ToString();
    }
    if (attempt == 1) {
      std::vector<float> params((*t)->model().num_params());
      gpu_->ToHost(params.data(), (*t)->model().param_data(), params.size());
      EXPECT_EQ(params, reference.params);
    }
  }
  std::filesystem::remove_all(dir);
}

// Run alone (its own process: the fault breaks the CUDA context), by the
// ctest entry trainer_cuda_backend_fault_test: a kernel that faults on the
// device is reported by status() at the next synchronisation.
TEST(CudaBackendFault, DISABLED_AnExecutionFaultSurfacesInStatus) {
  auto b = MakeCudaBackend(nullptr);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  float* bogus = reinterpret_cast<float*>(std::uintptr_t{1} << 40);
  (*b)->Fill(bogus, 1 << 20, 1.0f);
  (*b)->Synchronize();
  const Status s = (*b)->status();
  ASSERT_FALSE(s.ok());
  const std::string m = s.ToString();
  EXPECT_TRUE(m.find("cudaErrorIllegalAddress") != std::string::npos ||
              m.find("cudaErrorLaunchFailure") != std::string::npos)
      << m;
}

}  // namespace
}  // namespace hpcml::trainer

int main(int argc, char** argv) {
  const hpcml::trainer::cuda::DeviceCount dc = hpcml::trainer::cuda::CountDevices();
  if (dc.count == 0) {
    const char* must = std::getenv("HPCML_REQUIRE_GPU");
    if (dc.no_gpu && !(must != nullptr && std::strcmp(must, "1") == 0)) {
      std::printf("trainer_cuda_backend_test: skipped: no GPU on this machine: %s\n",
                  dc.reason.c_str());
      return 77;
    }
    std::fprintf(stderr, "trainer_cuda_backend_test: error: %s\n", dc.reason.c_str());
    return 1;
  }
  // The checkpoint test's Checkpointer talks MPI (MPI_COMM_SELF without a grid).
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
