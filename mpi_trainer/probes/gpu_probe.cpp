// hpcml-gpu-probe: lists the visible GPUs and checks an NCCL all-reduce
// across all of them from one process (ncclCommInitAll).
//
//   hpcml-gpu-probe [--require-gpu]
//   hpcml-gpu-probe --help | --version     (answered without touching CUDA)
// Exit status (common/exit_codes.hpp): 0 ok (or no GPU on this machine
// without --require-gpu); 1 CUDA or NCCL failed (beside a GPU: an old
// driver, a driver without its device nodes, no libcuda: never a skip);
// 2 a bad argument; 3 the all-reduce ran and gave wrong sums; 77 this
// machine has no NVIDIA GPU and --require-gpu was given (the test harness
// reports that as skipped, with the reason printed). HPCML_REQUIRE_GPU=1
// turns the 77 into 1, for runs on a GPU machine where a skip must not pass.
// "No GPU" is decided by cuda::CountDevices (kernels.cuh).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/identity.hpp"
#include "kernels.cuh"

namespace {

bool CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "hpcml-gpu-probe: %s: %s (%s)\n", what, cudaGetErrorString(e),
               cudaGetErrorName(e));
  return false;
}

bool NcclOk(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "hpcml-gpu-probe: %s: %s\n", what, ncclGetErrorString(r));
  return false;
}

// No device: an error beside a GPU fails; otherwise a skip (77 with
// --require-gpu), unless HPCML_REQUIRE_GPU=1 says one must be there.
int NoDevice(const hpcml::trainer::cuda::DeviceCount& dc, bool require, bool must_have) {
  if (!dc.no_gpu) {
    std::fprintf(stderr, "hpcml-gpu-probe: error: %s\n", dc.reason.c_str());
    return hpcml::kExitError;
  }
  if (must_have) {
    std::fprintf(stderr, "hpcml-gpu-probe: error: no CUDA device (HPCML_REQUIRE_GPU=1): %s\n",
                 dc.reason.c_str());
    return hpcml::kExitError;
  }
  std::printf("hpcml-gpu-probe: skipped: no CUDA device on this machine: %s\n", dc.reason.c_str());
  return require ? hpcml::kExitSkipped : hpcml::kExitOk;
}

