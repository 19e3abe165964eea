// Internal: move-only owner of an hwloc topology.
#pragma once

#include <hwloc.h>

#include <string>
#include <utility>

#include "hpcml/common/status.hpp"

namespace hpcml::topology {

class HwlocTopology {
 public:
  // Loads the live machine (empty path) or an hwloc XML export.
  static Result<HwlocTopology> Load(const std::string& xml_path);

  explicit HwlocTopology(hwloc_topology_t t) noexcept : t_(t) {}
  ~HwlocTopology() {
    if (t_ != nullptr) hwloc_topology_destroy(t_);
  }
  HwlocTopology(HwlocTopology&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  HwlocTopology& operator=(HwlocTopology&& o) noexcept {
    if (this != &o) {
      if (t_ != nullptr) hwloc_topology_destroy(t_);
      t_ = std::exchange(o.t_, nullptr);
    }
    return *this;
  }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
};

}  // namespace hpcml::topology
