// Topology from hwloc: the live node, or an hwloc XML export.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>

#include "hpcml/topology/topology.hpp"
#include "hwloc_owner.hpp"
#include "links.hpp"

namespace hpcml::topology {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;

std::vector<int> CpusOf(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i != -1; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

int NumaOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t numa =
      hwloc_get_next_obj_covering_cpuset_by_type(topo, obj->cpuset, HWLOC_OBJ_NUMANODE, nullptr);
  if (numa != nullptr) return static_cast<int>(numa->os_index);
  // NUMA nodes are memory children in hwloc 2: look at the ancestors' memory children.
  for (hwloc_obj_t a = obj; a != nullptr; a = a->parent) {
    if (a->memory_arity > 0 && a->memory_first_child->type == HWLOC_OBJ_NUMANODE) {
      return static_cast<int>(a->memory_first_child->os_index);
    }
  }
  return 0;
}

std::string BusId(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

Result<NodeTopology> FromHwloc(hwloc_topology_t topo, std::string source) {
  NodeTopology node;
  node.source = std::move(source);
  node.sockets = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
  node.numa_nodes = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
  if (const char* h = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName"))
    node.hostname = h;

  int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  hwloc_obj_type_t unit = ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  int nunits = ncores > 0 ? ncores : hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  for (int i = 0; i < nunits; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, unit, static_cast<unsigned>(i));
    hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_PU, 0);
    if (pu == nullptr) continue;
    node.cores.push_back(static_cast<int>(pu->os_index));
    node.core_numa.push_back(NumaOf(topo, core));
  }

  std::vector<detail::GpuLocality> loc;
  std::vector<std::vector<int>> cpus;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    unsigned cls = pci->attr->pcidev.class_id;
    if (pci->attr->pcidev.vendor_id != kNvidiaVendor || (cls != 0x0302 && cls != 0x0300)) continue;
    detail::GpuLocality g;
    g.bus_id = BusId(pci);
    // PCI-to-PCI bridges above the GPU are switches; host bridges are not.
    for (hwloc_obj_t a = pci->parent; a != nullptr && a->type == HWLOC_OBJ_BRIDGE; a = a->parent) {
      if (a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        g.switches.insert(g.switches.begin(), BusId(a));
      }
    }
    hwloc_obj_t host = hwloc_get_non_io_ancestor_obj(topo, pci);
    g.numa_node = NumaOf(topo, host);
    loc.push_back(std::move(g));
    cpus.push_back(CpusOf(host->cpuset));
  }
  // CUDA's PCI_BUS_ID order.
  std::vector<size_t> order(loc.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return loc[a].bus_id < loc[b].bus_id; });
  std::vector<detail::GpuLocality> sorted;
  for (size_t k = 0; k < order.size(); ++k) {
    Gpu g;
    g.index = static_cast<int>(k);
    g.pci_bus_id = loc[order[k]].bus_id;
    g.numa_node = loc[order[k]].numa_node;
    g.local_cpus = cpus[order[k]];
    node.gpus.push_back(std::move(g));
    sorted.push_back(loc[order[k]]);
  }
  if (node.source == "hwloc") detail::FillNvlinkFromNvml(&sorted);
  node.links = detail::ClassifyLinks(sorted);
  HPCML_RETURN_IF_ERROR(node.Validate());
  return node;
}

}  // namespace

Result<HwlocTopology> HwlocTopology::Load(const std::string& xml_path) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return Internal("hwloc_topology_init failed");
  HwlocTopology owner(t);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!xml_path.empty() && hwloc_topology_set_xml(t, xml_path.c_str()) != 0) {
    return InvalidArgument("{}: not a readable hwloc XML topology", xml_path);
  }
  if (hwloc_topology_load(t) != 0) {
    return Internal("hwloc_topology_load{}{} failed", xml_path.empty() ? "" : " of ", xml_path);
  }
  return owner;
}

Result<NodeTopology> DiscoverLocal() {
  HPCML_ASSIGN_OR_RETURN(HwlocTopology topo, HwlocTopology::Load(""));
  HPCML_ASSIGN_OR_RETURN(NodeTopology node, FromHwloc(topo.get(), "hwloc"));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  node.hostname = host;
  return node;
}

Result<NodeTopology> ReadHwlocXml(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(HwlocTopology topo, HwlocTopology::Load(path));
  return FromHwloc(topo.get(), "hwloc-xml:" + path);
}

}  // namespace hpcml::topology
