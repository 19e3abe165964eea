#include "kernels.cuh"

#include <cuda_bf16.h>
#include <dirent.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <string>

namespace hpcml::trainer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // row kernels: one warp per row
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

// Bias gradient tiling: a block covers 32 columns and 8 row lanes; the rows
// are cut into at most kBgChunks chunks (one per blockIdx.y), whose column
// sums are added in chunk order by a second kernel.
constexpr int kBgCols = 32;
constexpr int kBgLanes = 8;
constexpr std::int64_t kBgRowsPerChunk = 64;
constexpr std::int64_t kBgChunks = 64;

unsigned Blocks(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b == 0 ? 1 : b) : 65535 * 16);
}

bool Aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

unsigned RowBlocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

int BgChunks(std::int64_t rows) {
  const std::int64_t c = (rows + kBgRowsPerChunk - 1) / kBgRowsPerChunk;
  return static_cast<int>(c < 1 ? 1 : (c > kBgChunks ? kBgChunks : c));
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

// Butterfly reductions: every lane ends with the same value, bit for bit
// (each step adds the same two numbers on both lanes, and + commutes).
__device__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ double WarpSum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Grid-stride loops; I is the index type (32-bit when the size allows: the
// bias index needs a modulo per element).
template <typename I>
__device__ I First() {
  return static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
}
template <typename I>
__device__ I Stride() {
  return static_cast<I>(gridDim.x) * blockDim.x;
}

__global__ void FillK(float* x, std::size_t n, float v) {
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>()) x[i] = v;
}

// Four floats rounded to four bf16, as one 8-byte store.
__device__ uint2 Bf16x4(float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 out;
  out.x = *reinterpret_cast<const unsigned*>(&lo);
  out.y = *reinterpret_cast<const unsigned*>(&hi);
  return out;
}

// Four floats from four bf16 in one 8-byte load.
__device__ float4 Float4(uint2 v) {
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

__global__ void FromBf16K(const __nv_bfloat16* src, std::int64_t ld, std::int64_t rows,
                          std::int64_t cols, float* dst) {
  const auto n = static_cast<std::size_t>(rows * cols);
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>()) {
    const auto r = static_cast<std::int64_t>(i / static_cast<std::size_t>(cols));
    const std::int64_t at = r * ld + static_cast<std::int64_t>(i % static_cast<std::size_t>(cols));
    dst[at] = __bfloat162float(src[at]);
  }
}

__global__ void FromBf16K4(const uint2* src, std::size_t n4, float4* dst) {
  for (std::size_t i = First<std::size_t>(); i < n4; i += Stride<std::size_t>()) {
    dst[i] = Float4(src[i]);
  }
}

// Contiguous: four floats in, four bf16 out per step (n a multiple of 4).
__global__ void ToBf16K4(const float4* src, std::size_t n4, uint2* dst) {
  for (std::size_t i = First<std::size_t>(); i < n4; i += Stride<std::size_t>()) {
    dst[i] = Bf16x4(src[i]);
  }
}

__global__ void ToBf16K(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                        __nv_bfloat16* dst) {
  const auto n = static_cast<std::size_t>(rows * cols);
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>()) {
    const auto r = static_cast<std::int64_t>(i / static_cast<std::size_t>(cols));
    const std::int64_t at = r * ld + static_cast<std::int64_t>(i % static_cast<std::size_t>(cols));
    dst[at] = __float2bfloat16_rn(src[at]);
  }
}

template <typename I>
__global__ void AddBiasActK(int act, float* z, bool write_z, const float* b, float* out,
                            __nv_bfloat16* out16, I n, I cols) {
  for (I i = First<I>(); i < n; i += Stride<I>()) {
    const float v = z[i] + b[i % cols];
    if (write_z) z[i] = v;
    if (act != kNoActivation) {
      const float a = Act(act, v);
      out[i] = a;
      if (out16 != nullptr) out16[i] = __float2bfloat16_rn(a);
    }
  }
}

