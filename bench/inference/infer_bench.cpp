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

int Run(const std::string& model, std::int64_t batch, int threads, double seconds) {
  auto m = ht::LoadModelFile(model);
  if (!m.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n", m.status().ToString().c_str());
    return 1;
  }
  auto e = hpcml::inference::Engine::Create(*m, {threads, std::max<std::int64_t>(batch, 1)});
  if (!e.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n", e.status().ToString().c_str());
    return 1;
  }
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * m->config.input_dim));
  for (float& v : x) v = nd(gen);
  std::vector<float> out(static_cast<size_t>(batch * m->config.output_dim));
  auto call = [&] {
    const double t0 = Now();
    hpcml::Status s = (*e)->Score(x.data(), batch, out.data(), hpcml::inference::Input::kRaw);
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
  for (int i = 2; i + 1 < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--batch")
      batch = std::atoll(argv[++i]);
    else if (k == "--threads")
      threads = std::atoi(argv[++i]);
    else if (k == "--seconds")
      seconds = std::atof(argv[++i]);
  }
  if (mode == "models" && argc == 3) return WriteModels(argv[2]);
  if (mode == "run" && argc >= 3) return Run(argv[2], batch, threads, seconds);
  if (mode == "peak") return Peak(threads);
  std::fprintf(stderr,
               "usage: infer_bench models DIR | run MODEL --batch B --threads T [--seconds S] | "
               "peak --threads T\n");
  return 2;
}
