// The model on one process: gradients against central finite differences,
// and the layout-independent initialisation.
#include "hpcml/trainer/model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {
namespace {

struct Case {
  Activation act;
  LossKind loss;
};

class ModelGradTest : public ::testing::TestWithParam<Case> {};

// Loss of the whole model on a fixed batch: sum over samples / rows.
double Loss(Model& m, Backend& be, const std::vector<float>& x, const std::vector<float>& t,
            std::int64_t rows, std::vector<float>* dlogits) {
  m.Forward(0, x.data());
  std::vector<float> dz(static_cast<size_t>(rows * m.output_width()));
  double l = be.LossAndGrad(m.config().loss, m.Output(0), t.data(), rows, m.output_width(),
                            1.0f / static_cast<float>(rows), dz.data());
  if (dlogits) *dlogits = dz;
  return l / static_cast<double>(rows);
}

TEST_P(ModelGradTest, GradientsMatchFiniteDifferences) {
  ModelConfig c;
  c.input_dim = 4;
  c.hidden = {6, 5};
  c.output_dim = 3;
  c.activation = GetParam().act;
  c.loss = GetParam().loss;
  c.seed = 5;
  auto plan = PartitionModel(c, GridShape{});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  auto model = Model::Create(c, *plan, Placement{}, be.get());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  const std::int64_t rows = 3;
  m.Reserve(1, rows);
  std::vector<float> x(static_cast<size_t>(rows * 4)), t;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(GaussianAt(11, i));
  if (c.loss == LossKind::kCrossEntropy) {
    t = {0.0f, 2.0f, 1.0f};
  } else {
    for (int i = 0; i < rows * 3; ++i)
      t.push_back(static_cast<float>(GaussianAt(12, static_cast<std::uint64_t>(i))));
  }
  // Bias the pre-activations away from ReLU's kink so differences are smooth.
  for (const ParamInfo& p : m.params()) {
    if (p.is_bias) be->Fill(m.param_data() + p.offset, p.size, 0.1f);
  }
  std::vector<float> dz;
  Loss(m, *be, x, t, rows, &dz);
  m.ZeroGrad();
  m.Backward(0, dz.data(), true);
  m.WeightGrads();
  std::vector<float> analytic(m.grad_data(), m.grad_data() + m.num_params());
  std::vector<float> dinput(m.InputGrad(0), m.InputGrad(0) + rows * 4);

  const float h = 1e-2f;
  int checked = 0;
  for (size_t i = 0; i < m.num_params(); ++i) {
    float* p = m.param_data() + i;
    const float keep = *p;
    *p = keep + h;
    double up = Loss(m, *be, x, t, rows, nullptr);
    *p = keep - h;
    double down = Loss(m, *be, x, t, rows, nullptr);
    *p = keep;
    double fd = (up - down) / (2.0 * static_cast<double>(h));
    EXPECT_NEAR(analytic[i], fd, 2e-3 + 2e-2 * std::abs(fd)) << "parameter " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 6 + 6 + 6 * 5 + 5 + 5 * 3 + 3);
  // Input gradient too (what a later stage sends back).
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<float> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    double fd =
        (Loss(m, *be, xp, t, rows, nullptr) - Loss(m, *be, xm, t, rows, nullptr)) / (2.0 * h);
    EXPECT_NEAR(dinput[i], fd, 2e-3 + 2e-2 * std::abs(fd)) << "input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllActivationsAndLosses, ModelGradTest,
                         ::testing::Values(Case{Activation::kTanh, LossKind::kCrossEntropy},
                                           Case{Activation::kGelu, LossKind::kCrossEntropy},
                                           Case{Activation::kRelu, LossKind::kMse},
                                           Case{Activation::kGelu, LossKind::kMse}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(Name(i.param.act)) + "_" +
                                  std::string(Name(i.param.loss));
                         });

// Embedding tables: Embed fills the slots from the codes, their gradients
// (from the first layer's input gradient) match finite differences, over
// two microbatches, and the unknown rows start at zero.
TEST(Model, EmbeddingGradientsMatchFiniteDifferences) {
  ModelConfig c;
  c.embeddings = {{3, 2}, {4, 3}};
  c.input_dim = 3 + 2 + 3;
  c.hidden = {6};
  c.output_dim = 3;
  c.activation = Activation::kTanh;
  c.seed = 5;
  auto plan = PartitionModel(c, GridShape{});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  auto model = Model::Create(c, *plan, Placement{}, be.get());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  ASSERT_EQ(m.params()[0].name, "embed0.weight");
  ASSERT_EQ(m.params()[1].name, "embed1.weight");
  const float* t1 = m.param_data() + m.params()[1].offset;
  EXPECT_EQ(std::vector<float>(t1 + 9, t1 + 12), std::vector<float>(3, 0.0f));  // unknown row
  EXPECT_NE(t1[0], 0.0f);
  const std::int64_t rows = 4;
  m.Reserve(2, rows);
  // Dense features, then the codes in the slots' first floats (code 3 of
  // table 1 is its unknown row).
  std::vector<float> encoded(static_cast<size_t>(2 * rows * c.input_dim), 0.0f);
  const float codes[2][4][2] = {{{0, 1}, {2, 3}, {0, 1}, {0, 0}}, {{2, 2}, {2, 3}, {0, 1}, {0, 2}}};
  for (int mb = 0; mb < 2; ++mb) {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* y = encoded.data() + (mb * rows + r) * c.input_dim;
      for (int f = 0; f < 3; ++f)
        y[f] = static_cast<float>(GaussianAt(31, static_cast<std::uint64_t>(mb * 100 + r * 3 + f)));
      y[3] = codes[mb][r][0];
      y[5] = codes[mb][r][1];
    }
  }
  const std::vector<float> t{0, 2, 1, 1, 2, 0, 1, 0};
  // Loss over both microbatches (mean), with fresh copies of the slots.
  std::vector<float> x;
  auto loss = [&](std::vector<float>* dz) {
    x = encoded;
    double total = 0.0;
    if (dz) dz->assign(static_cast<size_t>(2 * rows * 3), 0.0f);
    std::vector<float> scratch(static_cast<size_t>(rows * 3));
    for (int mb = 0; mb < 2; ++mb) {
      float* in = x.data() + mb * rows * c.input_dim;
      m.Embed(mb, in);
      m.Forward(mb, in);
      total += be->LossAndGrad(c.loss, m.Output(mb), t.data() + mb * rows, rows, 3,
                               1.0f / static_cast<float>(2 * rows),
                               dz ? dz->data() + mb * rows * 3 : scratch.data());
    }
    return total / static_cast<double>(2 * rows);
  };
  std::vector<float> dz;
  loss(&dz);
  // Row 0's slots hold table 0's code 0 and table 1's code 1.
  EXPECT_EQ(x[3], m.param_data()[0]);
  EXPECT_EQ(x[4], m.param_data()[1]);
  EXPECT_EQ(x[5], t1[3]);
  m.ZeroGradOnNextBackward();
  for (int mb = 0; mb < 2; ++mb) m.Backward(mb, dz.data() + mb * rows * 3, false);
  m.WeightGrads();
  std::vector<float> analytic(m.grad_data(), m.grad_data() + m.num_params());
  const float h = 1e-2f;
  for (size_t i = 0; i < m.num_params(); ++i) {
    float* p = m.param_data() + i;
    const float keep = *p;
    *p = keep + h;
    const double up = loss(nullptr);
    *p = keep - h;
    const double down = loss(nullptr);
    *p = keep;
    const double fd = (up - down) / (2.0 * static_cast<double>(h));
    EXPECT_NEAR(analytic[i], fd, 2e-3 + 2e-2 * std::abs(fd)) << "parameter " << i;
  }
  // Table 0's code 1 is used by no row: its gradient is exactly zero.
  EXPECT_EQ(analytic[2], 0.0f);
  EXPECT_EQ(analytic[3], 0.0f);
}

