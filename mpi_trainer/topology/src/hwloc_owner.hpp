// Internal: owners (owner.hpp) of an hwloc topology and bitmap.
#pragma once

#include <hwloc.h>

#include <string>
#include <utility>

#include "hpcml/common/owner.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::topology {

class HwlocTopology : public Owner<CloseWith<hwloc_topology_t, hwloc_topology_destroy>> {
 public:
  using Owner::Owner;
  // Loads the live machine (empty path) or an hwloc XML export.
  static Result<HwlocTopology> Load(const std::string& xml_path);
};

// An hwloc bitmap, freed with hwloc_bitmap_free.
using HwlocBitmap = Owner<CloseWith<hwloc_bitmap_t, hwloc_bitmap_free>>;

}  // namespace hpcml::topology