// cols a multiple of 4 and every pointer 16-byte aligned (out16: 8): four
// elements of one row a thread step; the same arithmetic as AddBiasActK.
__global__ void AddBiasActK4(int act, float4* z, bool write_z, const float4* b, float4* out,
                             uint2* out16, unsigned n4, unsigned cols4) {
  for (unsigned i = First<unsigned>(); i < n4; i += Stride<unsigned>()) {
    const float4 zi = z[i], bi = b[i % cols4];
    const float4 v = make_float4(zi.x + bi.x, zi.y + bi.y, zi.z + bi.z, zi.w + bi.w);
    if (write_z) z[i] = v;
    if (act != kNoActivation) {
      const float4 o = make_float4(Act(act, v.x), Act(act, v.y), Act(act, v.z), Act(act, v.w));
      out[i] = o;
      if (out16 != nullptr) out16[i] = Bf16x4(o);
    }
  }
}

__global__ void ActForwardK(int act, const float* pre, float* out, std::size_t n) {
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>())
    out[i] = Act(act, pre[i]);
}

__global__ void ActBackwardK(int act, const float* pre, const float* dout, float* dpre,
                             std::size_t n) {
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>())
    dpre[i] = dout[i] * ActGrad(act, pre[i]);
}

// Column sums of one row chunk (blockIdx.y) for 32 columns (blockIdx.x):
// thread (x, y) sums rows y, y + 8 * chunks, ... of its chunk's stride; the
// 8 lanes are then added in lane order. Consecutive threads read
// consecutive columns.
__global__ void BiasGradPartK(int act, const float* pre, const float* dout, float* dpre,
                              __nv_bfloat16* dpre16, std::int64_t rows, std::int64_t cols,
                              float* part) {
  __shared__ float tile[kBgLanes][kBgCols + 1];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kBgCols + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kBgLanes;
  float s = 0.0f;
  if (c < cols) {
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kBgLanes + threadIdx.y; r < rows;
         r += step) {
      const std::int64_t i = r * cols + c;
      float g = dout[i];
      if (act != kNoActivation) {
        g *= ActGrad(act, pre[i]);
        if (dpre != nullptr) dpre[i] = g;
        if (dpre16 != nullptr) dpre16[i] = __float2bfloat16_rn(g);
      }
      s += g;
    }
  }
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.0f;
    for (int k = 0; k < kBgLanes; ++k) t += tile[k][threadIdx.x];
    part[static_cast<std::int64_t>(blockIdx.y) * cols + c] = t;
  }
}

// BiasGradPartK on float4s (cols a multiple of 4, pointers 16-byte aligned,
// dpre16 8): thread (x, y) covers columns 4x .. 4x + 3 of its block's 128,
// each summed in the same order as there.
__global__ void BiasGradPartK4(int act, const float4* pre, const float4* dout, float4* dpre,
                               uint2* dpre16, std::int64_t rows, std::int64_t cols4, float4* part) {
  __shared__ float4 tile[kBgLanes][kBgCols];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kBgCols + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kBgLanes;
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (c < cols4) {
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kBgLanes + threadIdx.y; r < rows;
         r += step) {
      const std::int64_t i = r * cols4 + c;
      float4 g = dout[i];
      if (act != kNoActivation) {
        const float4 p = pre[i];
        g.x *= ActGrad(act, p.x);
        g.y *= ActGrad(act, p.y);
        g.z *= ActGrad(act, p.z);
        g.w *= ActGrad(act, p.w);
        if (dpre != nullptr) dpre[i] = g;
        if (dpre16 != nullptr) dpre16[i] = Bf16x4(g);
      }
      s.x += g.x;
      s.y += g.y;
      s.z += g.z;
      s.w += g.w;
    }
  }
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols4) {
    float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k = 0; k < kBgLanes; ++k) {
      const float4 v = tile[k][threadIdx.x];
      t.x += v.x;
      t.y += v.y;
      t.z += v.z;
      t.w += v.w;
    }
    part[static_cast<std::int64_t>(blockIdx.y) * cols4 + c] = t;
  }
}

__global__ void BiasGradSumK(const float* part, int chunks, std::int64_t cols, float* db) {
  for (std::int64_t c = First<std::int64_t>(); c < cols; c += Stride<std::int64_t>()) {
    float t = 0.0f;
    for (int k = 0; k < chunks; ++k) t += part[static_cast<std::int64_t>(k) * cols + c];
    db[c] += t;
  }
}

