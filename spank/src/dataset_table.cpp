// The block's layout (native byte order, every field a u32; the compiled
// cache's version covers it):
//   head      count, exact_slots, dir_slots, dirs, prefix_list, zones,
//             arena_size, a zero word
//   records   count x {path_off, path_len, zone_off, zone_len, class_off,
//             class_len, line, flags (1: a prefix entry)}, sorted by path
//             (an exact entry before a prefix entry of the same path)
//   exact     exact_slots (0 or a power of two, more than the exact
//             entries) record positions, kNone when empty; linear probing
//             from Hash(path)
//   dir_slots dir_slots (the same rule) indexes into dirs, from Hash(dir)
//   dirs      dirs x {dir_off, dir_len, first, count}: a directory holding
//             prefix entries and their positions prefix_list[first, +count)
//   prefix_list
//   zones     zones x {zone_off, zone_len, first, count}: a zone and its
//             entries' positions zone_list[first, +count), in path order
//   zone_list count positions
//   arena     the strings; offsets above are into it
// Fields are read with memcpy: the block may lie at any address.
#include "hpcml/guard/dataset_table.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace hpcml::guard {
namespace {

constexpr std::uint32_t kNone = UINT32_MAX;
constexpr std::size_t kHeadWords = 8, kRecordWords = 8, kDirWords = 4;

enum Rec : std::size_t {
  kPathOff,
  kPathLen,
  kZoneOff,
  kZoneLen,
  kClassOff,
  kClassLen,
  kLine,
  kFlags
};
enum Dir : std::size_t { kDirOff, kDirLen, kFirst, kCount };

// FNV-1a: stored indexes are probed in other processes, so the hash is fixed
// here rather than left to std::hash.
std::uint64_t Hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3;
  return h;
}

std::string_view Parent(std::string_view p) {
  std::size_t slash = p.rfind('/');
  if (slash == 0 || slash == std::string_view::npos) return "/";
  return p.substr(0, slash);
}

std::uint32_t SlotsFor(std::size_t items) {
  if (items == 0) return 0;
  std::uint32_t slots = 16;
  while (slots < 2 * items) slots *= 2;
  return slots;
}

