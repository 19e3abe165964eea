#include "hpcml/topology/topology.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hpcml::topology {
namespace {

std::string Fixture(const char* name) {
  return std::string(HPCML_TOPOLOGY_FIXTURES) + "/" + name;
}

TEST(NcclXml, DgxH100) {
  auto n = ReadTopologyFile(Fixture("dgx-h100.xml"));
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->hostname, "dgx-h100");
  EXPECT_EQ(n->sockets, 2);
  EXPECT_EQ(n->numa_nodes, 2);
  EXPECT_EQ(n->cores.size(), 112u);
  ASSERT_EQ(n->num_gpus(), 8);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b)
      EXPECT_EQ(n->Link(a, b), a == b ? LinkClass::kSelf : LinkClass::kNvlink);
  }
  EXPECT_EQ(n->gpus[0].pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(n->gpus[0].numa_node, 0);
  EXPECT_EQ(n->gpus[7].numa_node, 1);
  EXPECT_EQ(FormatCpuList(n->gpus[7].local_cpus), "56-111");
}

TEST(NcclXml, PcieBoxWithNvlinkPairs) {
  auto n = ReadNcclTopoXml(Fixture("pcie4-nvlink-pairs.xml"));
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(n->num_gpus(), 4);
  EXPECT_EQ(n->Link(0, 2), LinkClass::kNvlink);
  EXPECT_EQ(n->Link(1, 3), LinkClass::kNvlink);
  EXPECT_EQ(n->Link(0, 1), LinkClass::kPcieSwitch);
  EXPECT_EQ(n->Link(2, 3), LinkClass::kPcieSwitch);
  EXPECT_EQ(n->Link(0, 3), LinkClass::kInterSocket);
  EXPECT_EQ(n->Link(1, 2), LinkClass::kInterSocket);
  EXPECT_EQ(FormatCpuList(n->gpus[0].local_cpus), "0-15");
}

TEST(NcclXml, CpuOnly) {
  auto n = ReadTopologyFile(Fixture("cpu-only.xml"));
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->num_gpus(), 0);
  EXPECT_EQ(n->cores.size(), 32u);
  EXPECT_EQ(n->core_numa[20], 1);
}

class BadXmlTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / fmt::format("hpcml_topo_{}.xml", ::getpid());
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(BadXmlTest, ErrorsNameTheFile) {
  std::string p = Write("<system><cpu numaid=\"0\" affinity=\"zz\"/></system>");
  auto n = ReadTopologyFile(p);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find(p), std::string::npos) << n.status().message();

  p = Write("<system><cpu affinity=\"ff\"/></system>");
  n = ReadTopologyFile(p);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("lacks numaid"), std::string::npos) << n.status().message();

  p = Write("<system><cpu numaid=\"0\" affinity=\"ff\">");
  n = ReadTopologyFile(p);
  ASSERT_FALSE(n.ok());

  p = Write("<graph/>");
  n = ReadTopologyFile(p);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("<graph>"), std::string::npos) << n.status().message();

  EXPECT_FALSE(ReadTopologyFile("/nonexistent/topo.xml").ok());
}

TEST_F(BadXmlTest, GpuNumberingMustBeDense) {
  std::string p = Write(
      "<system><cpu numaid=\"0\" affinity=\"f\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">"
      "<gpu dev=\"3\"/></pci></cpu></system>");
  auto n = ReadTopologyFile(p);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("dev"), std::string::npos) << n.status().message();
}

TEST(CpuList, FormatAndParse) {
  EXPECT_EQ(FormatCpuList({3, 0, 1, 2, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  auto v = ParseCpuList("0-3,8,10-11");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("1,,2").ok());
}

TEST(Json, RoundTrip) {
  auto n = ReadTopologyFile(Fixture("pcie4-nvlink-pairs.xml"));
  ASSERT_TRUE(n.ok());
  auto back = NodeFromJson(nlohmann::json::parse(ToJson(*n).dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->links, n->links);
  EXPECT_EQ(back->cores, n->cores);
  EXPECT_EQ(back->gpus[2].local_cpus, n->gpus[2].local_cpus);
  nlohmann::json broken = ToJson(*n);
  broken["links"][0][1] = "warp-drive";
  EXPECT_FALSE(NodeFromJson(broken).ok());
}

TEST(Live, DiscoversThisMachine) {
  auto n = DiscoverLocal();
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_FALSE(n->hostname.empty());
  EXPECT_GE(n->cores.size(), 1u);
  EXPECT_TRUE(n->Validate().ok());
}

TEST(HwlocXml, MatchesLiveDiscovery) {
  std::string path =
      std::filesystem::temp_directory_path() / fmt::format("hpcml_lstopo_{}.xml", ::getpid());
  std::string cmd = "lstopo-no-graphics --of xml --force " + path + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) GTEST_FAIL() << "lstopo-no-graphics (package hwloc) failed";
  auto from_xml = ReadTopologyFile(path);
  auto live = DiscoverLocal();
  std::filesystem::remove(path);
  ASSERT_TRUE(from_xml.ok()) << from_xml.status().message();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(from_xml->cores, live->cores);
  EXPECT_EQ(from_xml->num_gpus(), live->num_gpus());
  EXPECT_EQ(from_xml->source.rfind("hwloc-xml:", 0), 0u);
}

}  // namespace
}  // namespace hpcml::topology
