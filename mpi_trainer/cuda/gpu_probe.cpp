// hpcml-gpu-probe: lists the visible GPUs and checks an NCCL all-reduce
// across all of them from one process (ncclCommInitAll).
//
//   hpcml-gpu-probe [--require-gpu]
// Exit status: 0 ok; 1 a check failed; 77 no GPU visible and --require-gpu
// given (the test harness reports that as skipped, with the reason printed).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

bool CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "hpcml-gpu-probe: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

bool NcclOk(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "hpcml-gpu-probe: %s: %s\n", what, ncclGetErrorString(r));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bool require = argc > 1 && std::strcmp(argv[1], "--require-gpu") == 0;
  int version = 0;
  ncclGetVersion(&version);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("hpcml-gpu-probe: skipped: no CUDA device visible (%s); NCCL %d linked\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorString(e), version);
    return require ? 77 : 0;
  }
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (!CudaOk(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties")) return 1;
    std::printf("hpcml-gpu-probe: gpu %d: %s, %.1f GiB, sm_%d%d, pci %04x:%02x:%02x\n", d, p.name,
                static_cast<double>(p.totalGlobalMem) / (1 << 30), p.major, p.minor, p.pciDomainID,
                p.pciBusID, p.pciDeviceID);
  }

  // One communicator per device; each contributes (d+1) in every element.
  constexpr size_t kCount = 1 << 20;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  if (!NcclOk(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll")) return 1;
  std::vector<float*> bufs(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    std::vector<float> host(kCount, static_cast<float>(d + 1));
    if (!CudaOk(cudaSetDevice(d), "cudaSetDevice") ||
        !CudaOk(cudaMalloc(&bufs[i], kCount * sizeof(float)), "cudaMalloc") ||
        !CudaOk(cudaMemcpy(bufs[i], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
                "cudaMemcpy") ||
        !CudaOk(cudaStreamCreate(&streams[i]), "cudaStreamCreate"))
      return 1;
  }
  if (!NcclOk(ncclGroupStart(), "ncclGroupStart")) return 1;
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    if (!NcclOk(ncclAllReduce(bufs[i], bufs[i], kCount, ncclFloat, ncclSum, comms[i], streams[i]),
                "ncclAllReduce"))
      return 1;
  }
  if (!NcclOk(ncclGroupEnd(), "ncclGroupEnd")) return 1;
  const float expect = static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
  bool ok = true;
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    std::vector<float> host(kCount);
    cudaSetDevice(d);
    if (!CudaOk(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize")) return 1;
    if (!CudaOk(cudaMemcpy(host.data(), bufs[i], kCount * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy"))
      return 1;
    for (float v : host) ok = ok && v == expect;
    cudaFree(bufs[i]);
    cudaStreamDestroy(streams[i]);
    ncclCommDestroy(comms[i]);
  }
  std::printf("hpcml-gpu-probe: %s: NCCL %d all-reduce over %d GPU(s), expected %.0f\n",
              ok ? "ok" : "FAILED", version, n, static_cast<double>(expect));
  return ok ? 0 : 1;
}
