// Elementwise and reduction kernels of the CUDA backend, behind a plain C++
// interface so the backend itself compiles as host C++ (with MPI) and only
// this file goes through nvcc. All launches are asynchronous on `s`.
// Activation codes follow hpcml::trainer::Activation: 0 relu, 1 gelu, 2 tanh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace hpcml::trainer::cuda {

void Fill(float* x, std::size_t n, float v, cudaStream_t s);
void AddBias(float* y, const float* b, std::int64_t rows, std::int64_t cols, cudaStream_t s);
void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db, cudaStream_t s);
void ActForward(int act, const float* pre, float* out, std::size_t n, cudaStream_t s);
void ActBackward(int act, const float* pre, const float* dout, float* dpre, std::size_t n,
                 cudaStream_t s);
// Per-row losses into row_loss[rows] (device doubles); gradients scaled.
void CrossEntropy(const float* logits, const float* labels, std::int64_t rows, std::int64_t cols,
                  float scale, float* dlogits, double* row_loss, cudaStream_t s);
void Mse(const float* y, const float* t, std::int64_t rows, std::int64_t cols, float scale,
         float* dy, double* row_loss, cudaStream_t s);
// *out (device, caller zeroes it) += sum of x[i]^2.
void SumSquares(const float* x, std::size_t n, double* out, cudaStream_t s);
struct AdamArgs {
  float beta1, beta2, eps, decay, grad_scale, step_size, inv_sqrt_bc2;
};
void AdamW(float* p, const float* g, float* m, float* v, std::size_t n, const AdamArgs& a,
           cudaStream_t s);

}  // namespace hpcml::trainer::cuda
