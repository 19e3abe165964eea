// Built when the CUDA backend is not: --backend cuda fails with a clear message.
#include "hpcml/trainer/backend.hpp"

namespace hpcml::trainer {

bool CudaBackendBuilt() {
  return false;
}

Result<std::unique_ptr<Backend>> MakeCudaBackend(const ProcessGrid*) {
  return Unavailable(
      "this hpcml-train was built without the CUDA backend (no CUDA toolkit/NCCL "
      "found at configure time); use --backend cpu");
}

}  // namespace hpcml::trainer
