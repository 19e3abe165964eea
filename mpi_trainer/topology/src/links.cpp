#include "links.hpp"

#include <algorithm>
#include <cctype>

namespace hpcml::topology::detail {
namespace {

bool Lists(const GpuLocality& a, const GpuLocality& b) {
  return std::find(a.nvlink_peers.begin(), a.nvlink_peers.end(), b.bus_id) != a.nvlink_peers.end();
}

bool ShareSwitch(const GpuLocality& a, const GpuLocality& b) {
  for (const auto& s : a.switches) {
    if (std::find(b.switches.begin(), b.switches.end(), s) != b.switches.end()) return true;
  }
  return false;
}

}  // namespace

std::string NormalizeBusId(std::string id) {
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "bb:dd.f" has one colon; a full id "dddd:bb:dd.f" has two.
  if (std::count(id.begin(), id.end(), ':') == 1) id = "0000:" + id;
  // NVML reports an 8-digit domain ("00000000:19:00.0"): keep the last 4.
  auto first_colon = id.find(':');
  if (first_colon > 4) id = id.substr(first_colon - 4);
  return id;
}

std::vector<std::vector<LinkClass>> ClassifyLinks(const std::vector<GpuLocality>& gpus) {
  size_t n = gpus.size();
  std::vector<std::vector<LinkClass>> links(n, std::vector<LinkClass>(n, LinkClass::kSelf));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const auto& a = gpus[i];
      const auto& b = gpus[j];
      LinkClass c;
      if (Lists(a, b) || Lists(b, a) || (a.nvswitch && b.nvswitch)) {
        c = LinkClass::kNvlink;
      } else if (ShareSwitch(a, b)) {
        c = LinkClass::kPcieSwitch;
      } else if (a.numa_node == b.numa_node) {
        c = LinkClass::kHostBridge;
      } else {
        c = LinkClass::kInterSocket;
      }
      links[i][j] = c;
    }
  }
  return links;
}

}  // namespace hpcml::topology::detail