bool ListDevices(int n) {
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (!CudaOk(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties")) return false;
    std::printf("hpcml-gpu-probe: gpu %d: %s, %.1f GiB, sm_%d%d, %d SMs, pci %04x:%02x:%02x\n", d,
                p.name, static_cast<double>(p.totalGlobalMem) / (1 << 30), p.major, p.minor,
                p.multiProcessorCount, p.pciDomainID, p.pciBusID, p.pciDeviceID);
  }
  return true;
}

// One buffer and stream per device, every element d + 1.
bool FillBuffers(int n, std::size_t count, std::vector<float*>* bufs,
                 std::vector<cudaStream_t>* streams) {
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    std::vector<float> host(count, static_cast<float>(d + 1));
    if (!CudaOk(cudaSetDevice(d), "cudaSetDevice") ||
        !CudaOk(cudaMalloc(&(*bufs)[i], count * sizeof(float)), "cudaMalloc") ||
        !CudaOk(cudaMemcpy((*bufs)[i], host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
                "cudaMemcpy") ||
        !CudaOk(cudaStreamCreate(&(*streams)[i]), "cudaStreamCreate"))
      return false;
  }
  return true;
}

// Whether every element of every buffer is `expect`; frees the buffers and streams.
bool CheckBuffers(int n, std::size_t count, float expect, const std::vector<float*>& bufs,
                  const std::vector<cudaStream_t>& streams, bool* ok) {
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    std::vector<float> host(count);
    if (!CudaOk(cudaSetDevice(d), "cudaSetDevice")) return false;
    if (!CudaOk(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize")) return false;
    if (!CudaOk(cudaMemcpy(host.data(), bufs[i], count * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy"))
      return false;
    for (float v : host) *ok = *ok && v == expect;
    cudaFree(bufs[i]);
    cudaStreamDestroy(streams[i]);
  }
  return true;
}

// One communicator per device, each contributing d + 1 in every element:
// the sum must be n(n+1)/2 everywhere. Returns the exit status: 3 for wrong
// sums, 1 for a CUDA or NCCL error.
int CheckAllReduce(int n, int version) {
  constexpr size_t kCount = 1 << 20;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  if (!NcclOk(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll"))
    return hpcml::kExitError;
  std::vector<float*> bufs(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  if (!FillBuffers(n, kCount, &bufs, &streams)) return hpcml::kExitError;
  if (!NcclOk(ncclGroupStart(), "ncclGroupStart")) return hpcml::kExitError;
  for (int d = 0; d < n; ++d) {
    size_t i = static_cast<size_t>(d);
    if (!NcclOk(ncclAllReduce(bufs[i], bufs[i], kCount, ncclFloat, ncclSum, comms[i], streams[i]),
                "ncclAllReduce"))
      return hpcml::kExitError;
  }
  if (!NcclOk(ncclGroupEnd(), "ncclGroupEnd")) return hpcml::kExitError;
  const float expect = static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
  bool sums_ok = true;
  if (!CheckBuffers(n, kCount, expect, bufs, streams, &sums_ok)) return hpcml::kExitError;
  // The clean end: finalize every communicator, then destroy. One thread
  // holds all ranks, so the finalizes go in one group (each waits for its
  // peers to finalize too).
  bool clean = NcclOk(ncclGroupStart(), "ncclGroupStart");
  for (ncclComm_t c : comms) clean = NcclOk(ncclCommFinalize(c), "ncclCommFinalize") && clean;
  clean = NcclOk(ncclGroupEnd(), "ncclGroupEnd") && clean;
  for (ncclComm_t c : comms) clean = NcclOk(ncclCommDestroy(c), "ncclCommDestroy") && clean;
  std::printf("hpcml-gpu-probe: %s: NCCL %d all-reduce over %d GPU(s), expected %.0f\n",
              sums_ok && clean ? "ok" : "FAILED", version, n, static_cast<double>(expect));
  if (!sums_ok) return hpcml::kExitCheckFailed;
  return clean ? hpcml::kExitOk : hpcml::kExitError;
}

}  // namespace

constexpr const char* kHelp =
    "hpcml-gpu-probe: list the CUDA devices and check an NCCL all-reduce across them\n"
    "Usage: hpcml-gpu-probe [OPTIONS]\n"
    "\n"
    "Options:\n"
    "  -h,--help                   Print this help message and exit\n"
    "  --version                   Display program version information and exit\n"
    "  --require-gpu               With no NVIDIA GPU on this machine exit 77 (skipped)\n"
    "                              instead of 0; with HPCML_REQUIRE_GPU=1 in the\n"
    "                              environment exit 1\n"
    "\n";

int main(int argc, char** argv) {
  bool require = false;
  const std::string help =
      kHelp + hpcml::ExitStatusHelp(
                  {{hpcml::kExitCheckFailed, "the all-reduce gave wrong sums"},
                   {hpcml::kExitSkipped, "no NVIDIA GPU on this machine, with --require-gpu"}});
  if (int rc = hpcml::AnswerHelpOrVersion(argc, argv, "hpcml-gpu-probe", help.c_str()); rc >= 0) {
    return rc;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-gpu") != 0) {
      std::fprintf(stderr, "hpcml-gpu-probe: unknown argument '%s' (see --help)\n", argv[i]);
      return hpcml::kExitUsage;
    }
    require = true;
  }
  const char* must = std::getenv("HPCML_REQUIRE_GPU");
  const bool must_have = must != nullptr && std::strcmp(must, "1") == 0;
  int version = 0;
  ncclGetVersion(&version);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("hpcml-gpu-probe: CUDA runtime %d, driver %d, NCCL %d\n", runtime, driver, version);
  const hpcml::trainer::cuda::DeviceCount dc = hpcml::trainer::cuda::CountDevices();
  if (dc.count == 0) return NoDevice(dc, require, must_have);
  if (!ListDevices(dc.count)) return hpcml::kExitError;
  return CheckAllReduce(dc.count, version);
}
