// infer_bench: the C++ side of bench/inference/run.sh (which prints the
// ratios against ONNX Runtime, measured in the same run).
//
//   infer_bench models DIR       writes DIR/small.h5 (32 -> 64 -> 64 -> 2) and
//                                DIR/wide.h5 (256 -> 4096 x 3 -> 16), seeded
//                                random weights, relu, cross-entropy
//   infer_bench run MODEL --batch B --threads T [--seconds S]
//                                hpcml's engine on one fixed batch of B rows,
//                                called repeatedly for S seconds (at least 3
//                                calls): rows/s and per-call p50/p99
//   infer_bench run ... --precision int8
//                                the same with int8 weights and activations
//   infer_bench int8-error MODEL the int8 engine against float32 on 4096
//                                random rows: max and mean |p - p_fp32|, and
//                                the share of rows with the same class
//   infer_bench peak --threads T the machine's GEMM peak (oneDNN, dnnl_sgemm,
//                                OpenBLAS) on the wide model's forward GEMMs
//                                at batch 4096, T threads
//
// Output lines are "key=value ..." for run.sh to read.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../common/gemm_peak.hpp"
#include "hpcml/inference/engine.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace {

namespace ht = hpcml::trainer;
using hpcml::bench::Now;

ht::ModelConfig Config(const std::string& name) {
  ht::ModelConfig c;
  if (name == "small") {
    c.input_dim = 32;
    c.hidden = {64, 64};
    c.output_dim = 2;
  } else {
    c.input_dim = 256;
    c.hidden = {4096, 4096, 4096};
    c.output_dim = 16;
  }
  return c;
}

