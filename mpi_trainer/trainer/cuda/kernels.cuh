// Device code of the CUDA backend behind a plain C++ interface, so the
// backend itself compiles as host C++ (with MPI) and only kernels.cu goes
// through nvcc. Also the one rule, shared by the backend, hpcml-gpu-probe
// and the tests, that tells "this machine has no GPU" from a broken setup.
//
// Every launcher queues its kernels on `s` and returns cudaGetLastError()
// after the launch: launch failures are reported only there and are not
// sticky, so a caller that drops the result loses them. Errors of the
// kernels themselves surface at the next synchronisation.
//
// Every reduction is deterministic: the grid depends only on the sizes (not
// on the device), partial sums go to a buffer and are added in a fixed
// order, no atomics. The same inputs give bitwise the same outputs on every
// run and every GPU model.
//
// Activation codes follow hpcml::trainer::Activation (0 relu, 1 gelu,
// 2 tanh); kNoActivation (-1) skips the activation.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace hpcml::trainer::cuda {

constexpr int kNoActivation = -1;

// --- device discovery

// cudaGetDeviceCount, classified. `no_gpu` is true only when the machine has
// no NVIDIA GPU at all: the runtime says cudaErrorNoDevice, or it says
// cudaErrorInsufficientDriver while no CUDA driver is installed
// (cudaDriverGetVersion gives 0), no /dev/nvidia* node exists and no NVIDIA
// display or 3D controller is on the PCI bus. Any other error (an old
// driver, a driver library without its device, missing device nodes beside
// NVIDIA hardware) is a broken GPU setup, never a skip. `reason` names the
// CUDA error (cudaGetErrorName and cudaGetErrorString) and the evidence.
struct DeviceCount {
  cudaError_t error = cudaSuccess;
  int count = 0;
  bool no_gpu = false;
  std::string reason;
};
DeviceCount CountDevices();

// --- elementwise

cudaError_t Fill(float* x, std::size_t n, float v, cudaStream_t s);
// The rows x cols matrix at `src` (row stride `ld` floats) rounded to bf16
// (nearest even) at `dst`, with the same row stride; `dst` is 2-byte
// elements (__nv_bfloat16), void here so callers need no CUDA headers.
cudaError_t ToBf16(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                   void* dst, cudaStream_t s);
// The inverse: bf16 at src (row stride ld, in elements) widened to fp32 at
// dst, same layout.
cudaError_t FromBf16(const void* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                     float* dst, cudaStream_t s);
// z[r, :] += b (z left as it was when !write_z); then out = act(z) unless
// act is kNoActivation (out unused), and out rounded to bf16 at out16 (2-byte
// elements, same layout) when out16 is not null.
cudaError_t AddBiasAct(int act, float* z, bool write_z, const float* b, float* out, void* out16,
                       std::int64_t rows, std::int64_t cols, cudaStream_t s);
cudaError_t ActForward(int act, const float* pre, float* out, std::size_t n, cudaStream_t s);
cudaError_t ActBackward(int act, const float* pre, const float* dout, float* dpre, std::size_t n,
                        cudaStream_t s);

// --- reductions

// g = dout * act'(pre), written to dpre (act kNoActivation: g = dout, pre and
// dpre unused); db[c] += sum over rows of g[r, c]. With an activation, g goes
// to dpre when it is not null and, rounded to bf16, to a non-null dpre16
// (same layout). Parallel over rows and columns: column sums of row chunks
// go to `scratch`, then are added in chunk order. `scratch` holds
// BiasGradScratch(rows, cols) floats.
std::size_t BiasGradScratch(std::int64_t rows, std::int64_t cols);
cudaError_t BiasGrad(int act, const float* pre, const float* dout, float* dpre, void* dpre16,
                     std::int64_t rows, std::int64_t cols, float* db, float* scratch,
                     cudaStream_t s);

// Softmax cross-entropy, one warp per row, float with a stable
// log-sum-exp: row_loss[r] (device doubles) = logsumexp(z[r]) - z[r, t],
// dz = scale * (softmax(z[r]) - onehot(t)). A label outside [0, cols) gives a
// NaN loss and a zero gradient row, as on the CPU. `weight` (device, one per
// class, may be null) multiplies a row's loss and gradient by its class's.
cudaError_t CrossEntropy(const float* logits, const float* labels, const float* weight,
                         std::int64_t rows, std::int64_t cols, float scale, float* dlogits,
                         double* row_loss, cudaStream_t s);
// Embedding lookup and gradient, as Backend::EmbedLookup and EmbedGrad say;
// the gradient adds with atomics (rows sharing a code: float sums in any order).
cudaError_t EmbedLookup(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                        std::int64_t rows, float* codes, cudaStream_t s);
cudaError_t EmbedGrad(const float* dx, std::int64_t stride, const float* codes, std::int64_t rows,
                      std::int64_t dim, float* dtable, cudaStream_t s);
// Mean squared error, one warp per row: row_loss[r] = mean((y - t)^2).
cudaError_t Mse(const float* y, const float* t, std::int64_t rows, std::int64_t cols, float scale,
                float* dy, double* row_loss, cudaStream_t s);

// Sum of squares of x into *out (device double, overwritten). `partials`
// holds kSumPartials doubles.
constexpr int kSumPartials = 1024;
cudaError_t SumSquares(const float* x, std::size_t n, double* partials, double* out,
                       cudaStream_t s);
// Sum of x[0, n) into *out (device double, overwritten); one block.
cudaError_t SumDoubles(const double* x, std::size_t n, double* out, cudaStream_t s);

// --- optimizer

struct AdamArgs {
  float beta1, beta2, eps, decay, grad_scale, step_size, inv_sqrt_bc2;
};
// p16 (may be null): the updated p rounded to bf16.
cudaError_t AdamW(float* p, void* p16, const float* g, float* m, float* v, std::size_t n,
                  const AdamArgs& a, cudaStream_t s);

}  // namespace hpcml::trainer::cuda
