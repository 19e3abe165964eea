#include "hpcml/topology/topology.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace hpcml::topology {

namespace {
constexpr std::string_view kLinkNames[] = {"self",        "nvlink",       "pcie-switch",
                                           "host-bridge", "inter-socket", "network"};
}

std::string_view Name(LinkClass c) {
  return kLinkNames[static_cast<size_t>(c)];
}

Result<LinkClass> ParseLinkClass(std::string_view name) {
  for (size_t i = 0; i < std::size(kLinkNames); ++i) {
    if (kLinkNames[i] == name) return static_cast<LinkClass>(i);
  }
  return InvalidArgument(
      "unknown link class '{}' (expected nvlink, pcie-switch, host-bridge, "
      "inter-socket, network or self)",
      name);
}

int ClusterTopology::total_gpus() const {
  int n = 0;
  for (const auto& node : nodes) n += node.num_gpus();
  return n;
}

Status NodeTopology::Validate() const {
  size_t n = gpus.size();
  if (links.size() != n)
    return InvalidArgument("{}: link matrix has {} rows for {} GPUs", hostname, links.size(), n);
  for (size_t i = 0; i < n; ++i) {
    if (links[i].size() != n)
      return InvalidArgument("{}: link matrix row {} has {} entries", hostname, i, links[i].size());
    if (links[i][i] != LinkClass::kSelf)
      return InvalidArgument("{}: GPU {} not linked to itself as self", hostname, i);
    for (size_t j = 0; j < n; ++j) {
      if (links[i][j] != links[j][i])
        return InvalidArgument("{}: links {}-{} not symmetric", hostname, i, j);
    }
  }
  if (cores.empty()) return InvalidArgument("{}: no cores", hostname);
  if (core_numa.size() != cores.size())
    return InvalidArgument("{}: core NUMA list size mismatch", hostname);
  return Status::Ok();
}

std::string FormatCpuList(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> out;
  auto number = [&](std::string_view s, int* v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
  };
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t dash = part.find('-');
    int lo = 0, hi = 0;
    bool ok = dash == std::string_view::npos
                  ? number(part, &lo) && number(part, &hi)
                  : number(part.substr(0, dash), &lo) && number(part.substr(dash + 1), &hi);
    if (!ok || hi < lo || hi - lo > 65536)
      return InvalidArgument("bad CPU list element '{}'", part);
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

nlohmann::json ToJson(const NodeTopology& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : node.gpus) {
    gpus.push_back({{"index", g.index},
                    {"pci_bus_id", g.pci_bus_id},
                    {"numa_node", g.numa_node},
                    {"local_cpus", FormatCpuList(g.local_cpus)}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& row : node.links) {
    nlohmann::json r = nlohmann::json::array();
    for (LinkClass c : row) r.push_back(Name(c));
    links.push_back(r);
  }
  return {{"hostname", node.hostname},
          {"sockets", node.sockets},
          {"numa_nodes", node.numa_nodes},
          {"cores", node.cores},
          {"core_numa", node.core_numa},
          {"gpus", gpus},
          {"links", links},
          {"source", node.source}};
}

Result<NodeTopology> NodeFromJson(const nlohmann::json& j) {
  NodeTopology n;
  try {
    n.hostname = j.at("hostname").get<std::string>();
    n.sockets = j.at("sockets").get<int>();
    n.numa_nodes = j.at("numa_nodes").get<int>();
    n.cores = j.at("cores").get<std::vector<int>>();
    n.core_numa = j.at("core_numa").get<std::vector<int>>();
    n.source = j.value("source", "json");
    for (const auto& g : j.at("gpus")) {
      Gpu gpu;
      gpu.index = g.at("index").get<int>();
      gpu.pci_bus_id = g.at("pci_bus_id").get<std::string>();
      gpu.numa_node = g.at("numa_node").get<int>();
      HPCML_ASSIGN_OR_RETURN(gpu.local_cpus, ParseCpuList(g.at("local_cpus").get<std::string>()));
      n.gpus.push_back(std::move(gpu));
    }
    for (const auto& row : j.at("links")) {
      std::vector<LinkClass> r;
      for (const auto& c : row) {
        HPCML_ASSIGN_OR_RETURN(LinkClass lc, ParseLinkClass(c.get<std::string>()));
        r.push_back(lc);
      }
      n.links.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("topology JSON: {}", e.what());
  }
  HPCML_RETURN_IF_ERROR(n.Validate());
  return n;
}

}  // namespace hpcml::topology
