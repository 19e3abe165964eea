// trainer_bench: ratios for hpcml-train's CPU path, each against a baseline
// measured in the same run.
//
//   step    (1 rank)  training-step model FLOP/s / the machine's peak: the
//                     best GEMM rate of oneDNN and OpenBLAS on the step's
//                     shapes, same threads (trainer_bench step --help-less
//                     options: --input --hidden --outputs --batch --threads)
//   naive   (1 rank)  samples/s / a straightforward single-process
//                     implementation
//   bubble  (p ranks) measured bubble / (p-1)/(m+p-1), GPipe and 1F1B
//   dp      (2 ranks) samples/s at dp=2 / (2 x samples/s of one rank alone)
//   cuda    (1 rank)  the CUDA backend: samples/s, model FLOP/s and MFU of a
//                     training step (against the dense bf16 peak from the
//                     GPU's SM count and clock), the step's time against its
//                     GEMMs alone (cuBLAS, same shapes), and cuBLAS's own
//                     best bf16 rate measured in the run. Exits 77 on a
//                     machine without a GPU (the rule of cuda::CountDevices).
//
// The model is stated on every line: input 256, hidden 1024,1024,1024,
// 16 classes, relu, batch 256 (bubble: input 8, 2p hidden layers and an
// output of 512, MSE, 64 rows per microbatch; see Bubble()). cuda: input
// 1024, hidden 8192 x 4, 1024 classes, relu, batch 8192 unless given
// (trainer_bench cuda [--input N] [--hidden W,W,...] [--outputs N]
// [--batch B] [--steps S] [--peak-tflops P]).
#include <cblas.h>
#include <dnnl.h>
#include <mpi.h>
#ifdef HPCML_TRAINER_CUDA
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "../../mpi_trainer/trainer/cuda/kernels.cuh"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../common/gemm_peak.hpp"
#include "hpcml/topology/planner.hpp"
#include "hpcml/trainer/random.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace ht = hpcml::trainer;
using hpcml::bench::CpuPeak;
using hpcml::bench::MeasureCpuPeak;
using hpcml::bench::Now;
using hpcml::bench::Shape;
using Clock = std::chrono::steady_clock;