std::uint32_t Word(std::string_view bytes, std::size_t at) {
  std::uint32_t v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

class Words {
 public:
  void Put(std::uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string DatasetTable::Build(std::vector<DatasetSpec> entries) {
  std::sort(entries.begin(), entries.end(), [](const DatasetSpec& a, const DatasetSpec& b) {
    return std::tie(a.path, a.string_prefix) < std::tie(b.path, b.string_prefix);
  });
  // The arena: every path, and each zone and classification once.
  std::string arena;
  std::map<std::string, std::uint32_t, std::less<>> interned;
  auto intern = [&](const std::string& s) {
    auto [it, added] = interned.try_emplace(s, static_cast<std::uint32_t>(arena.size()));
    if (added) arena += s;
    return it->second;
  };
  std::vector<std::uint32_t> path_off(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    path_off[i] = static_cast<std::uint32_t>(arena.size());
    arena += entries[i].path;
  }
  const auto n = static_cast<std::uint32_t>(entries.size());

  std::size_t exact_count = 0;
  std::map<std::string_view, std::vector<std::uint32_t>> by_dir;  // prefix entries by directory
  for (std::uint32_t i = 0; i < n; ++i) {
    if (entries[i].string_prefix)
      by_dir[Parent(entries[i].path)].push_back(i);
    else
      ++exact_count;
  }
  std::vector<std::uint32_t> exact(SlotsFor(exact_count), kNone);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (entries[i].string_prefix) continue;
    const std::size_t mask = exact.size() - 1;
    std::size_t slot = Hash(entries[i].path) & mask;
    while (exact[slot] != kNone) slot = (slot + 1) & mask;
    exact[slot] = i;
  }
  std::vector<std::uint32_t> dir_slots(SlotsFor(by_dir.size()), kNone), dirs, prefix_list;
  for (const auto& [dir, members] : by_dir) {
    const auto d = static_cast<std::uint32_t>(dirs.size() / kDirWords);
    // The directory's text is the start of its first member's path.
    dirs.insert(dirs.end(), {path_off[members[0]], static_cast<std::uint32_t>(dir.size()),
                             static_cast<std::uint32_t>(prefix_list.size()),
                             static_cast<std::uint32_t>(members.size())});
    prefix_list.insert(prefix_list.end(), members.begin(), members.end());
    const std::size_t mask = dir_slots.size() - 1;
    std::size_t slot = Hash(dir) & mask;
    while (dir_slots[slot] != kNone) slot = (slot + 1) & mask;
    dir_slots[slot] = d;
  }

  // Each zone's entries, in path order (by the zone's arena offset).
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_zone;
  std::vector<std::uint32_t> records;
  records.reserve(std::size_t{n} * kRecordWords);
  for (std::uint32_t i = 0; i < n; ++i) {
    const DatasetSpec& e = entries[i];
    records.insert(records.end(),
                   {path_off[i], static_cast<std::uint32_t>(e.path.size()), intern(e.zone),
                    static_cast<std::uint32_t>(e.zone.size()), intern(e.classification),
                    static_cast<std::uint32_t>(e.classification.size()),
                    static_cast<std::uint32_t>(e.line), e.string_prefix ? 1u : 0u});
    by_zone[records[std::size_t{i} * kRecordWords + kZoneOff]].push_back(i);
  }
  std::vector<std::uint32_t> zones, zone_list;
  for (const auto& [off, members] : by_zone) {
    zones.insert(zones.end(), {off, static_cast<std::uint32_t>(entries[members[0]].zone.size()),
                               static_cast<std::uint32_t>(zone_list.size()),
                               static_cast<std::uint32_t>(members.size())});
    zone_list.insert(zone_list.end(), members.begin(), members.end());
  }
  Words w;
  for (std::size_t v : {std::size_t{n}, exact.size(), dir_slots.size(), dirs.size() / kDirWords,
                        prefix_list.size(), zones.size() / kDirWords, arena.size(), std::size_t{0}})
    w.Put(static_cast<std::uint32_t>(v));
  for (const auto* section :
       {&records, &exact, &dir_slots, &dirs, &prefix_list, &zones, &zone_list})
    for (std::uint32_t v : *section) w.Put(v);
  w.out() += arena;
  return std::move(w.out());
}

Result<DatasetTable> DatasetTable::Open(std::string_view bytes, std::shared_ptr<const void> keep) {
  constexpr std::size_t kW = sizeof(std::uint32_t);
  if (bytes.size() < kHeadWords * kW) return Corrupt("dataset table: shorter than its head");
  DatasetTable t;
  t.keep_ = std::move(keep);
  t.bytes_ = bytes;
  t.count_ = Word(bytes, 0);
  t.exact_slots_ = Word(bytes, kW);
  t.dir_slots_ = Word(bytes, 2 * kW);
  t.dirs_ = Word(bytes, 3 * kW);
  t.prefix_list_ = Word(bytes, 4 * kW);
  t.zones_ = Word(bytes, 5 * kW);
  t.arena_size_ = Word(bytes, 6 * kW);
  auto power_of_two = [](std::uint32_t v) { return (v & (v - 1)) == 0; };
  if (!power_of_two(t.exact_slots_) || !power_of_two(t.dir_slots_))
    return Corrupt("dataset table: index sizes {} and {} are not powers of two", t.exact_slots_,
                   t.dir_slots_);
  // 64-bit sums of 32-bit counts: no overflow.
  t.records_at_ = kHeadWords * kW;
  t.exact_at_ = t.records_at_ + std::uint64_t{t.count_} * kRecordWords * kW;
  t.dir_slots_at_ = t.exact_at_ + std::uint64_t{t.exact_slots_} * kW;
  t.dirs_at_ = t.dir_slots_at_ + std::uint64_t{t.dir_slots_} * kW;
  t.prefix_list_at_ = t.dirs_at_ + std::uint64_t{t.dirs_} * kDirWords * kW;
  t.zones_at_ = t.prefix_list_at_ + std::uint64_t{t.prefix_list_} * kW;
  t.zone_list_at_ = t.zones_at_ + std::uint64_t{t.zones_} * kDirWords * kW;
  t.arena_at_ = t.zone_list_at_ + std::uint64_t{t.count_} * kW;
  if (t.arena_at_ + t.arena_size_ != bytes.size())
    return Corrupt("dataset table: {} bytes, its head says {}", bytes.size(),
                   t.arena_at_ + t.arena_size_);
  return t;
}

DatasetTable DatasetTable::FromSpecs(std::vector<DatasetSpec> entries) {
  auto block = std::make_shared<const std::string>(Build(std::move(entries)));
  auto t = Open(*block, block);
  return std::move(t).value();  // Build's own output
}

std::string_view DatasetTable::Str(std::uint32_t off, std::uint32_t len) const {
  if (off > arena_size_) return {};
  return bytes_.substr(arena_at_ + off, std::min<std::size_t>(len, arena_size_ - off));
}

std::string_view DatasetTable::PathAt(std::uint32_t i) const {
  if (i >= count_) return {};
  const std::size_t at = records_at_ + std::size_t{i} * kRecordWords * sizeof(std::uint32_t);
  return Str(Word(bytes_, at + kPathOff * sizeof(std::uint32_t)),
             Word(bytes_, at + kPathLen * sizeof(std::uint32_t)));
}

DatasetEntry DatasetTable::at(std::uint32_t i) const {
  if (i >= count_) return DatasetEntry{{}, false, {}, {}, 0, i};  // a damaged index
  const std::size_t at = records_at_ + std::size_t{i} * kRecordWords * sizeof(std::uint32_t);
  auto f = [&](Rec r) { return Word(bytes_, at + r * sizeof(std::uint32_t)); };
  auto str = [&](Rec off, Rec len) { return Str(f(off), f(len)); };
  return DatasetEntry{str(kPathOff, kPathLen),
                      f(kFlags) == 1,
                      str(kZoneOff, kZoneLen),
                      str(kClassOff, kClassLen),
                      static_cast<int>(f(kLine) & 0x7fffffff),
                      i};
}

std::optional<DatasetEntry> DatasetTable::Exact(std::string_view path) const {
  const std::uint32_t mask = exact_slots_ - 1;
  std::uint32_t slot = static_cast<std::uint32_t>(Hash(path)) & mask;
  // At most one lap: a damaged index without an empty slot ends too.
  for (std::uint32_t probes = 0; probes < exact_slots_; ++probes, slot = (slot + 1) & mask) {
    std::uint32_t i = Word(bytes_, exact_at_ + slot * sizeof(std::uint32_t));
    if (i == kNone) break;
    if (i < count_ && PathAt(i) == path) {
      DatasetEntry e = at(i);
      if (!e.string_prefix) return e;
    }
  }
  return std::nullopt;
}

std::optional<DatasetEntry> DatasetTable::LongestPrefixIn(std::string_view dir,
                                                          std::string_view path) const {
  constexpr std::size_t kW = sizeof(std::uint32_t);
  const std::uint32_t mask = dir_slots_ - 1;
  std::uint32_t slot = static_cast<std::uint32_t>(Hash(dir)) & mask;
  for (std::uint32_t probes = 0; probes < dir_slots_; ++probes, slot = (slot + 1) & mask) {
    std::uint32_t d = Word(bytes_, dir_slots_at_ + slot * kW);
    if (d == kNone) break;
    if (d >= dirs_) continue;
    auto f = [&](Dir r) { return Word(bytes_, dirs_at_ + (std::size_t{d} * kDirWords + r) * kW); };
    if (Str(f(kDirOff), f(kDirLen)) != dir) continue;
    std::optional<DatasetEntry> best;
    const std::uint32_t first = std::min(f(kFirst), prefix_list_);
    const std::uint32_t end = first + std::min(f(kCount), prefix_list_ - first);
    for (std::uint32_t k = first; k < end; ++k) {
      DatasetEntry e = at(Word(bytes_, prefix_list_at_ + std::size_t{k} * kW));
      if (e.string_prefix && !e.path.empty() && path.starts_with(e.path) &&
          (!best || e.path.size() > best->path.size()))
        best = e;
    }
    return best;
  }
  return std::nullopt;
}

std::uint32_t DatasetTable::LowerBound(std::string_view path) const {
  std::uint32_t lo = 0, hi = count_;
  while (lo < hi) {
    std::uint32_t mid = lo + (hi - lo) / 2;
    if (PathAt(mid) < path)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

std::string_view DatasetTable::ZoneName(std::uint32_t k) const {
  constexpr std::size_t kW = sizeof(std::uint32_t);
  if (k >= zones_) return {};
  const std::size_t at = zones_at_ + std::size_t{k} * kDirWords * kW;
  return Str(Word(bytes_, at + kDirOff * kW), Word(bytes_, at + kDirLen * kW));
}

std::uint32_t DatasetTable::NextInZone(std::uint32_t k, std::uint32_t from) const {
  constexpr std::size_t kW = sizeof(std::uint32_t);
  if (k >= zones_) return count_;
  const std::size_t at = zones_at_ + std::size_t{k} * kDirWords * kW;
  // The zone's run of zone_list (count_ positions), cut to it.
  std::uint32_t lo = std::min(Word(bytes_, at + kFirst * kW), count_);
  std::uint32_t hi = lo + std::min(Word(bytes_, at + kCount * kW), count_ - lo);
  const std::uint32_t end = hi;
  while (lo < hi) {
    std::uint32_t mid = lo + (hi - lo) / 2;
    if (Word(bytes_, zone_list_at_ + std::size_t{mid} * kW) < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < end ? std::min(Word(bytes_, zone_list_at_ + std::size_t{lo} * kW), count_) : count_;
}

DatasetEntry DatasetRange::Iterator::operator*() const {
  return t_->at(i_);
}

DatasetEntry DatasetRange::operator[](std::size_t i) const {
  return t_->at(lo_ + static_cast<std::uint32_t>(i));
}

bool operator==(const DatasetRange& a, const DatasetRange& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace hpcml::guard
