// The step loop on one process (no MPI): learning-rate schedule, validation,
// and the whole training math against an independent numpy reference.
#include "hpcml/trainer/trainer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_io.hpp"

namespace hpcml::trainer {
namespace {

TEST(LrSchedule, WarmupThenCosineThenMin) {
  LrSchedule s{1.0, 0.1, 4, 14};
  EXPECT_DOUBLE_EQ(s.At(1), 0.25);
  EXPECT_DOUBLE_EQ(s.At(4), 1.0);
  EXPECT_NEAR(s.At(9), 0.1 + 0.45, 1e-12);  // halfway through the decay
  EXPECT_DOUBLE_EQ(s.At(14), 0.1);
  EXPECT_DOUBLE_EQ(s.At(20), 0.1);
  EXPECT_GT(s.At(5), s.At(6));
  LrSchedule no_warmup{2.0, 0.0, 0, 10};
  EXPECT_NEAR(no_warmup.At(1), 0.5 * 2.0 * (1 + std::cos(M_PI * 0.1)), 1e-12);
}

struct Setup {
  std::unique_ptr<Backend> backend = MakeCpuBackend(nullptr);
  std::unique_ptr<BatchSource> source;
  std::unique_ptr<Trainer> trainer;
};

Result<std::unique_ptr<Setup>> Make(const ModelConfig& mc, const TrainConfig& tc) {
  auto s = std::make_unique<Setup>();
  SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  sc.classification = mc.loss == LossKind::kCrossEntropy;
  HPCML_ASSIGN_OR_RETURN(s->source, MakeSyntheticSource(sc, tc.global_batch, 0, 1));
  HPCML_ASSIGN_OR_RETURN(s->trainer,
                         Trainer::Create(tc, mc, nullptr, s->backend.get(), s->source.get()));
  return s;
}

ModelConfig SmallModel() {
  ModelConfig mc;
  mc.input_dim = 6;
  mc.hidden = {8, 8};
  mc.output_dim = 3;
  mc.seed = 3;
  return mc;
}

TEST(Trainer, RejectsBatchesThatDoNotSplit) {
  TrainConfig tc;
  tc.global_batch = 10;
  tc.microbatches = 4;
  auto s = Make(SmallModel(), tc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--microbatches 4"), std::string::npos)
      << s.status().message();
  tc.microbatches = 0;
  EXPECT_FALSE(Make(SmallModel(), tc).ok());
}

TEST(Trainer, RejectsDataThatDoesNotFitTheModel) {
  ModelConfig mc = SmallModel();
  TrainConfig tc;
  auto be = MakeCpuBackend(nullptr);
  SyntheticConfig sc;
  sc.features = 5;  // model expects 6
  sc.outputs = 3;
  auto src = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
  ASSERT_TRUE(src.ok());
  auto t = Trainer::Create(tc, mc, nullptr, be.get(), src->get());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("5 features"), std::string::npos);
  mc.loss = LossKind::kMse;  // classification labels for a regression model
  mc.input_dim = 5;
  EXPECT_FALSE(Trainer::Create(tc, mc, nullptr, be.get(), src->get()).ok());
}

TEST(Trainer, LossGoesDownOnTheTeacherTask) {
  TrainConfig tc;
  tc.global_batch = 32;
  tc.microbatches = 2;
  tc.lr = {1e-2, 1e-3, 5, 60};
  tc.clip = 1.0f;
  auto s = Make(SmallModel(), tc);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  double first = 0, last = 0;
  ASSERT_TRUE((*s)->trainer
                  ->Run(60,
                        [&](const StepStats& st) {
                          if (st.step <= 5) first += st.loss / 5;
                          if (st.step > 55) last += st.loss / 5;
                          EXPECT_GT(st.samples_per_s, 0.0);
                          return Trainer::AfterStep::kContinue;
                        })
                  .ok());
  EXPECT_EQ((*s)->trainer->step(), 60);
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

// The CPU backend dressed as a device backend (host_memory() false), so the
// trainer reads ahead as it does on a GPU. Its uploads land only at
// WaitUploads, copied from the host memory as it is then: a trainer that
// used a batch before waiting for it, or let the reader refill a slot whose
// upload was still pending, would train on other data than the plain run.
class StagedBackend final : public Backend {
 public:
  StagedBackend() : b_(MakeCpuBackend(nullptr)) {}
  std::string_view name() const override { return "staged cpu"; }
  Buffer Alloc(std::size_t n) override {
    Buffer inner = b_->Alloc(n);
    float* p = inner.data();
    owned_.push_back(std::move(inner));
    return Buffer(this, p, n);
  }
  void Free(float* p) noexcept override {
    std::erase_if(owned_, [p](const Buffer& b) { return b.data() == p; });
  }
  void ToDevice(float* d, const float* h, std::size_t n) override { b_->ToDevice(d, h, n); }
  void ToHost(float* h, const float* s, std::size_t n) override { b_->ToHost(h, s, n); }
  void Copy(float* d, const float* s, std::size_t n) override { b_->Copy(d, s, n); }
  void Fill(float* x, std::size_t n, float v) override { b_->Fill(x, n, v); }
  Status UploadAsync(float* dst, const float* host, std::size_t n) override {
    pending_.push_back({dst, host, n});
    ++uploads_;
    return Status::Ok();
  }
  void WaitUploads() override {
    for (const Upload& u : pending_) std::copy(u.host, u.host + u.n, u.dst);
    pending_.clear();
  }
  int uploads() const { return uploads_; }
  void Gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    b_->Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void AddBias(float* y, const float* bias, std::int64_t r, std::int64_t c) override {
    b_->AddBias(y, bias, r, c);
  }
  void BiasGrad(const float* dy, std::int64_t r, std::int64_t c, float* db) override {
    b_->BiasGrad(dy, r, c, db);
  }
  void ActForward(Activation a, const float* pre, float* out, std::size_t n) override {
    b_->ActForward(a, pre, out, n);
  }
  void ActBackward(Activation a, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    b_->ActBackward(a, pre, dout, dpre, n);
  }
  void AddBiasAct(Activation a, float* z, const float* bias, float* out, std::int64_t r,
                  std::int64_t c) override {
    b_->AddBiasAct(a, z, bias, out, r, c);
  }
  void DenseForward(const float* x, const float* w, const float* bias, std::int64_t rows,
                    std::int64_t in, std::int64_t out, Activation act, float* z,
                    float* a) override {
    b_->DenseForward(x, w, bias, rows, in, out, act, z, a);
  }
  void ActBackwardBiasGrad(Activation a, const float* pre, const float* dout, float* dpre,
                           std::int64_t r, std::int64_t c, float* db) override {
    b_->ActBackwardBiasGrad(a, pre, dout, dpre, r, c, db);
  }
  double LossAndGrad(LossKind l, const float* logits, const float* t, std::int64_t r,
                     std::int64_t c, float scale, float* dl, const float* w) override {
    return b_->LossAndGrad(l, logits, t, r, c, scale, dl, w);
  }
  void EmbedLookup(const float* t, std::int64_t d, float* x, std::int64_t s, std::int64_t r,
                   float* codes) override {
    b_->EmbedLookup(t, d, x, s, r, codes);
  }
  void EmbedGrad(const float* dx, std::int64_t s, const float* codes, std::int64_t r,
                 std::int64_t d, float* dt) override {
    b_->EmbedGrad(dx, s, codes, r, d, dt);
  }
  double SumSquares(const float* x, std::size_t n) override { return b_->SumSquares(x, n); }
  void AdamW(float* p, const float* g, float* m, float* v, std::size_t n,
             const AdamWStep& st) override {
    b_->AdamW(p, g, m, v, n, st);
  }
  void Allreduce(float* x, std::size_t n, Group g) override { b_->Allreduce(x, n, g); }
  void StartAllreduce(float* x, std::size_t n, Group g) override { b_->StartAllreduce(x, n, g); }
  void WaitAllreduces() override { b_->WaitAllreduces(); }
  void AllreduceHost(double* x, std::size_t n, Group g) override { b_->AllreduceHost(x, n, g); }
  void ReduceScatter(const float* x, float* shard, const std::vector<std::size_t>& c,
                     Group g) override {
    b_->ReduceScatter(x, shard, c, g);
  }
  void AllGather(float* x, const std::vector<std::size_t>& c, Group g) override {
    b_->AllGather(x, c, g);
  }
  void Send(const float* x, std::size_t n, int peer, int tag) override {
    b_->Send(x, n, peer, tag);
  }
  void Recv(float* x, std::size_t n, int peer, int tag) override { b_->Recv(x, n, peer, tag); }
  void WaitSends() override { b_->WaitSends(); }
  void Synchronize() override {}

 private:
  struct Upload {
    float* dst;
    const float* host;
    std::size_t n;
  };
  std::unique_ptr<Backend> b_;
  std::vector<Buffer> owned_;
  std::vector<Upload> pending_;
  int uploads_ = 0;
};

struct TrainRun {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<BatchSource> source;
  std::unique_ptr<Trainer> trainer;
};

TrainRun MakeRun(std::unique_ptr<Backend> backend, const TrainConfig& tc, const ModelConfig& mc) {
  TrainRun r;
  r.backend = std::move(backend);
  SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  auto src = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
  EXPECT_TRUE(src.ok());
  if (!src.ok()) return r;
  r.source = std::move(*src);
  auto t = Trainer::Create(tc, mc, nullptr, r.backend.get(), r.source.get());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (t.ok()) r.trainer = std::move(*t);
  return r;
}

std::vector<double> Losses(Trainer& t, int steps) {
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    auto st = t.Step();
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) break;
    out.push_back(st->loss);
  }
  return out;
}

// Reading ahead changes nothing the model sees: the staged run's losses are
// bitwise the plain run's, its position after each step is the plain
// source's (the batch read ahead not counted), and a restore to an earlier
// position drops the batch read ahead and replays the same batches.
TEST(Trainer, ReadingAheadTrainsOnTheSameBatchesAndKeepsThePosition) {
  TrainConfig tc;
  tc.global_batch = 32;
  tc.microbatches = 2;
  tc.lr = {1e-2, 1e-3, 2, 20};
  tc.clip = 0.5f;
  ModelConfig mc = SmallModel();
  mc.activation = Activation::kGelu;
  TrainRun plain = MakeRun(MakeCpuBackend(nullptr), tc, mc);
  TrainRun staged = MakeRun(std::make_unique<StagedBackend>(), tc, mc);
  ASSERT_TRUE(plain.trainer && staged.trainer);
  const std::string start = staged.trainer->SourcePosition();
  const std::vector<double> a = Losses(*plain.trainer, 6), b = Losses(*staged.trainer, 6);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_EQ(staged.trainer->SourcePosition(), plain.source->SavePosition());
  // Features and labels of six batches went through the read-ahead path.
  EXPECT_GE(static_cast<StagedBackend&>(*staged.backend).uploads(), 12);

  // Back to the start: the next steps see batches 1.. again, as a fresh
  // plain trainer with the staged one's weights would.
  ASSERT_TRUE(staged.trainer->RestoreSourcePosition(start).ok());
  EXPECT_EQ(staged.trainer->SourcePosition(), start);
  ASSERT_TRUE(plain.source->RestorePosition(start).ok());
  const std::vector<double> c = Losses(*plain.trainer, 3), d = Losses(*staged.trainer, 3);
  ASSERT_EQ(c.size(), 3u);
  ASSERT_EQ(d.size(), 3u);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], d[i]) << "step " << i + 7;
}