namespace {

int g_rank = 0;

// A ReLU MLP with cross-entropy loss.
ht::ModelConfig Mlp(std::int64_t input, std::vector<std::int64_t> hidden, std::int64_t outputs) {
  ht::ModelConfig mc;
  mc.input_dim = input;
  mc.hidden = std::move(hidden);
  mc.output_dim = outputs;
  mc.activation = ht::Activation::kRelu;
  return mc;
}

ht::ModelConfig BenchModel() {
  return Mlp(256, {1024, 1024, 1024}, 16);
}

// Forward 2, backward 4 (weight and input gradients) per weight, except
// that the first layer has no input gradient (nothing consumes it: the
// trainer skips that product, so the baseline must too).
double ModelFlopsPerSample(const ht::ModelConfig& mc) {
  double f = 0;
  for (int l = 0; l < mc.num_layers(); ++l) {
    f += (l == 0 ? 4.0 : 6.0) * static_cast<double>(mc.in_dim(l)) *
         static_cast<double>(mc.out_dim(l));
  }
  return f;
}

// Mean step time of `steps` steps after `warm` warm-up steps.
double TimeSteps(ht::Trainer& t, int warm, int steps, double* bubble = nullptr) {
  for (int i = 0; i < warm; ++i) (void)t.Step();
  double sum = 0, bsum = 0;
  for (int i = 0; i < steps; ++i) {
    auto st = t.Step();
    if (!st.ok()) {
      std::fprintf(stderr, "trainer_bench: %s\n", st.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sum += st->step_time_s;
    bsum += st->bubble;
  }
  if (bubble) *bubble = bsum / steps;
  return sum / steps;
}

struct Run {
  std::unique_ptr<ht::Backend> backend;
  std::unique_ptr<ht::BatchSource> source;
  std::unique_ptr<ht::Trainer> trainer;
};

Run Make(const ht::ModelConfig& mc, const ht::TrainConfig& tc, const ht::ProcessGrid* grid,
         const ht::CpuOptions& co = {}) {
  Run r;
  r.backend = ht::MakeCpuBackend(grid, co);
  ht::SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  sc.classification = mc.loss == ht::LossKind::kCrossEntropy;
  sc.samples = 4096;
  auto src = ht::MakeSyntheticSource(sc, tc.global_batch, grid ? grid->dp_idx() : 0,
                                     grid ? grid->shape().dp : 1);
  r.source = std::move(src).value();
  auto t = ht::Trainer::Create(tc, mc, grid, r.backend.get(), r.source.get());
  if (!t.ok()) {
    std::fprintf(stderr, "trainer_bench: %s\n", t.status().ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  r.trainer = std::move(t).value();
  return r;
}

// The step's GEMMs in order: per layer the forward (NT), the weight gradient
// (TN) and the input gradient (NN; not for the first layer, as the trainer).
std::vector<Shape> StepShapes(const ht::ModelConfig& mc, std::int64_t b) {
  std::vector<Shape> out;
  for (int l = 0; l < mc.num_layers(); ++l) {
    const std::int64_t in = mc.in_dim(l), o = mc.out_dim(l);
    out.push_back({false, true, b, o, in});
    out.push_back({true, false, o, in, b});
    if (l > 0) out.push_back({false, false, b, in, o});
  }
  return out;
}

// The machine's peak on the step's shapes (bench/common/gemm_peak.hpp).
CpuPeak MeasurePeak(const ht::ModelConfig& mc, std::int64_t b, ht::Backend& onednn) {
  return MeasureCpuPeak(StepShapes(mc, b), onednn);
}

// The step's GEMMs alone, in step order on separate buffers (as cold or warm
// as the step finds them), through the backend.
double TimeGemmsOnly(const ht::ModelConfig& mc, std::int64_t b, ht::Backend& be, int reps) {
  const std::vector<Shape> shapes = StepShapes(mc, b);
  std::vector<std::vector<float>> a, bb, c;
  for (const Shape& s : shapes) {
    a.emplace_back(static_cast<size_t>(s.m * s.k), 0.5f);
    bb.emplace_back(static_cast<size_t>(s.k * s.n), 0.25f);
    c.emplace_back(static_cast<size_t>(s.m * s.n), 0.0f);
  }
  auto once = [&] {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      be.Gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a[i].data(), s.ta ? s.m : s.k, bb[i].data(),
              s.tb ? s.k : s.n, 0.0f, c[i].data(), s.n);
    }
  };
  once();
  const double t0 = Now();
  for (int i = 0; i < reps; ++i) once();
  return (Now() - t0) / reps;
}

std::string ModelText(const ht::ModelConfig& mc) {
  std::string s = std::to_string(mc.input_dim);
  for (std::int64_t h : mc.hidden) s += "-" + std::to_string(h);
  return s + "-" + std::to_string(mc.output_dim);
}

// Parses "--input N --hidden W,W --outputs N --batch B" after the mode and
// the numeric options in `extra`; false, with a message naming the option,
// on anything else.
bool ParseBenchArgs(int argc, char** argv, const char* mode, ht::ModelConfig* mc,
                    std::int64_t* batch,
                    const std::vector<std::pair<std::string, double*>>& extra) {
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "trainer_bench %s: %s needs a value\n", mode, k.c_str());
      return false;
    }
    const std::string v = argv[i + 1];
    if (k == "--input") {
      mc->input_dim = std::stoll(v);
    } else if (k == "--hidden") {
      auto widths = hpcml::topology::ParseWidths(v, "--hidden");
      if (!widths.ok()) {
        std::fprintf(stderr, "trainer_bench %s: %s\n", mode, widths.status().message().c_str());
        return false;
      }
      mc->hidden = *widths;
    } else if (k == "--outputs") {
      mc->output_dim = std::stoll(v);
    } else if (k == "--batch") {
      *batch = std::stoll(v);
    } else {
      auto it =
          std::find_if(extra.begin(), extra.end(), [&](const auto& e) { return e.first == k; });
      if (it == extra.end()) {
        std::fprintf(stderr, "trainer_bench %s: unknown option %s\n", mode, k.c_str());
        return false;
      }
      *it->second = std::stod(v);
    }
  }
  return true;
}

