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

Status CheckDataMounts(const Policy& policy, std::string_view node_zone,
                       const std::vector<Mount>& mounts,
                       const std::vector<std::string>& user_writable,
                       const ReadZoneMarker& read_marker) {
  const MountIndex index(mounts);
  // Each mount holding data, with one dataset of each zone on it (for the
  // messages), in mount order.
  std::map<std::size_t, std::map<std::string, const DatasetEntry*>> holding;
  const DatasetEntry* last = nullptr;  // entries in path order: most share the last one's mount
  std::optional<std::size_t> last_mount;
  auto hold = [&](const DatasetEntry* e, std::optional<std::size_t> mount) {
    if (!mount || (last && last_mount == mount && last->zone == e->zone)) return;
    holding[*mount].try_emplace(e->zone, e);
    last = e;
    last_mount = mount;
  };
  // An entry is on the deepest mount at or above it. The mount points, the
  // deepest first, each claim the entries at or below them not yet claimed:
  // a binary search per mount point over the entries sorted by path, no
  // lookup per entry (a step's cost must not grow with the policy).
  const std::vector<const DatasetEntry*> sorted = policy.EntriesBelow("/");
  std::vector<std::optional<std::size_t>> claimed(sorted.size());
  std::map<std::string_view, std::size_t> top;  // point -> the mount seen there (the last)
  for (std::size_t i = 0; i < mounts.size(); ++i) top[mounts[i].point] = i;
  std::vector<std::pair<std::string_view, std::size_t>> points(top.begin(), top.end());
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  auto path_less = [](const DatasetEntry* e, std::string_view v) { return e->path < v; };
  for (const auto& [point, i] : points) {
    std::string lo(point);
    if (lo.back() != '/') lo += '/';  // below it: [point/, point0)
    std::string hi = lo;
    hi.back() = '0';
    auto claim = [&](std::size_t k) {
      if (!sorted[k]->string_prefix && !claimed[k]) claimed[k] = i;
    };
    auto at = std::lower_bound(sorted.begin(), sorted.end(), point, path_less);
    if (at != sorted.end() && (*at)->path == point)
      claim(static_cast<std::size_t>(at - sorted.begin()));
    for (auto it = std::lower_bound(sorted.begin(), sorted.end(), lo, path_less);
         it != sorted.end() && (*it)->path < hi; ++it)
      claim(static_cast<std::size_t>(it - sorted.begin()));
  }
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    // A prefix entry ("/data/ae/fraud-") is on its directory's mount.
    hold(sorted[k], sorted[k]->string_prefix ? index.Of(ParentDir(sorted[k]->path)) : claimed[k]);
  }
  for (std::size_t i = 0; i < mounts.size(); ++i)
    if (const DatasetEntry* e = policy.MatchDataset(mounts[i].point);
        e && index.Of(mounts[i].point) == i)
      holding[i].try_emplace(e->zone, e);

  std::vector<std::size_t> own;  // marked mounts of this node's zone
  for (const auto& [i, zones] : holding) {
    const Mount& m = mounts[i];
    HPCML_ASSIGN_OR_RETURN(std::optional<std::string> marker, read_marker(m.point));
    // Another zone's dataset path is, on this node, at most an empty
    // directory of the file system above it: a mount there, marked or not
    // (a subdirectory of its storage shows no marker), is its storage.
    const DatasetEntry* at = policy.MatchDataset(m.point);
    if (at && at->zone != node_zone && (!marker || *marker == node_zone))
      return FailedPrecondition(
          "a file system is mounted at {}, within zone {}'s dataset {}, on this node of zone {}: "
          "another zone's storage must not be mounted here",
          m.point, at->zone, at->path, node_zone);
    if (!marker) {
      if (auto z = zones.find(std::string(node_zone)); z != zones.end())
        return FailedPrecondition(
            "dataset {} (zone {}, this node's zone) is on the file system mounted at {}, which "
            "has no zone marker {}: each data file system's root must name its zone",
            z->second->path, node_zone, m.point, kZoneMarker);
      continue;  // another zone's storage, not mounted here
    }
    if (*marker != node_zone)
      return FailedPrecondition(
          "zone {}'s data file system (mounted at {}, its marker says so) is mounted on this node "
          "of zone {}: a node may hold only its own zone's data (dataset {})",
          *marker, m.point, node_zone, zones.begin()->second->path);
    for (const auto& [zone, e] : zones)
      if (zone != *marker)
        return FailedPrecondition(
            "dataset {} is in zone {} by the policy but lies on zone {}'s file system (mounted at "
            "{})",
            e->path, zone, *marker, m.point);
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