// One warp per row: max, sum of exponentials, then the gradient; the row
// stays in L1 between the passes. Float throughout; the loss itself is
// formed in double from the float max and sum (one log per row).
__global__ void CrossEntropyK(const float* z, const float* labels, const float* weight,
                              std::int64_t rows, std::int64_t cols, float scale, float* dz,
                              double* row_loss) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;  // the whole warp leaves together
  const float* zr = z + r * cols;
  float* dr = dz + r * cols;
  const float label = labels[r];
  const auto t = static_cast<std::int64_t>(label);
  if (!(label >= 0.0f) || t >= cols) {
    for (std::int64_t c = lane; c < cols; c += kWarp) dr[c] = 0.0f;
    if (lane == 0) row_loss[r] = __longlong_as_double(0x7ff8000000000000LL);  // NaN, as on the CPU
    return;
  }
  float mx = -INFINITY;
  for (std::int64_t c = lane; c < cols; c += kWarp) mx = fmaxf(mx, zr[c]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (std::int64_t c = lane; c < cols; c += kWarp) sum += expf(zr[c] - mx);
  sum = WarpSum(sum);
  const float inv = 1.0f / sum;
  const float w = weight != nullptr ? weight[t] : 1.0f;
  const float ws = scale * w;
  for (std::int64_t c = lane; c < cols; c += kWarp) {
    const float p = expf(zr[c] - mx) * inv;
    dr[c] = ws * (c == t ? p - 1.0f : p);
  }
  if (lane == 0) {
    row_loss[r] =
        static_cast<double>(w) *
        (static_cast<double>(mx) + log(static_cast<double>(sum)) - static_cast<double>(zr[t]));
  }
}

// One warp per row: the lane-0 read of the code happens before any lane
// writes the slot (__syncwarp), since the code sits in the slot's first float.
__global__ void EmbedLookupK(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                             std::int64_t rows, float* codes) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;
  float* slot = x + r * stride;
  const float code = slot[0];
  __syncwarp();
  if (lane == 0) codes[r] = code;
  const float* row = table + static_cast<std::int64_t>(code) * dim;
  for (std::int64_t c = lane; c < dim; c += kWarp) slot[c] = row[c];
}

__global__ void EmbedGradK(const float* dx, std::int64_t stride, const float* codes,
                           std::int64_t rows, std::int64_t dim, float* dtable) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;
  const float* g = dx + r * stride;
  float* row = dtable + static_cast<std::int64_t>(codes[r]) * dim;
  for (std::int64_t c = lane; c < dim; c += kWarp) atomicAdd(row + c, g[c]);
}

__global__ void MseK(const float* y, const float* t, std::int64_t rows, std::int64_t cols,
                     float scale, float* dy, double* row_loss) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;
  const float inv = 1.0f / static_cast<float>(cols);
  double s = 0.0;
  for (std::int64_t c = lane; c < cols; c += kWarp) {
    const std::int64_t i = r * cols + c;
    const float d = y[i] - t[i];
    s += static_cast<double>(d) * static_cast<double>(d);
    dy[i] = scale * 2.0f * d * inv;
  }
  s = WarpSum(s);
  if (lane == 0) row_loss[r] = s / static_cast<double>(cols);
}

// Block-wide tree sum of one double per thread, in a fixed order; the result
// is in sh[0] (blockDim.x a power of two).
__device__ void BlockSum(double* sh, double v) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
}

// Each thread's share in a fixed order: the 16-byte-aligned float4s (n4 of
// them, from x), then the elements after them.
__global__ void SumSquaresPartK(const float* x, std::size_t n4, std::size_t n, double* part) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  for (std::size_t i = First<std::size_t>(); i < n4; i += Stride<std::size_t>()) {
    const float4 v = x4[i];
    s += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
         static_cast<double>(v.z) * v.z + static_cast<double>(v.w) * v.w;
  }
  for (std::size_t i = 4 * n4 + First<std::size_t>(); i < n; i += Stride<std::size_t>())
    s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  BlockSum(sh, s);
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

constexpr int kSumThreads = 1024;

__global__ void SumDoublesK(const double* x, std::size_t n, double* out) {
  __shared__ double sh[kSumThreads];
  double s = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  BlockSum(sh, s);
  if (threadIdx.x == 0) *out = sh[0];
}