// trainer_bench step [--input N] [--hidden W,W] [--outputs N] [--batch B]
// [--threads T]: the training step's model FLOP/s against the machine's
// peak on the step's shapes (MeasurePeak), same threads, same process
// (run.sh pins it to T cores).
int StepBench(int argc, char** argv) {
  ht::ModelConfig mc = Mlp(64, {1024, 1024, 1024, 1024}, 2);
  ht::TrainConfig tc;
  tc.global_batch = 512;
  tc.clip = 1.0f;  // hpcml-train's default, and the PyTorch peer's
  double threads = 1;
  if (!ParseBenchArgs(argc, argv, "step", &mc, &tc.global_batch, {{"--threads", &threads}})) {
    return 2;
  }
  const ht::CpuOptions co{ht::GemmLibrary::kOneDnn, static_cast<int>(threads)};
  Run r = Make(mc, tc, nullptr, co);
  auto gemm_backend = ht::MakeCpuBackend(nullptr, co);
  const double first = TimeSteps(*r.trainer, 3, 1);
  // Interleaved rounds of about half a second, best of each: other load on
  // the machine hits both alike.
  const int per_round = std::max(2, static_cast<int>(0.5 / std::max(first, 1e-4)));
  double step = 1e30, gemm = 1e30;
  for (int round = 0; round < 5; ++round) {
    step = std::min(step, TimeSteps(*r.trainer, 0, per_round));
    gemm = std::min(gemm, TimeGemmsOnly(mc, tc.global_batch, *gemm_backend, per_round));
  }
  const CpuPeak peak = MeasurePeak(mc, tc.global_batch, *gemm_backend);
  const double flops = ModelFlopsPerSample(mc) * static_cast<double>(tc.global_batch);
  const double model = flops / step * 1e-9;
  std::printf(
      "step: MLP %s relu, batch %lld, AdamW, clip 1, %d thread(s): model %.1f GFLOP/s; peak "
      "%.1f GFLOP/s (%s); fraction of peak %.3f; the step's GEMMs alone %.3f of peak; hpcml "
      "samples/s %.0f\n",
      ModelText(mc).c_str(), static_cast<long long>(tc.global_batch), co.threads, model,
      peak.gflops, peak.where.c_str(), model / peak.gflops, flops / gemm * 1e-9 / peak.gflops,
      static_cast<double>(tc.global_batch) / step);
  return 0;
}

