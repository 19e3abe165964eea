// NVLink discovery through NVML, loaded at run time so hpcml has no build
// or install dependency on the NVIDIA driver. Only the few entry points
// below are used; their ABI has been stable since NVML 10.
#include <dlfcn.h>

#include <cstring>

#include "links.hpp"

namespace hpcml::topology::detail {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper
constexpr int kNvlinkFeatureEnabled = 1;

// nvmlPciInfo_t as laid out by nvml.h (v2+).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct DlHandle {
  void* h = nullptr;
  ~DlHandle() {
    if (h != nullptr) dlclose(h);
  }
};

template <typename Fn>
Fn Sym(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

bool FillNvlinkFromNvml(std::vector<GpuLocality>* gpus) {
  DlHandle lib{dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)};
  if (lib.h == nullptr) return false;
  auto init = Sym<nvmlReturn_t (*)()>(lib.h, "nvmlInit_v2");
  auto shutdown = Sym<nvmlReturn_t (*)()>(lib.h, "nvmlShutdown");
  auto by_bus =
      Sym<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(lib.h, "nvmlDeviceGetHandleByPciBusId_v2");
  auto state =
      Sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>(lib.h, "nvmlDeviceGetNvLinkState");
  auto remote = Sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned, NvmlPciInfo*)>(
      lib.h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!init || !shutdown || !by_bus || !state || !remote || init() != kNvmlSuccess) return false;

  for (auto& g : *gpus) {
    nvmlDevice_t dev = nullptr;
    if (by_bus(g.bus_id.c_str(), &dev) != kNvmlSuccess) continue;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      if (state(dev, link, &active) != kNvmlSuccess || active != kNvlinkFeatureEnabled) continue;
      NvmlPciInfo pci{};
      if (remote(dev, link, &pci) != kNvmlSuccess) continue;
      std::string peer =
          NormalizeBusId(std::string(pci.bus_id, strnlen(pci.bus_id, sizeof pci.bus_id)));
      bool is_gpu = false;
      for (const auto& other : *gpus) is_gpu = is_gpu || other.bus_id == peer;
      // A link whose far end is not one of our GPUs ends at an NVSwitch.
      if (is_gpu) {
        g.nvlink_peers.push_back(peer);
      } else {
        g.nvswitch = true;
      }
    }
  }
  shutdown();
  return true;
}

}  // namespace hpcml::topology::detail
