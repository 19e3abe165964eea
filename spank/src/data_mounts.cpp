#include "data_mounts.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <unordered_map>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "options.hpp"

namespace hpcml::guard {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string DecodeOctal(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() &&
        s.substr(i + 1, 3).find_first_not_of("01234567") == std::string_view::npos) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string_view ParentDir(std::string_view p) {
  std::size_t slash = p.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string_view("/") : p.substr(0, slash);
}

// Which mount holds a path: the topmost mount on its longest mounted prefix.
class MountIndex {
 public:
  explicit MountIndex(const std::vector<Mount>& mounts) {
    for (std::size_t i = 0; i < mounts.size(); ++i) top_[mounts[i].point] = i;  // later wins
  }
  // Lexical: the policy's paths are canonical, mountinfo's too.
  std::optional<std::size_t> Of(std::string_view path) const {
    for (std::string_view cur = path;; cur = ParentDir(cur)) {
      if (auto it = top_.find(std::string(cur)); it != top_.end()) return it->second;
      if (cur == "/") return std::nullopt;
    }
  }

 private:
  std::unordered_map<std::string, std::size_t> top_;
};

}  // namespace

Result<std::vector<Mount>> ParseMountInfo(std::string_view text) {
  std::vector<Mount> mounts;
  int line_no = 0;
  for (std::string_view line : SplitFields(text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the
    // device is field 3, the mount point field 5.
    std::vector<std::string_view> f = SplitFields(line, ' ');
    if (f.size() < 5 || f[2].find(':') == std::string_view::npos || f[4].empty() || f[4][0] != '/')
      return InvalidArgument("mountinfo line {}: expected 'id parent major:minor root point ...'",
                             line_no);
    mounts.push_back(Mount{DecodeOctal(f[4]), std::string(f[2])});
  }
  return mounts;
}

Result<std::optional<std::string>> ReadZoneMarkerFile(const std::string& mount_point) {
  UniqueFd dir(::open(mount_point.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return ErrnoError("zone marker: " + mount_point, errno);
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const std::string path = (mount_point == "/" ? "" : mount_point) + "/" + kZoneMarker;
  long fd = ::syscall(SYS_openat2, dir.get(), kZoneMarker, &how, sizeof how);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoError("zone marker " + path, errno);
  }
  UniqueFd marker(static_cast<int>(fd));
  struct stat st {};
  if (::fstat(marker.get(), &st) != 0) return ErrnoError("zone marker " + path, errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0 || st.st_size > 256)
    return PermissionDenied(
        "zone marker {}: not a root-owned regular file writable only by root (of at most 256 "
        "bytes)",
        path);
  char buf[257];
  ssize_t n = ::pread(marker.get(), buf, sizeof buf - 1, 0);
  if (n < 0) return ErrnoError("zone marker " + path, errno);
  std::string_view text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  std::string zone(TrimBlanks(text));
  HPCML_RETURN_IF_ERROR(ValidateName("zone marker " + path, zone));
  return std::optional<std::string>(std::move(zone));
}

DatasetsByMount DatasetsOnMounts(const Policy& policy, const std::vector<Mount>& mounts) {
  const DatasetTable& table = policy.dataset_table();
  // An entry is on the deepest mount at or above it: the entries strictly
  // below a mount point are one range of the table (in path order), less
  // the ranges of the mount points below it. Each zone's first entry in what
  // is left is one binary search (DatasetTable::NextInZone): the cost grows
  // with the mounts and zones, not with the policy.
  struct Claim {
    std::string_view point;
    std::size_t mount;                // the last mount at the point
    std::uint32_t lo, hi;             // the entries strictly below the point
    std::optional<std::uint32_t> at;  // an exact entry at the point
  };
  std::map<std::string_view, std::size_t> top;
  for (std::size_t i = 0; i < mounts.size(); ++i) top[mounts[i].point] = i;
  std::vector<Claim> claims;
  for (const auto& [point, i] : top) {
    std::string lo(point);
    if (lo.back() != '/') lo += '/';  // below it: [point/, point0)
    std::string hi = lo;
    hi.back() = '0';
    Claim c{point, i, table.LowerBound(lo), table.LowerBound(hi), std::nullopt};
    // A prefix entry at the point is in its directory: the mount above.
    if (std::uint32_t k = table.LowerBound(point);
        k < table.size() && table.PathAt(k) == point && !table.at(k).string_prefix)
      c.at = k;
    claims.push_back(c);
  }
  auto strictly_below = [](std::string_view p, std::string_view dir) {
    return dir == "/" ? p != "/"
                      : p.size() > dir.size() && p.starts_with(dir) && p[dir.size()] == '/';
  };
  DatasetsByMount holding;
  for (const Claim& c : claims) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> holes, owned;
    for (const Claim& d : claims) {
      if (!strictly_below(d.point, c.point)) continue;
      holes.emplace_back(d.lo, d.hi);
      if (d.at) holes.emplace_back(*d.at, *d.at + 1);
    }
    std::sort(holes.begin(), holes.end());
    if (c.at) owned.emplace_back(*c.at, *c.at + 1);
    std::uint32_t from = c.lo;
    for (auto [a, b] : holes) {
      if (a > from) owned.emplace_back(from, a);
      from = std::max(from, b);
    }
    if (from < c.hi) owned.emplace_back(from, c.hi);
    for (std::uint32_t z = 0; z < table.zone_count(); ++z)
      for (auto [a, b] : owned)
        if (std::uint32_t k = table.NextInZone(z, a); k < b) {
          holding[c.mount].try_emplace(std::string(table.ZoneName(z)), table.at(k));
          break;
        }
  }
  const MountIndex index(mounts);
  for (std::size_t i = 0; i < mounts.size(); ++i)
    if (auto e = policy.MatchDataset(mounts[i].point); e && index.Of(mounts[i].point) == i)
      holding[i].try_emplace(std::string(e->zone), *e);
  return holding;
}

Status CheckDataMounts(const Policy& policy, std::string_view node_zone,
                       const std::vector<Mount>& mounts,
                       const std::vector<std::string>& user_writable,
                       const ReadZoneMarker& read_marker) {
  const MountIndex index(mounts);
  const DatasetsByMount holding = DatasetsOnMounts(policy, mounts);

  std::vector<std::size_t> own;  // marked mounts of this node's zone
  for (const auto& [i, zones] : holding) {
    const Mount& m = mounts[i];
    HPCML_ASSIGN_OR_RETURN(std::optional<std::string> marker, read_marker(m.point));
    // Another zone's dataset path is, on this node, at most an empty
    // directory of the file system above it: a mount there, marked or not
    // (a subdirectory of its storage shows no marker), is its storage.
    std::optional<DatasetEntry> at = policy.MatchDataset(m.point);
    if (at && at->zone != node_zone && (!marker || *marker == node_zone))
      return FailedPrecondition(
          "a file system is mounted at {}, within zone {}'s dataset {}, on this node of zone {}: "
          "another zone's storage must not be mounted here",
          m.point, at->zone, at->path, node_zone);
    if (!marker) {
      if (auto z = zones.find(node_zone); z != zones.end())
        return FailedPrecondition(
            "dataset {} (zone {}, this node's zone) is on the file system mounted at {}, which "
            "has no zone marker {}: each data file system's root must name its zone",
            z->second.path, node_zone, m.point, kZoneMarker);
      continue;  // another zone's storage, not mounted here
    }
    if (*marker != node_zone)
      return FailedPrecondition(
          "zone {}'s data file system (mounted at {}, its marker says so) is mounted on this node "
          "of zone {}: a node may hold only its own zone's data (dataset {})",
          *marker, m.point, node_zone, zones.begin()->second.path);
    for (const auto& [zone, e] : zones)
      if (zone != *marker)
        return FailedPrecondition(
            "dataset {} is in zone {} by the policy but lies on zone {}'s file system (mounted at "
            "{})",
            e.path, zone, *marker, m.point);
    own.push_back(i);
  }
  for (const std::string& w : user_writable) {
    auto wi = index.Of(w);
    if (!wi) continue;
    for (std::size_t i : own)
      if (mounts[i].device == mounts[*wi].device)
        return FailedPrecondition(
            "zone {}'s data file system (mounted at {}) is also the file system of {}, which "
            "users can write: a hard link made there would carry its data past the view",
            node_zone, mounts[i].point, w);
  }
  return Status::Ok();
}

}  // namespace hpcml::guard