// A straightforward single-process implementation of the same math: plain
// vectors, cblas for the products, loops for the rest, Adam without extras.
struct Naive {
  ht::ModelConfig mc;
  std::int64_t b;
  std::vector<std::vector<float>> w, bias, gw, gb, m, v, z, a;
  std::vector<float> x, labels;
  int step = 0;
  explicit Naive(const ht::ModelConfig& c, std::int64_t batch) : mc(c), b(batch) {
    for (int l = 0; l < mc.num_layers(); ++l) {
      const auto n = static_cast<size_t>(mc.in_dim(l) * mc.out_dim(l));
      std::vector<float> wl(n);
      for (size_t i = 0; i < n; ++i) {
        wl[i] = static_cast<float>(ht::GaussianAt(static_cast<std::uint64_t>(l), i) /
                                   std::sqrt(static_cast<double>(mc.in_dim(l))));
      }
      w.push_back(wl);
      gw.emplace_back(n);
      m.emplace_back(n + static_cast<size_t>(mc.out_dim(l)));
      v.emplace_back(n + static_cast<size_t>(mc.out_dim(l)));
      bias.emplace_back(static_cast<size_t>(mc.out_dim(l)));
      gb.emplace_back(static_cast<size_t>(mc.out_dim(l)));
      z.emplace_back(static_cast<size_t>(b * mc.out_dim(l)));
      a.emplace_back(static_cast<size_t>(b * mc.out_dim(l)));
    }
    x.resize(static_cast<size_t>(b * mc.input_dim));
    labels.resize(static_cast<size_t>(b));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(ht::GaussianAt(99, i));
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>(i % 16);
  }
  void Step() {
    const int L = mc.num_layers();
    const int bb = static_cast<int>(b);
    const float* in = x.data();
    for (int l = 0; l < L; ++l) {
      const int ni = static_cast<int>(mc.in_dim(l)), no = static_cast<int>(mc.out_dim(l));
      auto& zl = z[static_cast<size_t>(l)];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bb, no, ni, 1.0f, in, ni,
                  w[static_cast<size_t>(l)].data(), ni, 0.0f, zl.data(), no);
      for (int r = 0; r < bb; ++r)
        for (int c = 0; c < no; ++c)
          zl[static_cast<size_t>(r * no + c)] +=
              bias[static_cast<size_t>(l)][static_cast<size_t>(c)];
      auto& al = a[static_cast<size_t>(l)];
      for (size_t i = 0; i < zl.size(); ++i) al[i] = l < L - 1 ? std::max(zl[i], 0.0f) : zl[i];
      in = al.data();
    }
    const int k = static_cast<int>(mc.output_dim);
    std::vector<float> g(static_cast<size_t>(bb * k));
    for (int r = 0; r < bb; ++r) {
      const float* zr = a.back().data() + r * k;
      float mx = *std::max_element(zr, zr + k);
      double s = 0;
      for (int c = 0; c < k; ++c) s += std::exp(zr[c] - mx);
      for (int c = 0; c < k; ++c) {
        g[static_cast<size_t>(r * k + c)] = static_cast<float>(
            (std::exp(zr[c] - mx) / s -
             (c == static_cast<int>(labels[static_cast<size_t>(r)]) ? 1.0 : 0.0)) /
            bb);
      }
    }
    for (int l = L - 1; l >= 0; --l) {
      const int ni = static_cast<int>(mc.in_dim(l)), no = static_cast<int>(mc.out_dim(l));
      if (l < L - 1) {
        for (size_t i = 0; i < g.size(); ++i)
          if (z[static_cast<size_t>(l)][i] <= 0.0f) g[i] = 0.0f;
      }
      const float* xin = l == 0 ? x.data() : a[static_cast<size_t>(l - 1)].data();
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, no, ni, bb, 1.0f, g.data(), no, xin, ni,
                  0.0f, gw[static_cast<size_t>(l)].data(), ni);
      std::fill(gb[static_cast<size_t>(l)].begin(), gb[static_cast<size_t>(l)].end(), 0.0f);
      for (int r = 0; r < bb; ++r)
        for (int c = 0; c < no; ++c)
          gb[static_cast<size_t>(l)][static_cast<size_t>(c)] += g[static_cast<size_t>(r * no + c)];
      if (l > 0) {
        std::vector<float> dx(static_cast<size_t>(bb * ni));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bb, ni, no, 1.0f, g.data(), no,
                    w[static_cast<size_t>(l)].data(), ni, 0.0f, dx.data(), ni);
        g.swap(dx);
      }
    }
    ++step;
    for (int l = 0; l < L; ++l) {
      auto upd = [&](std::vector<float>& p, std::vector<float>& gr, size_t off) {
        for (size_t i = 0; i < p.size(); ++i) {
          float& mm = m[static_cast<size_t>(l)][off + i];
          float& vv = v[static_cast<size_t>(l)][off + i];
          mm = 0.9f * mm + 0.1f * gr[i];
          vv = 0.999f * vv + 0.001f * gr[i] * gr[i];
          const float mh = mm / (1.0f - std::pow(0.9f, static_cast<float>(step)));
          const float vh = vv / (1.0f - std::pow(0.999f, static_cast<float>(step)));
          p[i] -= 1e-3f * mh / (std::sqrt(vh) + 1e-8f);
        }
      };
      upd(w[static_cast<size_t>(l)], gw[static_cast<size_t>(l)], 0);
      upd(bias[static_cast<size_t>(l)], gb[static_cast<size_t>(l)],
          w[static_cast<size_t>(l)].size());
    }
  }
};

