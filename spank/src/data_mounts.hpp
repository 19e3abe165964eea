// What residency relies on below the guard, checked on the node at every
// step: the storage of one zone is not mounted on another zone's nodes, and
// no data file system is one users can write elsewhere (a hard link made
// there would carry data past the view, where no dataset covers it).
//
// The model: each data file system's root, as mounted, holds a zone marker
// `.hpcml-zone` (root-owned, writable by nobody else, the zone's name). From
// the node's mountinfo (no stat of any mount, so a dead file server outside
// the data cannot stall a launch), on a node of zone X:
// 1. a mount that holds a policy dataset, or lies inside one, and has a
//    marker must name X, and the zone of every dataset on it;
// 2. every dataset of zone X lies on a mount with a marker (else nothing
//    says where its storage is), and no mount at all lies at or within a
//    dataset of another zone (its storage, even unmarked);
// 3. no marked mount is the same file system (device) as the mount of any
//    path users can write (/tmp, /var/tmp, /dev/shm, the user's home).
// Datasets of other zones on unmarked mounts are their storage's empty
// mount points: the expected state.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

inline constexpr const char* kZoneMarker = ".hpcml-zone";

struct Mount {
  std::string point;   // where it is mounted, octal escapes decoded
  std::string device;  // "major:minor": the file system (bind mounts share it)
};

// The mounts of a /proc/<pid>/mountinfo text in its order (a later mount on
// the same point is over the earlier one). A malformed line is an error
// naming its number.
Result<std::vector<Mount>> ParseMountInfo(std::string_view text);

// The zone named by the marker at a mount point; nullopt when there is none.
using ReadZoneMarker =
    std::function<Result<std::optional<std::string>>(const std::string& mount_point)>;

// The marker file `<mount_point>/.hpcml-zone`, opened as the caller on that
// very mount with no symlink followed; an error when it is there but not a
// root-owned regular file writable only by root holding a valid zone name.
Result<std::optional<std::string>> ReadZoneMarkerFile(const std::string& mount_point);

// For each mount holding dataset entries, one entry of each zone on it (the
// first in path order, for messages), by mount index. An entry is on the
// deepest mount at or above it (the last mounted on that point); a mount
// at or inside an entry holds that entry too. Cost: O(mounts^2 + mounts x
// zones x log entries), independent of the entry count otherwise.
using DatasetsByMount = std::map<std::size_t, std::map<std::string, DatasetEntry, std::less<>>>;
DatasetsByMount DatasetsOnMounts(const Policy& policy, const std::vector<Mount>& mounts);

// Checks 1-3 above; the error names the mount, the zones and the dataset or
// writable path involved.
Status CheckDataMounts(const Policy& policy, std::string_view node_zone,
                       const std::vector<Mount>& mounts,
                       const std::vector<std::string>& user_writable,
                       const ReadZoneMarker& read_marker);

}  // namespace hpcml::guard