// One parameter's AdamW update (m and v in place); the new parameter.
__device__ float AdamOne(float p, float g, float& m, float& v, const AdamArgs& a) {
  const float gi = g * a.grad_scale;
  m = a.beta1 * m + (1.0f - a.beta1) * gi;
  v = a.beta2 * v + (1.0f - a.beta2) * gi * gi;
  const float denom = sqrtf(v) * a.inv_sqrt_bc2 + a.eps;
  return p * a.decay - a.step_size * m / denom;
}

__global__ void AdamWK(float* p, __nv_bfloat16* p16, const float* g, float* m, float* v,
                       std::size_t n, AdamArgs a) {
  for (std::size_t i = First<std::size_t>(); i < n; i += Stride<std::size_t>()) {
    float mi = m[i], vi = v[i];
    const float pi = AdamOne(p[i], g[i], mi, vi, a);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if (p16 != nullptr) p16[i] = __float2bfloat16_rn(pi);
  }
}

// Four parameters a thread step, in 16-byte loads and stores (the update
// is memory-bound: 30 bytes a parameter); the same arithmetic as AdamWK.
__global__ void AdamWK4(float4* p, uint2* p16, const float4* g, float4* m, float4* v,
                        std::size_t n4, AdamArgs a) {
  for (std::size_t i = First<std::size_t>(); i < n4; i += Stride<std::size_t>()) {
    float4 pi = p[i], mi = m[i], vi = v[i];
    const float4 gi = g[i];
    pi.x = AdamOne(pi.x, gi.x, mi.x, vi.x, a);
    pi.y = AdamOne(pi.y, gi.y, mi.y, vi.y, a);
    pi.z = AdamOne(pi.z, gi.z, mi.z, vi.z, a);
    pi.w = AdamOne(pi.w, gi.w, mi.w, vi.w, a);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if (p16 != nullptr) p16[i] = Bf16x4(pi);
  }
}

// --- device discovery helpers (host code)

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The first /dev/nvidia<N> or /dev/nvidiactl, or "".
std::string NvidiaDeviceNode() {
  DIR* d = opendir("/dev");
  if (d == nullptr) return {};
  std::string found;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("nvidia", 0) == 0 &&
        (name == "nvidiactl" ||
         (name.size() > 6 && std::isdigit(static_cast<unsigned char>(name[6]))))) {
      found = "/dev/" + name;
      break;
    }
  }
  closedir(d);
  return found;
}

// The PCI address of the first NVIDIA (vendor 0x10de) display or 3D
// controller (class 0x03xxxx), or "".
std::string NvidiaPciGpu() {
  const std::string root = "/sys/bus/pci/devices";
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return {};
  std::string found;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (ReadSmall(root + "/" + name + "/vendor") == "0x10de" &&
        ReadSmall(root + "/" + name + "/class").rfind("0x03", 0) == 0) {
      found = name;
      break;
    }
  }
  closedir(d);
  return found;
}

std::string Version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

DeviceCount CountDevices() {
  DeviceCount d;
  d.error = cudaGetDeviceCount(&d.count);
  if (d.error == cudaSuccess) {
    // The runtime reports no device as cudaErrorNoDevice; 0 is not expected.
    if (d.count == 0) {
      d.no_gpu = true;
      d.reason = "cudaGetDeviceCount: 0 devices";
    }
    return d;
  }
  d.count = 0;
  const std::string what = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(d.error) + " (" +
                           cudaGetErrorString(d.error) + ")";
  if (d.error == cudaErrorNoDevice) {
    d.no_gpu = true;
    d.reason = what;
    return d;
  }
  if (d.error != cudaErrorInsufficientDriver) {
    d.reason = what;
    return d;
  }
  // Either no driver at all or one older than this runtime needs: only the
  // first, on a machine without NVIDIA hardware, means "no GPU here".
  int driver = -1, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  const std::string node = NvidiaDeviceNode(), pci = NvidiaPciGpu();
  if (driver == 0 && node.empty() && pci.empty()) {
    d.no_gpu = true;
    d.reason = what +
               ": no CUDA driver installed, no /dev/nvidia* device node, no NVIDIA GPU on "
               "the PCI bus";
    return d;
  }
  d.reason = what + ": runtime " + Version(runtime) + ", driver " +
             (driver > 0 ? Version(driver) : std::string("not loadable (libcuda.so.1)"));
  if (!node.empty()) d.reason += ", device node " + node + " exists";
  if (!pci.empty()) d.reason += ", NVIDIA GPU at PCI " + pci;
  return d;
}