void NaiveCompare() {
  const ht::ModelConfig mc = BenchModel();
  ht::TrainConfig tc;
  tc.global_batch = 256;
  tc.clip = 0.0f;
  Run r = Make(mc, tc, nullptr);
  Naive n(mc, tc.global_batch);
  TimeSteps(*r.trainer, 3, 1);
  for (int i = 0; i < 3; ++i) n.Step();
  // Interleaved rounds, best of each: other load on the machine hits both alike.
  double ours = 1e30, naive = 1e30;
  for (int round = 0; round < 6; ++round) {
    ours = std::min(ours, TimeSteps(*r.trainer, 0, 4));
    const double t0 = Now();
    for (int i = 0; i < 4; ++i) n.Step();
    naive = std::min(naive, (Now() - t0) / 4);
  }
  std::printf(
      "naive: MLP 256-1024x3-16 relu, batch 256: hpcml-train %.0f samples/s, straightforward "
      "implementation %.0f samples/s, ratio %.3f\n",
      256 / ours, 256 / naive, naive / ours);
}

// The ideal (p-1)/(m+p-1) holds for stages with equal forward and equal
// backward times and free transfers. Equal layers do not give that: the
// first stage computes no input gradient for the model's first layer, and
// the last stage computes the loss. So the first layer is made tiny (input
// 8) and shares the first stage with two full layers; every other stage has
// two full layers; the loss is MSE (a softmax over 1024 outputs would
// lengthen the last stage). Layers are 1024 wide: a microbatch's transfer
// (64 rows x 4 KiB) is then about 1% of its compute. Busy times per stage
// are printed so any imbalance is visible.
void Bubble() {
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ht::ModelConfig mc;
  const std::int64_t w = 1024;
  mc.input_dim = 8;
  mc.hidden = std::vector<std::int64_t>(static_cast<size_t>(2 * n), w);
  mc.output_dim = w;
  mc.loss = ht::LossKind::kMse;
  auto grid = ht::ProcessGrid::Create(MPI_COMM_WORLD, ht::GridShape{1, n, 1});
  for (auto kind : {ht::ScheduleKind::kGpipe, ht::ScheduleKind::k1F1B}) {
    for (int m : {1, 2, 4, 8}) {
      ht::TrainConfig tc;
      tc.global_batch = 64 * m;
      tc.microbatches = m;
      tc.schedule = kind;
      Run r = Make(mc, tc, &*grid);
      for (int i = 0; i < 3; ++i) (void)r.trainer->Step();
      double bubble = 0, busy = 0;
      const int steps = 15;
      for (int i = 0; i < steps; ++i) {
        auto st = r.trainer->Step();
        if (!st.ok()) {
          std::fprintf(stderr, "trainer_bench: %s\n", st.status().ToString().c_str());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        bubble += st->bubble / steps;
        busy += st->busy_s / steps;
      }
      std::vector<double> busy_all(static_cast<size_t>(n));
      MPI_Gather(&busy, 1, MPI_DOUBLE, busy_all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      const double ideal = ht::IdealBubble(n, m);
      if (rank == 0) {
        std::string stages;
        for (double b : busy_all) stages += " " + std::to_string(b * 1e3).substr(0, 5);
        std::printf(
            "bubble: %s p=%d m=%d: measured %.3f ideal %.3f ratio %.3f (stage busy ms:%s)\n",
            std::string(ht::Name(kind)).c_str(), n, m, bubble, ideal, bubble / ideal,
            stages.c_str());
      }
    }
  }
}

void DataParallel() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const ht::ModelConfig mc = BenchModel();
  ht::TrainConfig tc;
  tc.global_batch = 128;
  // Baseline: every rank trains alone at the same time (one core each).
  Run alone = Make(mc, tc, nullptr);
  const double t1 = TimeSteps(*alone.trainer, 3, 15);
  double worst = t1;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  auto grid = ht::ProcessGrid::Create(MPI_COMM_WORLD, ht::GridShape{n, 1, 1});
  tc.global_batch = 128 * n;  // weak scaling: the same work per rank
  Run dp = Make(mc, tc, &*grid);
  const double tn = TimeSteps(*dp.trainer, 3, 15);
  if (g_rank == 0) {
    std::printf(
        "dp: MLP 256-1024x3-16, 128 samples per rank: 1 rank %.0f samples/s, %d ranks %.0f "
        "samples/s, efficiency %.3f\n",
        128 / worst, n, 128.0 * n / tn, (128.0 * n / tn) / (n * 128 / worst));
  }
}

#ifdef HPCML_TRAINER_CUDA
// Dense (no sparsity) bf16 tensor-core FLOPs per clock and SM, by compute
// capability: the figure NVIDIA's data sheets are made of (A100: 108 SMs x
// 1.41 GHz x 2048 = 312 TFLOP/s; H100 SXM: 132 x 1.83 GHz x 4096 = 989 at
// the clock the sheet uses). 0 where not known (then --peak-tflops).
double Bf16FlopsPerClockPerSm(int major, int minor) {
  if (major == 9 && minor == 0) return 4096.0;  // Hopper: H100, H200, GH200
  if (major == 8 && minor == 0) return 2048.0;  // A100, A30
  if (major == 8) return 1024.0;                // Ampere/Ada GA10x, AD10x (A10, L4, L40S)
  if (major == 10 || major == 12) return 0.0;   // Blackwell: varies by product
  return 0.0;
}

// The device's dense bf16 peak from its own SM count and peak SM clock
// (cudaDevAttrClockRate), in TFLOP/s; 0 when the architecture is not known.
double SmClockPeakTflops(int device, const cudaDeviceProp& prop, double* clock_ghz) {
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess) khz = 0;
  *clock_ghz = khz * 1e-6;
  return prop.multiProcessorCount * (khz * 1e3) * Bf16FlopsPerClockPerSm(prop.major, prop.minor) *
         1e-12;
}

