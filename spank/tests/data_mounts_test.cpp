// The data file systems a node mounts (data_mounts.hpp): the model's rules
// over mountinfo texts, and the marker file read from a real directory.

#include "data_mounts.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "test_policy.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

Policy TestPolicy() {
  auto p = ParsePolicy(testing::kPolicy, "test");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

// A mountinfo line for `point` on device `dev`.
std::string Line(int id, const std::string& dev, const std::string& point) {
  return std::to_string(id) + " 1 " + dev + " / " + point + " rw,relatime shared:1 - tmpfs x rw\n";
}

// The node's mounts: the root file system (with /tmp and home on it),
// /dev/shm, and each zone's data file system where the test puts it.
std::vector<Mount> Mounts(const std::map<std::string, std::string>& data) {
  std::string text = Line(20, "8:1", "/") + Line(21, "0:30", "/dev/shm");
  int id = 30;
  for (const auto& [point, dev] : data) text += Line(id++, dev, point);
  auto m = ParseMountInfo(text);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

ReadZoneMarker Markers(std::map<std::string, std::string> markers) {
  return [markers](const std::string& point) -> Result<std::optional<std::string>> {
    auto it = markers.find(point);
    if (it == markers.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  };
}

const std::vector<std::string> kWritable = {"/tmp", "/var/tmp", "/dev/shm", "/home/alice"};

TEST(DataMounts, ParsesMountInfoWithEscapes) {
  auto m = ParseMountInfo(
      "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw\n"
      "37 35 0:41 / /data/ae rw - tmpfs t rw\n");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].point, "/mnt two");
  EXPECT_EQ((*m)[0].device, "98:0");
  EXPECT_EQ((*m)[1].point, "/data/ae");
  auto bad = ParseMountInfo("36 35 98:0 /mnt1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos) << bad.status().message();
}

TEST(DataMounts, OwnZoneMarkedAndOtherZoneAbsentIsTheModel) {
  Policy p = TestPolicy();
  auto ae_node = Mounts({{"/data/ae", "0:40"}});  // /data/eu: an empty directory on /
  EXPECT_TRUE(CheckDataMounts(p, "ae", ae_node, kWritable, Markers({{"/data/ae", "ae"}})).ok());
  auto eu_node = Mounts({{"/data/eu", "0:41"}});
  EXPECT_TRUE(CheckDataMounts(p, "eu", eu_node, kWritable, Markers({{"/data/eu", "eu"}})).ok());
}

// Finding 3 of issue 31: another zone's storage mounted on the node.
TEST(DataMounts, AnotherZonesFileSystemOnTheNodeIsRefusedNamingBoth) {
  Policy p = TestPolicy();
  auto both = Mounts({{"/data/ae", "0:40"}, {"/data/eu", "0:41"}});
  Status st =
      CheckDataMounts(p, "ae", both, kWritable, Markers({{"/data/ae", "ae"}, {"/data/eu", "eu"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("zone eu's data file system (mounted at /data/eu"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("this node of zone ae"), std::string::npos) << st.message();
  // Mounted elsewhere, inside an ae dataset, it is found all the same.
  auto inside = Mounts({{"/data/ae", "0:40"}, {"/data/ae/x", "0:41"}});
  st = CheckDataMounts(p, "ae", inside, kWritable,
                       Markers({{"/data/ae", "ae"}, {"/data/ae/x", "eu"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/data/ae/x"), std::string::npos) << st.message();
}

// Review of issue 31: a subdirectory of eu's storage mounted at eu's path on
// an ae node shows no marker, and is found all the same.
TEST(DataMounts, AnyMountWithinAnotherZonesDatasetIsRefused) {
  Policy p = TestPolicy();
  auto m = Mounts({{"/data/ae", "0:40"}, {"/data/eu", "0:41"}});
  Status st = CheckDataMounts(p, "ae", m, kWritable, Markers({{"/data/ae", "ae"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("mounted at /data/eu, within zone eu's dataset /data/eu"),
            std::string::npos)
      << st.message();
}

TEST(DataMounts, OwnZoneDataNeedsAMarker) {
  Policy p = TestPolicy();
  // No data file system at all: /data/ae is on the root file system.
  Status st = CheckDataMounts(p, "ae", Mounts({}), kWritable, Markers({}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no zone marker"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("mounted at /,"), std::string::npos) << st.message();
}

TEST(DataMounts, AMarkerThatContradictsThePolicyIsRefused) {
  Policy p = TestPolicy();
  // eu's data root lies on ae's file system.
  auto m = Mounts({{"/data", "0:40"}});
  Status st = CheckDataMounts(p, "ae", m, kWritable, Markers({{"/data", "ae"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/data/eu is in zone eu by the policy but lies on zone ae's"),
            std::string::npos)
      << st.message();
}

TEST(DataMounts, DataSharingAFileSystemWithAWritablePlaceIsRefused) {
  Policy p = TestPolicy();
  // A bind mount of the root file system marked as ae's data: /tmp is on it.
  auto m = Mounts({{"/data/ae", "8:1"}});
  Status st = CheckDataMounts(p, "ae", m, kWritable, Markers({{"/data/ae", "ae"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("also the file system of /tmp"), std::string::npos) << st.message();
  // The user's home on the data's file system.
  auto home = Mounts({{"/data/ae", "0:40"}, {"/home", "0:40"}});
  st = CheckDataMounts(p, "ae", home, kWritable, Markers({{"/data/ae", "ae"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/home/alice"), std::string::npos) << st.message();
}

TEST(DataMounts, TheTopmostMountOnAPointDecides) {
  Policy p = TestPolicy();
  // eu's file system was mounted at /data/ae, then ae's over it.
  auto m = Mounts({});
  auto more = ParseMountInfo(Line(40, "0:41", "/data/ae") + Line(41, "0:40", "/data/ae"));
  ASSERT_TRUE(more.ok());
  m.insert(m.end(), more->begin(), more->end());
  auto markers = [](const std::string& point) -> Result<std::optional<std::string>> {
    if (point != "/data/ae") return std::optional<std::string>();
    return std::optional<std::string>("ae");
  };
  EXPECT_TRUE(CheckDataMounts(p, "ae", m, kWritable, markers).ok());
}

// DatasetsOnMounts finds each mount's zones by ranges of the entry table;
// here against the rule applied entry by entry, on random policies and
// mounts over a small tree where paths share prefixes ("/a", "/ab", "/a-x"),
// with prefix entries and several mounts on one point.
TEST(DataMounts, DatasetsOnMountsAgreesWithTheRuleEntryByEntry) {
  std::mt19937 rng(7);
  const std::vector<std::string> names = {"a", "ab", "a-x", "b"};
  auto random_path = [&](int depth) {
    std::string path;
    for (int d = 0; d < depth; ++d) path += "/" + names[rng() % names.size()];
    return path;
  };
  for (int round = 0; round < 300; ++round) {
    std::string text = "[zones.z0]\n[zones.z1]\n[zones.z2]\n";
    std::set<std::string> declared;
    for (int k = 0; k < 12; ++k) {
      std::string path = random_path(1 + static_cast<int>(rng() % 3));
      if (rng() % 4 == 0) path += "*";  // a prefix entry: "/a/ab*" matches "/a/abc"
      if (!declared.insert(path).second) continue;
      text += "[[datasets]]\npath = \"" + path + "\"\nzone = \"z" + std::to_string(rng() % 3) +
              "\"\nclassification = \"c\"\n";
    }
    auto policy = ParsePolicy(text, "random");
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    std::string info = Line(1, "8:1", "/");
    for (int m = 0; m < 6; ++m)
      info += Line(2 + m, "0:" + std::to_string(m), random_path(1 + static_cast<int>(rng() % 3)));
    auto mounts = ParseMountInfo(info);
    ASSERT_TRUE(mounts.ok());

    // The rule: an entry is on the deepest mount point that is a directory
    // above it, or its own path if it is an exact entry; the last mount there.
    std::map<std::string, std::size_t> top;
    for (std::size_t i = 0; i < mounts->size(); ++i) top[(*mounts)[i].point] = i;
    std::map<std::size_t, std::map<std::string, std::string>> want;
    for (const DatasetEntry& e : policy->datasets()) {
      std::string best;
      bool found = false;
      for (const auto& [point, i] : top) {
        const bool above = point == "/" || (e.path.starts_with(point + "/"));
        const bool at = !e.string_prefix && e.path == point;
        if ((above || at) && (!found || point.size() > best.size())) {
          best = point;
          found = true;
        }
      }
      if (found) want[top[best]].try_emplace(std::string(e.zone), std::string(e.path));
    }
    for (std::size_t i = 0; i < mounts->size(); ++i) {
      const std::string& point = (*mounts)[i].point;
      if (auto e = policy->MatchDataset(point); e && top[point] == i)
        want[i].try_emplace(std::string(e->zone), std::string(e->path));
    }
    std::map<std::size_t, std::map<std::string, std::string>> got;
    for (const auto& [i, zones] : DatasetsOnMounts(*policy, *mounts))
      for (const auto& [zone, e] : zones) got[i][zone] = std::string(e.path);
    ASSERT_EQ(got, want) << text << info;
  }
}

class ZoneMarkerFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "a marker is trusted only when root-owned: run as root";
    dir_ = fs::temp_directory_path() / ("hpcml-marker-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void WriteMarker(const std::string& text, mode_t mode) {
    std::string path = (dir_ / kZoneMarker).string();
    fs::remove(path);
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
  }
  fs::path dir_;
};

TEST_F(ZoneMarkerFileTest, ReadsATrustedMarkerAndRefusesOthers) {
  auto none = ReadZoneMarkerFile(dir_.string());
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  WriteMarker("eu\n", 0644);
  auto eu = ReadZoneMarkerFile(dir_.string());
  ASSERT_TRUE(eu.ok()) << eu.status().message();
  EXPECT_EQ(eu->value_or(""), "eu");
  WriteMarker("eu\n", 0666);  // anyone could rename the zone
  EXPECT_FALSE(ReadZoneMarkerFile(dir_.string()).ok());
  WriteMarker("e u\n", 0644);
  EXPECT_FALSE(ReadZoneMarkerFile(dir_.string()).ok());
  fs::remove(dir_ / kZoneMarker);
  fs::create_symlink("/etc/hostname", dir_ / kZoneMarker);
  EXPECT_FALSE(ReadZoneMarkerFile(dir_.string()).ok());
}

}  // namespace
}  // namespace hpcml::guard