TEST(Trainer, HookStopsTheLoop) {
  auto s = Make(SmallModel(), TrainConfig{});
  ASSERT_TRUE(s.ok());
  Status st = (*s)->trainer->Run(10, [](const StepStats& x) {
    return x.step == 3 ? Trainer::AfterStep::kStop : Trainer::AfterStep::kContinue;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();  // stopping as asked is no error
  EXPECT_EQ((*s)->trainer->step(), 3);
}

TEST(Trainer, HookErrorEndsTheLoopWithIt) {
  auto s = Make(SmallModel(), TrainConfig{});
  ASSERT_TRUE(s.ok());
  Status st = (*s)->trainer->Run(10, [](const StepStats& x) -> Result<Trainer::AfterStep> {
    if (x.step == 4) return FailedPrecondition("broken at {}", x.step);
    return Trainer::AfterStep::kContinue;
  });
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->trainer->step(), 4);
}

struct RefCase {
  const char* activation;
  const char* loss;
};

class NumpyReferenceTest : public ::testing::TestWithParam<RefCase> {};

// The trainer's losses over several steps (clipping active, warm-up and
// cosine decay, weight decay, two microbatches) against numpy in float64.
TEST_P(NumpyReferenceTest, LossesMatchIndependentReference) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 missing";
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-numpy missing";
  }
  ModelConfig mc;
  mc.input_dim = 5;
  mc.hidden = {7, 4};
  mc.output_dim = 3;
  mc.seed = 17;
  mc.activation = *ParseActivation(GetParam().activation);
  mc.loss = *ParseLoss(GetParam().loss);
  TrainConfig tc;
  tc.global_batch = 8;
  tc.microbatches = 2;
  tc.lr = {0.05, 0.005, 2, 6};
  tc.weight_decay = 0.1f;
  tc.clip = 0.3f;
  const int steps = 6;

  auto s = Make(mc, tc);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Trainer& t = *(*s)->trainer;
  nlohmann::json j;
  auto init = GatherModel(t.model(), nullptr, *(*s)->backend, WhichTensor::kParams);
  ASSERT_TRUE(init.ok());
  for (const FullTensor& ft : *init) {
    if (ft.shape.size() == 2) {
      nlohmann::json w = nlohmann::json::array();
      for (std::int64_t r = 0; r < ft.shape[0]; ++r) {
        w.push_back(std::vector<float>(ft.data.begin() + r * ft.shape[1],
                                       ft.data.begin() + (r + 1) * ft.shape[1]));
      }
      j["weights"].push_back(w);
    } else {
      j["biases"].push_back(ft.data);
    }
  }
  // The same batches, from a second source with the same seed.
  SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  sc.classification = mc.loss == LossKind::kCrossEntropy;
  auto twin = MakeSyntheticSource(sc, tc.global_batch, 0, 1);
  ASSERT_TRUE(twin.ok());
  for (int i = 0; i < steps; ++i) {
    std::vector<float> x(static_cast<size_t>(tc.global_batch * mc.input_dim));
    std::vector<float> y(static_cast<size_t>(tc.global_batch * (*twin)->target_dim()));
    ASSERT_TRUE((*twin)->Next(tc.global_batch, x.data(), y.data()).ok());
    nlohmann::json xb = nlohmann::json::array();
    for (std::int64_t r = 0; r < tc.global_batch; ++r) {
      xb.push_back(
          std::vector<float>(x.begin() + r * mc.input_dim, x.begin() + (r + 1) * mc.input_dim));
    }
    j["batches"].push_back({{"x", xb}, {"t", y}});
  }
  j["activation"] = GetParam().activation;
  j["loss"] = GetParam().loss;
  j["lr"] = tc.lr.peak;
  j["min_lr"] = tc.lr.min;
  j["warmup"] = tc.lr.warmup;
  j["total"] = tc.lr.total;
  j["weight_decay"] = tc.weight_decay;
  j["clip"] = tc.clip;
  j["beta1"] = tc.beta1;
  j["beta2"] = tc.beta2;
  j["eps"] = tc.eps;

  std::vector<double> ours;
  std::vector<double> norms;
  for (int i = 0; i < steps; ++i) {
    auto st = t.Step();
    ASSERT_TRUE(st.ok());
    ours.push_back(st->loss);
    norms.push_back(st->grad_norm);
  }
  // Clipping must have been active at least once, or this would not test it.
  EXPECT_GT(*std::max_element(norms.begin(), norms.end()), static_cast<double>(tc.clip));

  const auto base =
      std::filesystem::temp_directory_path() / ("hpcml_numpy_ref_" + std::to_string(getpid()));
  const std::string in = base.string() + ".json", out = base.string() + ".out";
  std::ofstream(in) << j.dump();
  const std::string cmd =
      std::string("/usr/bin/python3 ") + HPCML_NUMPY_REFERENCE + " " + in + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream res(out);
  auto ref = nlohmann::json::parse(res).get<std::vector<double>>();
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  ASSERT_EQ(ref.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_NEAR(ours[i], ref[i], 1e-4 * std::abs(ref[i])) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, NumpyReferenceTest,
                         ::testing::Values(RefCase{"gelu", "ce"}, RefCase{"tanh", "mse"},
                                           RefCase{"relu", "ce"}),
                         [](const ::testing::TestParamInfo<RefCase>& i) {
                           return std::string(i.param.activation) + "_" + i.param.loss;
                         });

}  // namespace
}  // namespace hpcml::trainer