// The GEMMs of one training step (forward, weight gradient, input gradient
// of every layer but the first) through the backend, on device buffers.
double TimeGpuGemms(ht::Backend& b, const ht::ModelConfig& mc, std::int64_t rows, int reps) {
  std::vector<ht::Buffer> w, x, y, dw, dx;
  for (int l = 0; l < mc.num_layers(); ++l) {
    const auto in = static_cast<std::size_t>(mc.in_dim(l));
    const auto out = static_cast<std::size_t>(mc.out_dim(l));
    const auto r = static_cast<std::size_t>(rows);
    for (auto [v, n] : {std::pair{&w, out * in}, std::pair{&x, r * in}, std::pair{&y, r * out},
                        std::pair{&dw, out * in}, std::pair{&dx, r * in}}) {
      v->push_back(b.Alloc(n));
      b.Fill(v->back().data(), n, 0.01f);  // not zero: a zero operand draws less power
    }
  }
  auto once = [&] {
    for (int l = 0; l < mc.num_layers(); ++l) {
      const auto i = static_cast<std::size_t>(l);
      const std::int64_t in = mc.in_dim(l), out = mc.out_dim(l);
      b.Gemm(false, true, rows, out, in, 1.0f, x[i].data(), in, w[i].data(), in, 0.0f, y[i].data(),
             out);
      b.Gemm(true, false, out, in, rows, 1.0f, y[i].data(), out, x[i].data(), in, 0.0f,
             dw[i].data(), in);
      if (l > 0) {
        b.Gemm(false, false, rows, in, out, 1.0f, y[i].data(), out, w[i].data(), in, 0.0f,
               dx[i].data(), in);
      }
    }
  };
  once();
  b.Synchronize();
  const double t0 = Now();
  for (int i = 0; i < reps; ++i) once();
  b.Synchronize();
  return (Now() - t0) / reps;
}