// Deferred weight gradients: several microbatches taken together (one GEMM
// per layer, or one layer at a time) give the sum of each microbatch's own
// gradients, and layers are reported complete last layer first.
TEST(Model, WeightGradientsOverMicrobatchesAddUp) {
  ModelConfig c;
  c.input_dim = 7;
  c.hidden = {9, 8};
  c.output_dim = 3;
  c.loss = LossKind::kMse;
  c.seed = 3;
  auto plan = PartitionModel(c, GridShape{});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  const std::int64_t rows = 5;
  const int mbs = 3;
  std::vector<float> x(static_cast<size_t>(mbs * rows * c.input_dim));
  std::vector<float> dout(static_cast<size_t>(mbs * rows * c.output_dim));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(GaussianAt(21, i));
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = static_cast<float>(GaussianAt(22, i));
  auto run = [&](int max_layers, std::vector<int>* order) {
    auto m = Model::Create(c, *plan, Placement{}, be.get());
    EXPECT_TRUE(m.ok());
    (*m)->Reserve(mbs, rows);
    (*m)->ZeroGradOnNextBackward();
    for (int mb = 0; mb < mbs; ++mb) {
      (*m)->Forward(mb, x.data() + mb * rows * c.input_dim);
      (*m)->Backward(mb, dout.data() + mb * rows * c.output_dim, false);
      // Between backwards, one layer at a time (as a stage filling a wait).
      if (max_layers == 1 && mb == 1) (*m)->WeightGrads([&](int l) { order->push_back(l); }, 1);
    }
    (*m)->WeightGrads([&](int l) { order->push_back(l); });
    return std::vector<float>((*m)->grad_data(), (*m)->grad_data() + (*m)->num_params());
  };
  std::vector<int> order_all, order_split;
  const std::vector<float> all = run(1000, &order_all);
  const std::vector<float> split = run(1, &order_split);
  EXPECT_EQ(order_all, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(order_split, (std::vector<int>{2, 1, 0}));
  // Against each microbatch alone, summed in double.
  std::vector<double> want(all.size(), 0.0);
  for (int mb = 0; mb < mbs; ++mb) {
    auto m = Model::Create(c, *plan, Placement{}, be.get());
    ASSERT_TRUE(m.ok());
    (*m)->Reserve(1, rows);
    (*m)->ZeroGrad();
    (*m)->Forward(0, x.data() + mb * rows * c.input_dim);
    (*m)->Backward(0, dout.data() + mb * rows * c.output_dim, false);
    (*m)->WeightGrads();
    for (size_t i = 0; i < want.size(); ++i) want[i] += (*m)->grad_data()[i];
  }
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(all[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << i;
    EXPECT_NEAR(split[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << i;
  }
}

TEST(Model, ShardsAreSlicesOfTheSameGlobalInitialisation) {
  ModelConfig c;
  c.input_dim = 6;
  c.hidden = {8, 4};
  c.output_dim = 3;
  auto be = MakeCpuBackend(nullptr);
  auto serial_plan = PartitionModel(c, GridShape{});
  auto tp_plan = PartitionModel(c, GridShape{1, 1, 2});
  ASSERT_TRUE(serial_plan.ok() && tp_plan.ok());
  auto whole = Model::Create(c, *serial_plan, Placement{}, be.get());
  ASSERT_TRUE(whole.ok());
  for (int tp_idx = 0; tp_idx < 2; ++tp_idx) {
    auto shard = Model::Create(c, *tp_plan, Placement{0, 2, tp_idx}, be.get());
    ASSERT_TRUE(shard.ok());
    const auto& wp = (*whole)->params();
    const auto& sp = (*shard)->params();
    ASSERT_EQ(wp.size(), sp.size());
    for (size_t k = 0; k < sp.size(); ++k) {
      const ParamInfo& s = sp[k];
      const ParamInfo& w = wp[k];
      ASSERT_EQ(s.name, w.name);
      ASSERT_EQ(s.global_shape, w.global_shape);
      const std::int64_t cols = s.is_bias ? 1 : s.global_shape[1];
      const std::int64_t width = s.col_end - s.col_begin;
      for (std::int64_t r = s.row_begin; r < s.row_end; ++r) {
        for (std::int64_t col = s.col_begin; col < s.col_end; ++col) {
          EXPECT_EQ(
              (*shard)->param_data()[s.offset + static_cast<size_t>((r - s.row_begin) * width +
                                                                    col - s.col_begin)],
              (*whole)->param_data()[w.offset + static_cast<size_t>(r * cols + col)]);
        }
      }
    }
    // Layer 0 is column-split (rows), layer 1 row-split (columns).
    EXPECT_EQ(sp[0].row_end - sp[0].row_begin, 4);
    EXPECT_EQ(sp[2].col_end - sp[2].col_begin, 4);
    EXPECT_FALSE(sp[0].tp_replicated);
    EXPECT_TRUE(sp[3].tp_replicated);  // row-parallel bias
    EXPECT_TRUE(sp[4].tp_replicated);  // replicated last layer
  }
  // A different seed gives a different model.
  c.seed = 2;
  auto other = Model::Create(c, *serial_plan, Placement{}, be.get());
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->param_data()[0], (*whole)->param_data()[0]);
}

TEST(Model, StagesHoldTheirLayers) {
  ModelConfig c;
  c.input_dim = 6;
  c.hidden = {8, 8, 8};
  c.output_dim = 3;
  auto plan = PartitionModel(c, GridShape{1, 2, 1});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  auto s1 = Model::Create(c, *plan, Placement{1, 1, 0}, be.get());
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ((*s1)->first_layer(), plan->stage_begin[1]);
  EXPECT_EQ((*s1)->input_width(), 8);
  EXPECT_EQ((*s1)->output_width(), 3);
  EXPECT_FALSE(Model::Create(c, *plan, Placement{2, 1, 0}, be.get()).ok());
}

}  // namespace
}  // namespace hpcml::trainer