cudaError_t Fill(float* x, std::size_t n, float v, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  FillK<<<Blocks(n), kThreads, 0, s>>>(x, n, v);
  return cudaGetLastError();
}

cudaError_t ToBf16(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                   void* dst, cudaStream_t s) {
  const auto n = static_cast<std::size_t>(rows * cols);
  if (n == 0) return cudaSuccess;
  if (ld == cols && n % 4 == 0 && Aligned(src, 16) && Aligned(dst, 8)) {
    ToBf16K4<<<Blocks(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(src), n / 4,
                                                static_cast<uint2*>(dst));
  } else {
    ToBf16K<<<Blocks(n), kThreads, 0, s>>>(src, ld, rows, cols, static_cast<__nv_bfloat16*>(dst));
  }
  return cudaGetLastError();
}

cudaError_t FromBf16(const void* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                     float* dst, cudaStream_t s) {
  const auto n = static_cast<std::size_t>(rows * cols);
  if (n == 0) return cudaSuccess;
  if (ld == cols && n % 4 == 0 && Aligned(src, 8) && Aligned(dst, 16)) {
    FromBf16K4<<<Blocks(n / 4), kThreads, 0, s>>>(static_cast<const uint2*>(src), n / 4,
                                                  reinterpret_cast<float4*>(dst));
  } else {
    FromBf16K<<<Blocks(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(src), ld, rows, cols,
                                             dst);
  }
  return cudaGetLastError();
}

cudaError_t AddBiasAct(int act, float* z, bool write_z, const float* b, float* out, void* out16,
                       std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  const auto n = static_cast<std::size_t>(rows * cols);
  if (n == 0) return cudaSuccess;
  auto* o16 = static_cast<__nv_bfloat16*>(out16);
  const bool wide = cols % 4 == 0 && Aligned(z, 16) && Aligned(b, 16) &&
                    (out == nullptr || Aligned(out, 16)) && (out16 == nullptr || Aligned(out16, 8));
  // 32-bit indices while index + grid stride (at most 2^28) cannot wrap.
  if (wide && n <= (std::size_t{1} << 31)) {
    AddBiasActK4<<<Blocks(n / 4), kThreads, 0, s>>>(
        act, reinterpret_cast<float4*>(z), write_z, reinterpret_cast<const float4*>(b),
        reinterpret_cast<float4*>(out), static_cast<uint2*>(out16), static_cast<unsigned>(n / 4),
        static_cast<unsigned>(cols / 4));
  } else if (n <= (std::size_t{1} << 31)) {
    AddBiasActK<unsigned><<<Blocks(n), kThreads, 0, s>>>(
        act, z, write_z, b, out, o16, static_cast<unsigned>(n), static_cast<unsigned>(cols));
  } else {
    AddBiasActK<std::size_t><<<Blocks(n), kThreads, 0, s>>>(act, z, write_z, b, out, o16, n,
                                                            static_cast<std::size_t>(cols));
  }
  return cudaGetLastError();
}

cudaError_t ActForward(int act, const float* pre, float* out, std::size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  ActForwardK<<<Blocks(n), kThreads, 0, s>>>(act, pre, out, n);
  return cudaGetLastError();
}

cudaError_t ActBackward(int act, const float* pre, const float* dout, float* dpre, std::size_t n,
                        cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  ActBackwardK<<<Blocks(n), kThreads, 0, s>>>(act, pre, dout, dpre, n);
  return cudaGetLastError();
}

std::size_t BiasGradScratch(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(BgChunks(rows)) * static_cast<std::size_t>(cols);
}