// The device's measured dense bf16 peak in TFLOP/s: cuBLAS's best case, a
// square 8192^3 GEMM with bf16 inputs and outputs, fp32 accumulation (the
// tensor-core path the backend's FAST_16BF GEMMs use), 20 timed calls after
// a warm-up. 0 if anything fails (the caller says so).
double MeasuredBf16PeakTflops() {
  constexpr int n = 8192, reps = 20;
  const std::size_t bytes = std::size_t{n} * n * 2;  // bf16
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cublasHandle_t h = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  double tflops = 0.0;
  if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
      cudaMalloc(&c, bytes) == cudaSuccess && cudaMemset(a, 0x3c, bytes) == cudaSuccess &&
      cudaMemset(b, 0x3c, bytes) == cudaSuccess && cublasCreate(&h) == CUBLAS_STATUS_SUCCESS &&
      cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
    const float one = 1.0f, zero = 0.0f;
    auto gemm = [&] {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                          CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    };
    bool ok = gemm() == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() == cudaSuccess;
    cudaEventRecord(e0);
    for (int i = 0; ok && i < reps; ++i) ok = gemm() == CUBLAS_STATUS_SUCCESS;
    cudaEventRecord(e1);
    float ms = 0.0f;
    if (ok && cudaEventSynchronize(e1) == cudaSuccess &&
        cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0.0f) {
      tflops = 2.0 * n * n * static_cast<double>(n) * reps / (ms * 1e-3) * 1e-12;
    }
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (h) cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return tflops;
}

