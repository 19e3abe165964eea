// The machine's GEMM peak on given shapes, measured in the benchmark's own
// run with the best libraries here (oneDNN as the trainer's backend runs it,
// dnnl_sgemm, OpenBLAS with the kernel OPENBLAS_CORETYPE selects), so a
// ratio against it shows the hardware, not a slow library. Used by
// trainer_bench and infer_bench.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/trainer/backend.hpp"

namespace hpcml::bench {

// Seconds on a monotonic clock.
double Now();

// One GEMM: C[m,n] = op(A) op(B).
struct Shape {
  bool ta, tb;
  std::int64_t m, n, k;
  std::string Text() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
           (ta ? "T" : "N") + (tb ? "T" : "N");
  }
};

struct CpuPeak {
  double gflops = 0;
  std::string where;  // library and shape
};

// For every shape the best rate of each library (operands hot in cache),
// then the best over the shapes. `onednn` is a CPU backend with the
// benchmark's thread count.
CpuPeak MeasureCpuPeak(const std::vector<Shape>& shapes, trainer::Backend& onednn);

}  // namespace hpcml::bench
