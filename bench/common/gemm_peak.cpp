#include "gemm_peak.hpp"

#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace hpcml::bench {
namespace {

using GemmFn = void (*)(const Shape&, const float*, std::int64_t, const float*, std::int64_t,
                        float*, void*);

// Best GEMM rate (GFLOP/s) of `gemm` on `s`, operands hot in cache: the
// hardware's speed on that shape, not the step's.
double BestRate(const Shape& s, GemmFn gemm, void* ctx) {
  std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.5f);
  std::vector<float> b(static_cast<size_t>(s.k * s.n), 0.25f);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const std::int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  gemm(s, a.data(), lda, b.data(), ldb, c.data(), ctx);
  const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
  const int reps = std::max(2, static_cast<int>(2e9 / flops));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double t0 = Now();
    for (int i = 0; i < reps; ++i) gemm(s, a.data(), lda, b.data(), ldb, c.data(), ctx);
    best = std::min(best, (Now() - t0) / reps);
  }
  return flops / best * 1e-9;
}

void OneDnnMatmul(const Shape& x, const float* a, std::int64_t lda, const float* b,
                  std::int64_t ldb, float* c, void* backend) {
  static_cast<trainer::Backend*>(backend)->Gemm(x.ta, x.tb, x.m, x.n, x.k, 1.0f, a, lda, b, ldb,
                                                0.0f, c, x.n);
}

void OneDnnSgemm(const Shape& x, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float* c, void*) {
  dnnl_sgemm(x.ta ? 'T' : 'N', x.tb ? 'T' : 'N', x.m, x.n, x.k, 1.0f, a, lda, b, ldb, 0.0f, c, x.n);
}

void OpenBlasSgemm(const Shape& x, const float* a, std::int64_t lda, const float* b,
                   std::int64_t ldb, float* c, void*) {
  cblas_sgemm(CblasRowMajor, x.ta ? CblasTrans : CblasNoTrans, x.tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(x.m), static_cast<blasint>(x.n), static_cast<blasint>(x.k), 1.0f,
              a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
              static_cast<blasint>(x.n));
}

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CpuPeak MeasureCpuPeak(const std::vector<Shape>& shapes, trainer::Backend& onednn) {
  CpuPeak p;
  const std::string openblas = std::string("OpenBLAS ") + openblas_get_corename();
  const std::pair<GemmFn, std::string> libs[] = {{OneDnnMatmul, "oneDNN as the backend runs it"},
                                                 {OneDnnSgemm, "dnnl_sgemm"},
                                                 {OpenBlasSgemm, openblas}};
  for (const Shape& s : shapes) {
    for (const auto& [fn, name] : libs) {
      const double r = BestRate(s, fn, &onednn);
      if (r > p.gflops) p = {r, name + " " + s.Text()};
    }
  }
  return p;
}

}  // namespace hpcml::bench