cudaError_t BiasGrad(int act, const float* pre, const float* dout, float* dpre, void* dpre16,
                     std::int64_t rows, std::int64_t cols, float* db, float* scratch,
                     cudaStream_t s) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const int chunks = BgChunks(rows);
  const bool wide =
      cols % 4 == 0 && Aligned(dout, 16) && Aligned(scratch, 16) &&
      (act == kNoActivation || (Aligned(pre, 16) && Aligned(dpre, 16) && Aligned(dpre16, 8)));
  if (wide) {
    const std::int64_t cols4 = cols / 4;
    const dim3 grid(static_cast<unsigned>((cols4 + kBgCols - 1) / kBgCols),
                    static_cast<unsigned>(chunks));
    BiasGradPartK4<<<grid, dim3(kBgCols, kBgLanes), 0, s>>>(
        act, reinterpret_cast<const float4*>(pre), reinterpret_cast<const float4*>(dout),
        reinterpret_cast<float4*>(dpre), static_cast<uint2*>(dpre16), rows, cols4,
        reinterpret_cast<float4*>(scratch));
  } else {
    const dim3 grid(static_cast<unsigned>((cols + kBgCols - 1) / kBgCols),
                    static_cast<unsigned>(chunks));
    BiasGradPartK<<<grid, dim3(kBgCols, kBgLanes), 0, s>>>(
        act, pre, dout, dpre, static_cast<__nv_bfloat16*>(dpre16), rows, cols, scratch);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  BiasGradSumK<<<Blocks(static_cast<std::size_t>(cols)), kThreads, 0, s>>>(scratch, chunks, cols,
                                                                           db);
  return cudaGetLastError();
}

cudaError_t CrossEntropy(const float* logits, const float* labels, const float* weight,
                         std::int64_t rows, std::int64_t cols, float scale, float* dlogits,
                         double* row_loss, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  CrossEntropyK<<<RowBlocks(rows), kThreads, 0, s>>>(logits, labels, weight, rows, cols, scale,
                                                     dlogits, row_loss);
  return cudaGetLastError();
}

cudaError_t EmbedLookup(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                        std::int64_t rows, float* codes, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  EmbedLookupK<<<RowBlocks(rows), kThreads, 0, s>>>(table, dim, x, stride, rows, codes);
  return cudaGetLastError();
}

cudaError_t EmbedGrad(const float* dx, std::int64_t stride, const float* codes, std::int64_t rows,
                      std::int64_t dim, float* dtable, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  EmbedGradK<<<RowBlocks(rows), kThreads, 0, s>>>(dx, stride, codes, rows, dim, dtable);
  return cudaGetLastError();
}

cudaError_t Mse(const float* y, const float* t, std::int64_t rows, std::int64_t cols, float scale,
                float* dy, double* row_loss, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  MseK<<<RowBlocks(rows), kThreads, 0, s>>>(y, t, rows, cols, scale, dy, row_loss);
  return cudaGetLastError();
}

cudaError_t SumSquares(const float* x, std::size_t n, double* partials, double* out,
                       cudaStream_t s) {
  const unsigned blocks = Blocks(n) < kSumPartials ? Blocks(n) : kSumPartials;
  SumSquaresPartK<<<blocks, kThreads, 0, s>>>(x, Aligned(x, 16) ? n / 4 : 0, n, partials);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return SumDoubles(partials, blocks, out, s);
}

cudaError_t SumDoubles(const double* x, std::size_t n, double* out, cudaStream_t s) {
  SumDoublesK<<<1, kSumThreads, 0, s>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t AdamW(float* p, void* p16, const float* g, float* m, float* v, std::size_t n,
                  const AdamArgs& a, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  auto* p16b = static_cast<__nv_bfloat16*>(p16);
  std::size_t n4 = 0;
  if (Aligned(p, 16) && Aligned(g, 16) && Aligned(m, 16) && Aligned(v, 16) &&
      (p16 == nullptr || Aligned(p16, 8))) {
    n4 = n / 4;
    if (n4 > 0) {
      AdamWK4<<<Blocks(n4), kThreads, 0, s>>>(
          reinterpret_cast<float4*>(p), static_cast<uint2*>(p16),
          reinterpret_cast<const float4*>(g), reinterpret_cast<float4*>(m),
          reinterpret_cast<float4*>(v), n4, a);
    }
  }
  const std::size_t done = 4 * n4;
  if (done < n) {
    AdamWK<<<Blocks(n - done), kThreads, 0, s>>>(p + done, p16b == nullptr ? nullptr : p16b + done,
                                                 g + done, m + done, v + done, n - done, a);
  }
  return cudaGetLastError();
}

}  // namespace hpcml::trainer::cuda