int CudaBench(int argc, char** argv) {
  ht::ModelConfig mc = Mlp(1024, {8192, 8192, 8192, 8192}, 1024);
  std::int64_t batch = 8192;
  double steps_arg = 20, peak = 0.0;
  if (!ParseBenchArgs(argc, argv, "cuda", &mc, &batch,
                      {{"--steps", &steps_arg}, {"--peak-tflops", &peak}})) {
    return 2;
  }
  const int steps = static_cast<int>(steps_arg);
  const ht::cuda::DeviceCount dc = ht::cuda::CountDevices();
  if (dc.count == 0) {
    std::printf("cuda: %s: %s\n", dc.no_gpu ? "skipped: no GPU on this machine" : "error",
                dc.reason.c_str());
    return dc.no_gpu ? 77 : 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);  // the backend of a lone rank uses device 0
  std::string peak_source = "--peak-tflops";
  double clock_ghz = 0.0;
  const double sm_peak = SmClockPeakTflops(0, prop, &clock_ghz);
  if (peak <= 0.0 && sm_peak > 0.0) {
    peak = sm_peak;
    char what[160];
    std::snprintf(what, sizeof what, "SMs x clock: %d x %.3f GHz x %.0f dense bf16 FLOP/clock",
                  prop.multiProcessorCount, clock_ghz,
                  Bf16FlopsPerClockPerSm(prop.major, prop.minor));
    peak_source = what;
  }
  auto backend = ht::MakeCudaBackend(nullptr);
  if (!backend.ok()) {
    std::fprintf(stderr, "trainer_bench: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  ht::TrainConfig tc;
  tc.global_batch = batch;
  tc.clip = 1.0f;
  ht::SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  // One batch, repeated: the bench times the step, and each new synthetic
  // sample costs a host matrix-vector product (about 8 s a batch of this
  // size), which would only lengthen the warm-up.
  sc.samples = batch;
  auto src = ht::MakeSyntheticSource(sc, tc.global_batch, 0, 1);
  auto t = src.ok() ? ht::Trainer::Create(tc, mc, nullptr, backend->get(), src->get())
                    : hpcml::Result<std::unique_ptr<ht::Trainer>>(src.status());
  if (!t.ok()) {
    std::fprintf(stderr, "trainer_bench: %s\n", t.status().ToString().c_str());
    return 1;
  }
  for (int i = 0; i < 3; ++i) (void)(*t)->Step();  // warm-up
  // The timed steps are the profiler window (cudaProfilerStart/Stop: what a
  // timeline of this run looks at, bench/mpi_trainer/cuda_timeline.cpp);
  // each step ends synchronised, so the window holds all of their work.
  cudaProfilerStart();
  const double step = TimeSteps(**t, 0, steps);
  cudaProfilerStop();
  const double gemm = TimeGpuGemms(**backend, mc, batch, steps);
  if (!(*backend)->status().ok()) {
    std::fprintf(stderr, "trainer_bench: %s\n", (*backend)->status().ToString().c_str());
    return 1;
  }
  const double flops = ModelFlopsPerSample(mc) * static_cast<double>(batch);
  std::string dims = std::to_string(mc.input_dim);
  for (std::int64_t h : mc.hidden) dims += "-" + std::to_string(h);
  dims += "-" + std::to_string(mc.output_dim);
  std::printf(
      "cuda: MLP %s relu, batch %lld, %s (%d SMs): step %.2f ms, %.0f samples/s, model %.1f "
      "TFLOP/s",
      dims.c_str(), static_cast<long long>(batch), prop.name, prop.multiProcessorCount, step * 1e3,
      static_cast<double>(batch) / step, flops / step * 1e-12);
  if (peak > 0.0) {
    std::printf(", MFU %.3f (peak %.1f TFLOP/s (%s))", flops / step * 1e-12 / peak, peak,
                peak_source.c_str());
  } else {
    std::printf(", MFU n/a (compute capability %d.%d not known: pass --peak-tflops)", prop.major,
                prop.minor);
  }
  // The hardware, measured in this run with the best library here (cuBLAS).
  const double measured = MeasuredBf16PeakTflops();
  // A figure over the measured peak is a timing that missed work, not a
  // fast GEMM: it is flagged, not printed. (It once read 4.3 ms for 13 ms of
  // GEMM kernels: cuBLAS ran on the upload stream, which Synchronize did not
  // wait for.)
  if (measured > 0.0 && flops / gemm * 1e-12 > measured) {
    std::printf("; GEMMs alone %.2f ms: faster than the measured peak allows, not a valid figure\n",
                gemm * 1e3);
  } else {
    std::printf("; GEMMs alone %.2f ms = %.1f TFLOP/s; ratio %.3f\n", gemm * 1e3,
                flops / gemm * 1e-12, gemm / step);
  }
  if (measured > 0.0) {
    std::printf("cuda: measured peak %.1f TFLOP/s (cuBLAS bf16 8192^3); model FLOP/s %.3f of it\n",
                measured, flops / step * 1e-12 / measured);
  } else {
    std::printf("cuda: measured peak: the cuBLAS bf16 GEMM failed\n");
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const std::string what = argc > 1 ? argv[1] : "";
  int rc = 0;
  if (what == "step") {
    rc = StepBench(argc, argv);
  } else if (what == "naive") {
    NaiveCompare();
  } else if (what == "bubble") {
    Bubble();
  } else if (what == "dp") {
    DataParallel();
  } else if (what == "cuda") {
#ifdef HPCML_TRAINER_CUDA
    rc = CudaBench(argc, argv);
#else
    std::fprintf(stderr, "trainer_bench: cuda: this build has no CUDA backend\n");
    rc = 1;
#endif
  } else if (g_rank == 0) {
    std::fprintf(stderr, "usage: trainer_bench step|naive|bubble|dp|cuda [cuda options]\n");
  }
  MPI_Finalize();
  return rc;
}
