// Reader for NCCL's topology XML (the format of NCCL_TOPO_FILE and
// NCCL_TOPO_DUMP_FILE). Only what placement needs is read: CPUs (NUMA
// nodes) with their affinity masks, the PCI tree, GPUs and NVLinks.
#include <pugixml.hpp>

#include <algorithm>
#include <map>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/topology/topology.hpp"
#include "links.hpp"

namespace hpcml::topology {
namespace {

// NCCL writes affinity as comma-separated 32-bit hex words, most
// significant first: "ffffffff,00000000" = CPUs 32-63.
Result<std::vector<int>> ParseAffinity(std::string_view mask) {
  const std::vector<std::string_view> words = SplitFields(mask, ',');
  std::vector<int> cpus;
  int base = 0;
  for (auto it = words.rbegin(); it != words.rend(); ++it, base += 32) {
    std::string_view w = *it;
    if (w.size() > 8 || w.empty()) return InvalidArgument("bad affinity word '{}'", w);
    unsigned long v = 0;
    for (char ch : w) {
      int d = (ch >= '0' && ch <= '9')   ? ch - '0'
              : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
              : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
                                         : -1;
      if (d < 0) return InvalidArgument("bad affinity word '{}'", w);
      v = v * 16 + static_cast<unsigned long>(d);
    }
    for (int b = 0; b < 32; ++b) {
      if (v & (1ul << b)) cpus.push_back(base + b);
    }
  }
  return cpus;
}

bool IsBridgeClass(std::string_view cls) {
  return cls.substr(0, 6) == "0x0604";
}
bool IsGpuClass(std::string_view cls) {
  return cls.substr(0, 6) == "0x0302" || cls.substr(0, 6) == "0x0300";
}

struct Walker {
  explicit Walker(const std::string& p) : path(p) {}
  const std::string& path;
  int numa = -1;
  std::vector<int> cpus;
  std::vector<detail::GpuLocality> found;
  std::vector<std::vector<int>> found_cpus;
  std::vector<int> found_dev;

  Status Walk(const pugi::xml_node& pci, std::vector<std::string>* switches) {
    std::string bus = detail::NormalizeBusId(pci.attribute("busid").as_string());
    std::string_view cls = pci.attribute("class").as_string();
    if (bus.empty() || cls.empty()) {
      return InvalidArgument("{}: <pci> at offset {} lacks busid or class", path,
                             pci.offset_debug());
    }
    if (IsGpuClass(cls)) {
      pugi::xml_node gpu = pci.child("gpu");
      if (!gpu) return Status::Ok();  // a display adapter NCCL does not use
      if (!gpu.attribute("dev")) return InvalidArgument("{}: <gpu> of {} lacks dev", path, bus);
      detail::GpuLocality g;
      g.bus_id = bus;
      g.numa_node = numa;
      g.switches = *switches;
      for (pugi::xml_node l : gpu.children("nvlink")) {
        std::string_view tclass = l.attribute("tclass").as_string();
        if (IsBridgeClass(tclass) || std::string_view(tclass).substr(0, 6) == "0x0680") {
          g.nvswitch = true;
        } else {
          g.nvlink_peers.push_back(detail::NormalizeBusId(l.attribute("target").as_string()));
        }
      }
      found.push_back(std::move(g));
      found_cpus.push_back(cpus);
      found_dev.push_back(gpu.attribute("dev").as_int());
      return Status::Ok();
    }
    bool bridge = IsBridgeClass(cls);
    if (bridge) switches->push_back(bus);
    for (pugi::xml_node child : pci.children("pci")) HPCML_RETURN_IF_ERROR(Walk(child, switches));
    if (bridge) switches->pop_back();
    return Status::Ok();
  }
};

}  // namespace

Result<NodeTopology> ReadNcclTopoXml(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(text.data(), text.size());
  if (!parsed) {
    return InvalidArgument("{}: XML error at offset {}: {}", path, parsed.offset,
                           parsed.description());
  }
  pugi::xml_node system = doc.child("system");
  if (!system)
    return InvalidArgument("{}: no <system> root element (not an NCCL topology file)", path);

  NodeTopology node;
  node.hostname = system.attribute("hostname").as_string("");
  node.source = "nccl-xml:" + path;
  Walker w(path);
  std::map<int, bool> numas;
  int sockets = 0;
  for (pugi::xml_node cpu : system.children("cpu")) {
    ++sockets;
    w.numa = cpu.attribute("numaid").as_int(-1);
    if (w.numa < 0) return InvalidArgument("{}: <cpu> #{} lacks numaid", path, sockets);
    numas[w.numa] = true;
    auto affinity = ParseAffinity(cpu.attribute("affinity").as_string(""));
    if (!affinity.ok())
      return affinity.status().WithContext(fmt::format("{}: <cpu numaid=\"{}\">", path, w.numa));
    w.cpus = std::move(affinity).value();
    for (int c : w.cpus) {
      node.cores.push_back(c);
      node.core_numa.push_back(w.numa);
    }
    std::vector<std::string> switches;
    for (pugi::xml_node pci : cpu.children("pci")) HPCML_RETURN_IF_ERROR(w.Walk(pci, &switches));
  }
  if (sockets == 0) return InvalidArgument("{}: no <cpu> elements", path);
  node.sockets = sockets;
  node.numa_nodes = static_cast<int>(numas.size());

  // GPUs in device order.
  std::vector<size_t> order(w.found.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return w.found_dev[a] < w.found_dev[b]; });
  std::vector<detail::GpuLocality> sorted;
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    if (w.found_dev[i] != static_cast<int>(k)) {
      return InvalidArgument("{}: GPU dev numbers must be 0..{} without gaps (found dev {})", path,
                             order.size() - 1, w.found_dev[i]);
    }
    Gpu g;
    g.index = static_cast<int>(k);
    g.pci_bus_id = w.found[i].bus_id;
    g.numa_node = w.found[i].numa_node;
    g.local_cpus = w.found_cpus[i];
    node.gpus.push_back(std::move(g));
    sorted.push_back(w.found[i]);
  }
  node.links = detail::ClassifyLinks(sorted);
  HPCML_RETURN_IF_ERROR(node.Validate().WithContext(path));
  return node;
}

Result<NodeTopology> ReadTopologyFile(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  pugi::xml_document doc;
  if (!doc.load_buffer(text.data(), text.size())) {
    return InvalidArgument("{}: not an XML file (expected an NCCL or hwloc topology)", path);
  }
  std::string_view root = doc.document_element().name();
  if (root == "system") return ReadNcclTopoXml(path);
  if (root == "topology") return ReadHwlocXml(path);
  return InvalidArgument("{}: root element <{}> is neither NCCL's <system> nor hwloc's <topology>",
                         path, root);
}

}  // namespace hpcml::topology
