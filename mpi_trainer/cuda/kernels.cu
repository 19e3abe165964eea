#include "kernels.cuh"

namespace hpcml::trainer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

unsigned Blocks(std::size_t n) {
  std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b == 0 ? 1 : b) : 65535 * 16);
}

__global__ void FillK(float* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = v;
}

__global__ void AddBiasK(float* y, const float* b, std::int64_t rows, std::int64_t cols) {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] += b[i % cols];
}

// One thread per column; consecutive threads read consecutive addresses.
__global__ void BiasGradK(const float* dy, std::int64_t rows, std::int64_t cols, float* db) {
  const std::int64_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) s += dy[r * cols + c];
  db[c] += s;
}

__device__ float Act(int act, float x) {
  if (act == 0) return x > 0.0f ? x : 0.0f;
  if (act == 2) return tanhf(x);
  return 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x)));
}

__device__ float ActGrad(int act, float x) {
  if (act == 0) return x > 0.0f ? 1.0f : 0.0f;
  if (act == 2) {
    const float t = tanhf(x);
    return 1.0f - t * t;
  }
  const float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

__global__ void ActForwardK(int act, const float* pre, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = Act(act, pre[i]);
}

__global__ void ActBackwardK(int act, const float* pre, const float* dout, float* dpre,
                             std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dpre[i] = dout[i] * ActGrad(act, pre[i]);
}

__global__ void CrossEntropyK(const float* z, const float* labels, std::int64_t rows,
                              std::int64_t cols, float scale, float* dz, double* row_loss) {
  const std::int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* zr = z + r * cols;
  float* dr = dz + r * cols;
  const float label = labels[r];
  const auto t = static_cast<std::int64_t>(label);
  if (!(label >= 0.0f) || t >= cols) {
    row_loss[r] = __longlong_as_double(0x7ff8000000000000LL);  // NaN, as on the CPU
    for (std::int64_t c = 0; c < cols; ++c) dr[c] = 0.0f;
    return;
  }
  float mx = zr[0];
  for (std::int64_t c = 1; c < cols; ++c) mx = fmaxf(mx, zr[c]);
  double sum = 0.0;
  for (std::int64_t c = 0; c < cols; ++c) sum += exp(static_cast<double>(zr[c] - mx));
  const double lse = static_cast<double>(mx) + log(sum);
  row_loss[r] = lse - static_cast<double>(zr[t]);
  for (std::int64_t c = 0; c < cols; ++c) {
    const double p = exp(static_cast<double>(zr[c]) - lse);
    dr[c] = scale * static_cast<float>(p - (c == t ? 1.0 : 0.0));
  }
}

__global__ void MseK(const float* y, const float* t, std::int64_t rows, std::int64_t cols,
                     float scale, float* dy, double* row_loss) {
  const std::int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float inv = 1.0f / static_cast<float>(cols);
  double s = 0.0;
  for (std::int64_t c = 0; c < cols; ++c) {
    const std::int64_t i = r * cols + c;
    const float d = y[i] - t[i];
    s += static_cast<double>(d) * static_cast<double>(d);
    dy[i] = scale * 2.0f * d * inv;
  }
  row_loss[r] = s / static_cast<double>(cols);
}

__global__ void SumSquaresK(const float* x, std::size_t n, double* out) {
  __shared__ double part[kThreads];
  double s = 0.0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

__global__ void AdamWK(float* p, const float* g, float* m, float* v, std::size_t n, AdamArgs a) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float gi = g[i] * a.grad_scale;
    m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    const float denom = sqrtf(v[i]) * a.inv_sqrt_bc2 + a.eps;
    p[i] = p[i] * a.decay - a.step_size * m[i] / denom;
  }
}

unsigned RowBlocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kThreads - 1) / kThreads);
}

}  // namespace

void Fill(float* x, std::size_t n, float v, cudaStream_t s) {
  FillK<<<Blocks(n), kThreads, 0, s>>>(x, n, v);
}
void AddBias(float* y, const float* b, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  AddBiasK<<<Blocks(static_cast<std::size_t>(rows * cols)), kThreads, 0, s>>>(y, b, rows, cols);
}
void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db, cudaStream_t s) {
  BiasGradK<<<RowBlocks(cols), kThreads, 0, s>>>(dy, rows, cols, db);
}
void ActForward(int act, const float* pre, float* out, std::size_t n, cudaStream_t s) {
  ActForwardK<<<Blocks(n), kThreads, 0, s>>>(act, pre, out, n);
}
void ActBackward(int act, const float* pre, const float* dout, float* dpre, std::size_t n,
                 cudaStream_t s) {
  ActBackwardK<<<Blocks(n), kThreads, 0, s>>>(act, pre, dout, dpre, n);
}
void CrossEntropy(const float* logits, const float* labels, std::int64_t rows, std::int64_t cols,
                  float scale, float* dlogits, double* row_loss, cudaStream_t s) {
  CrossEntropyK<<<RowBlocks(rows), kThreads, 0, s>>>(logits, labels, rows, cols, scale, dlogits,
                                                     row_loss);
}
void Mse(const float* y, const float* t, std::int64_t rows, std::int64_t cols, float scale,
         float* dy, double* row_loss, cudaStream_t s) {
  MseK<<<RowBlocks(rows), kThreads, 0, s>>>(y, t, rows, cols, scale, dy, row_loss);
}
void SumSquares(const float* x, std::size_t n, double* out, cudaStream_t s) {
  SumSquaresK<<<Blocks(n) < 1024 ? Blocks(n) : 1024, kThreads, 0, s>>>(x, n, out);
}
void AdamW(float* p, const float* g, float* m, float* v, std::size_t n, const AdamArgs& a,
           cudaStream_t s) {
  AdamWK<<<Blocks(n), kThreads, 0, s>>>(p, g, m, v, n, a);
}

}  // namespace hpcml::trainer::cuda
