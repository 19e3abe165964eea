// Internal: GPU link classification shared by every topology source
// (NCCL XML, hwloc, NVML), so they cannot disagree on what a path means.
#pragma once

#include <string>
#include <vector>

#include "hpcml/topology/topology.hpp"

namespace hpcml::topology::detail {

struct GpuLocality {
  std::string bus_id;  // normalised "0000:19:00.0"
  int numa_node = -1;
  std::vector<std::string> switches;      // PCI bridges above the GPU, outermost first
  std::vector<std::string> nvlink_peers;  // bus ids at the other end of its NVLinks
  bool nvswitch = false;                  // at least one NVLink ends at an NVSwitch
};

// links[i][j] for every pair: NVLink when one lists the other as an NVLink
// peer or both reach an NVSwitch; otherwise below a common PCI switch;
// otherwise the same NUMA node (host bridge); otherwise inter-socket.
std::vector<std::vector<LinkClass>> ClassifyLinks(const std::vector<GpuLocality>& gpus);

// Lower-case, domain-qualified PCI bus id: "19:00.0" -> "0000:19:00.0".
std::string NormalizeBusId(std::string id);

// NVLink peers from NVML (libnvidia-ml.so.1 loaded with dlopen). Fills
// nvlink_peers / nvswitch of each GPU it can query; returns false when NVML
// is not available (not an error: the PCI tree still gives link classes).
bool FillNvlinkFromNvml(std::vector<GpuLocality>* gpus);

}  // namespace hpcml::topology::detail
