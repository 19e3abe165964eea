// The machine as the planner sees it: nodes, their sockets, NUMA nodes and
// cores, their GPUs with PCI locality, and the class of the fastest link
// between every pair of GPUs on a node.
//
// Sources: the live node (hwloc, plus NVML loaded at run time for NVLink),
// an NCCL topology XML file, or an hwloc XML file (for offline planning).
// Plain values: copyable, no handles, safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hpcml/common/status.hpp"

namespace hpcml::topology {

// Ordered fastest first; a comparison `a < b` means "a is faster".
enum class LinkClass {
  kSelf = 0,
  kNvlink,       // direct NVLink or through an NVSwitch
  kPcieSwitch,   // below the same PCIe switch
  kHostBridge,   // same CPU socket / host bridge
  kInterSocket,  // across the CPU interconnect (UPI, xGMI)
  kNetwork,      // different nodes
};

std::string_view Name(LinkClass c);
Result<LinkClass> ParseLinkClass(std::string_view name);

struct Gpu {
  int index = 0;                // device index on the node (CUDA ordering by PCI bus id)
  std::string pci_bus_id;       // "0000:19:00.0"
  int numa_node = -1;           // -1: unknown
  std::vector<int> local_cpus;  // OS indexes of the cores nearest to the GPU
};

struct NodeTopology {
  std::string hostname;
  int sockets = 1;
  int numa_nodes = 1;
  // OS index of the first PU of each physical core, and its NUMA node.
  std::vector<int> cores;
  std::vector<int> core_numa;
  std::vector<Gpu> gpus;
  // links[i][j]: class of the fastest path between gpus i and j.
  std::vector<std::vector<LinkClass>> links;
  std::string source;  // "hwloc", "nccl-xml:<path>", "hwloc-xml:<path>"

  LinkClass Link(int a, int b) const {
    return links[static_cast<size_t>(a)][static_cast<size_t>(b)];
  }
  int num_gpus() const { return static_cast<int>(gpus.size()); }
  Status Validate() const;
};

struct ClusterTopology {
  std::vector<NodeTopology> nodes;
  int total_gpus() const;
};

// Discovers the node this process runs on with hwloc; GPU-to-GPU NVLink from
// NVML when libnvidia-ml.so.1 can be loaded (absent is not an error: links
// then come from the PCI tree alone).
Result<NodeTopology> DiscoverLocal();

// Reads an NCCL topology XML file (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE
// format: <system><cpu numaid affinity><pci busid class>...<gpu dev>
// <nvlink target tclass count/>). Errors name the file and the element.
Result<NodeTopology> ReadNcclTopoXml(const std::string& path);

// Reads an hwloc XML export (lstopo --of xml) through hwloc itself.
Result<NodeTopology> ReadHwlocXml(const std::string& path);

// Reads a topology file: NCCL XML when its root element is <system>, hwloc
// XML when it is <topology>.
Result<NodeTopology> ReadTopologyFile(const std::string& path);

// JSON form (for gathering across nodes and for --plan output).
nlohmann::json ToJson(const NodeTopology& node);
Result<NodeTopology> NodeFromJson(const nlohmann::json& j);

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}
std::string FormatCpuList(const std::vector<int>& cpus);
Result<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace hpcml::topology