int WriteModels(const std::string& dir) {
  for (const std::string name : {"small", "wide"}) {
    const ht::ModelConfig c = Config(name);
    std::mt19937 gen(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<ht::FullTensor> t;
    for (int l = 0; l < c.num_layers(); ++l) {
      const std::int64_t in = c.in_dim(l), out = c.out_dim(l);
      ht::FullTensor w{"layer" + std::to_string(l) + ".weight", {out, in}, {}};
      ht::FullTensor b{"layer" + std::to_string(l) + ".bias", {out}, {}};
      w.data.resize(static_cast<size_t>(out * in));
      for (float& v : w.data) v = nd(gen) / std::sqrt(static_cast<float>(in));
      b.data.assign(static_cast<size_t>(out), 0.01f);
      t.push_back(std::move(w));
      t.push_back(std::move(b));
    }
    const std::string path = dir + "/" + name + ".h5";
    hpcml::Status s = ht::SaveModelFile(path, c, t, ht::ModelLineage{});
    if (!s.ok()) {
      std::fprintf(stderr, "infer_bench: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("model=%s path=%s\n", name.c_str(), path.c_str());
  }
  return 0;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

using hpcml::inference::Engine;
using hpcml::inference::Precision;

std::unique_ptr<Engine> MakeEngine(const ht::ModelFile& m, int threads, std::int64_t batch,
                                   Precision precision) {
  auto e = Engine::Create(m, {threads, std::max<std::int64_t>(batch, 1), precision});
  if (!e.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n", e.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

ht::ModelFile Load(const std::string& path) {
  auto m = ht::LoadModelFile(path);
  if (!m.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n", m.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(m).value();
}

std::vector<float> Rows(std::int64_t rows, std::int64_t cols) {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = nd(gen);
  return x;
}

int Int8Error(const std::string& model) {
  const ht::ModelFile m = Load(model);
  const std::int64_t rows = 4096, k = m.config.output_dim;
  const std::vector<float> x = Rows(rows, m.config.input_dim);
  std::vector<float> f(static_cast<size_t>(rows * k)), q(f.size());
  if (!MakeEngine(m, 1, rows, Precision::kFloat32)
           ->Score(x.data(), rows, f.data(), hpcml::inference::Input::kRaw)
           .ok() ||
      !MakeEngine(m, 1, rows, Precision::kInt8)
           ->Score(x.data(), rows, q.data(), hpcml::inference::Input::kRaw)
           .ok()) {
    return 1;
  }
  double worst = 0, sum = 0;
  std::int64_t same = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* a = f.data() + r * k;
    const float* b = q.data() + r * k;
    for (std::int64_t c = 0; c < k; ++c) {
      worst = std::max(worst, static_cast<double>(std::abs(a[c] - b[c])));
      sum += std::abs(a[c] - b[c]);
    }
    same += std::max_element(a, a + k) - a == std::max_element(b, b + k) - b;
  }
  std::printf("rows=%lld max_abs=%.4g mean_abs=%.4g same_class=%.4f\n",
              static_cast<long long>(rows), worst, sum / static_cast<double>(rows * k),
              static_cast<double>(same) / static_cast<double>(rows));
  return 0;
}

int Run(const std::string& model, std::int64_t batch, int threads, double seconds,
        Precision precision) {
  const ht::ModelFile m = Load(model);
  std::unique_ptr<Engine> e = MakeEngine(m, threads, batch, precision);
  const std::vector<float> x = Rows(batch, m.config.input_dim);
  std::vector<float> out(static_cast<size_t>(batch * m.config.output_dim));
  auto call = [&] {
    const double t0 = Now();
    hpcml::Status s = e->Score(x.data(), batch, out.data(), hpcml::inference::Input::kRaw);
    if (!s.ok()) std::abort();
    return Now() - t0;
  };
  call();  // warm-up: primitive creation, first touch
  std::vector<double> lat;
  const double start = Now();
  while (lat.size() < 3 || Now() - start < seconds) lat.push_back(call());
  double total = 0;
  for (double t : lat) total += t;
  std::printf(
      "engine=hpcml batch=%lld threads=%d calls=%zu rows_per_s=%.6g p50_us=%.4g p99_us=%.4g\n",
      static_cast<long long>(batch), threads, lat.size(),
      static_cast<double>(batch) * static_cast<double>(lat.size()) / total,
      Quantile(lat, 0.5) * 1e6, Quantile(lat, 0.99) * 1e6);
  return 0;
}

int Peak(int threads) {
  const ht::ModelConfig c = Config("wide");
  std::vector<hpcml::bench::Shape> shapes;
  for (int l = 0; l < c.num_layers(); ++l)
    shapes.push_back({false, true, 4096, c.out_dim(l), c.in_dim(l)});
  auto backend = ht::MakeCpuBackend(nullptr, {ht::GemmLibrary::kOneDnn, threads});
  const hpcml::bench::CpuPeak p = hpcml::bench::MeasureCpuPeak(shapes, *backend);
  std::printf("peak_gflops=%.1f threads=%d where=\"%s\"\n", p.gflops, threads, p.where.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  std::int64_t batch = 1;
  int threads = 1;
  double seconds = 1.0;
  Precision precision = Precision::kFloat32;
  for (int i = 2; i + 1 < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--batch") {
      batch = std::atoll(argv[++i]);
    } else if (k == "--threads") {
      threads = std::atoi(argv[++i]);
    } else if (k == "--seconds") {
      seconds = std::atof(argv[++i]);
    } else if (k == "--precision") {
      precision = std::string(argv[++i]) == "int8" ? Precision::kInt8 : Precision::kFloat32;
    }
  }
  if (mode == "models" && argc == 3) return WriteModels(argv[2]);
  if (mode == "run" && argc >= 3) return Run(argv[2], batch, threads, seconds, precision);
  if (mode == "int8-error" && argc == 3) return Int8Error(argv[2]);
  if (mode == "peak") return Peak(threads);
  std::fprintf(stderr,
               "usage: infer_bench models DIR | run MODEL --batch B --threads T [--seconds S] "
               "[--precision int8] | int8-error MODEL | peak --threads T\n");
  return 2;
}
