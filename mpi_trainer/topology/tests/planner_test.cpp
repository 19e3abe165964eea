#include "hpcml/topology/planner.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace hpcml::topology {
namespace {

ClusterTopology Cluster(const char* file, int nodes) {
  auto n = ReadTopologyFile(std::string(HPCML_TOPOLOGY_FIXTURES) + "/" + file);
  EXPECT_TRUE(n.ok()) << n.status().message();
  ClusterTopology c;
  for (int i = 0; i < nodes; ++i) {
    NodeTopology copy = *n;
    copy.hostname = fmt::format("n{}", i);
    c.nodes.push_back(copy);
  }
  return c;
}

PlanRequest Request(int world = 0) {
  PlanRequest r;
  r.world = world;
  r.model.widths = {1024, 8192, 8192, 8192, 8192, 1024};  // 5 layers, 2 Megatron pairs
  r.model.global_batch = 512;
  r.model.microbatches = 8;
  return r;
}

LinkClass LinkBetween(const ClusterTopology& c, const RankPlacement& a, const RankPlacement& b) {
  if (a.node != b.node) return LinkClass::kNetwork;
  return c.nodes[static_cast<size_t>(a.node)].Link(a.gpu, b.gpu);
}

// The slowest link inside each tensor group of the plan.
LinkClass WorstTpLink(const ClusterTopology& c, const Plan& p) {
  LinkClass worst = LinkClass::kSelf;
  for (size_t r = 0; r < p.ranks.size(); r += static_cast<size_t>(p.tp)) {
    for (int i = 0; i < p.tp; ++i) {
      for (int j = i + 1; j < p.tp; ++j) {
        worst = std::max(worst, LinkBetween(c, p.ranks[r + static_cast<size_t>(i)],
                                            p.ranks[r + static_cast<size_t>(j)]));
      }
    }
  }
  return worst;
}

// Size of the largest NVLink clique a tp group can use on one node.
int NvlinkDomain(const NodeTopology& n) {
  int best = 1;
  for (int a = 0; a < n.num_gpus(); ++a) {
    int k = 1;
    for (int b = 0; b < n.num_gpus(); ++b) k += (a != b && n.Link(a, b) == LinkClass::kNvlink);
    best = std::max(best, k);
  }
  return best;
}

struct Fixture {
  const char* file;
  int nodes;
};

class AllFixtures : public ::testing::TestWithParam<Fixture> {};

// Every shape the planner accepts, with tp and pp fixed: tensor groups stay in
// NVLink when they fit in it; pipeline neighbours are on the same or the next
// node; ranks own disjoint cores on each node.
TEST_P(AllFixtures, PlacementInvariants) {
  ClusterTopology c = Cluster(GetParam().file, GetParam().nodes);
  int world = c.total_gpus();
  int domain = NvlinkDomain(c.nodes[0]);
  int checked = 0;
  for (int tp = 1; tp <= world; tp *= 2) {
    for (int pp = 1; pp <= world / tp; pp *= 2) {
      PlanRequest req = Request();
      req.tp = tp;
      req.pp = pp;
      auto plan = MakePlan(c, req);
      if (!plan.ok()) continue;  // e.g. more stages than blocks
      ++checked;
      ASSERT_EQ(plan->tp, tp);
      ASSERT_EQ(plan->pp, pp);
      ASSERT_EQ(static_cast<int>(plan->ranks.size()), world);
      if (tp <= domain) {
        EXPECT_EQ(WorstTpLink(c, *plan), tp == 1 ? LinkClass::kSelf : LinkClass::kNvlink)
            << GetParam().file << " x" << GetParam().nodes << " tp=" << tp << " pp=" << pp;
      }
      for (const auto& r : plan->ranks) {
        EXPECT_EQ(r.rank, (r.dp_idx * pp + r.pp_idx) * tp + r.tp_idx);  // tp innermost
        if (r.pp_idx + 1 < pp) {
          const auto& next = plan->ranks[static_cast<size_t>(r.rank + tp)];
          EXPECT_EQ(next.pp_idx, r.pp_idx + 1);
          // A tensor group wider than a node spans tp/gpus_per_node nodes; the
          // next stage's group then starts that many nodes on.
          int span = std::max(1, tp / c.nodes[0].num_gpus());
          EXPECT_LE(std::abs(next.node - r.node), span)
              << "stages " << r.pp_idx << "," << next.pp_idx;
        }
      }
      // Devices and cores are not shared between ranks of one node.
      for (size_t a = 0; a < plan->ranks.size(); ++a) {
        for (size_t b = a + 1; b < plan->ranks.size(); ++b) {
          const auto& x = plan->ranks[a];
          const auto& y = plan->ranks[b];
          if (x.node != y.node) continue;
          EXPECT_NE(x.gpu, y.gpu);
          for (int core : x.cpus) EXPECT_EQ(std::count(y.cpus.begin(), y.cpus.end(), core), 0);
        }
      }
    }
  }
  EXPECT_GT(checked, 2);
}

INSTANTIATE_TEST_SUITE_P(Topologies, AllFixtures,
                         ::testing::Values(Fixture{"dgx-h100.xml", 1}, Fixture{"dgx-h100.xml", 2},
                                           Fixture{"dgx-h100.xml", 4},
                                           Fixture{"pcie4-nvlink-pairs.xml", 1},
                                           Fixture{"pcie4-nvlink-pairs.xml", 2},
                                           Fixture{"pcie4-nvlink-pairs.xml", 4}));

TEST(Planner, PcieBoxPairsTheNvlinkGpus) {
  ClusterTopology c = Cluster("pcie4-nvlink-pairs.xml", 1);
  PlanRequest req = Request();
  req.tp = 2;
  auto plan = MakePlan(c, req);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Ranks 0,1 form a tensor group on GPUs 0 and 2 (the NVLink pair), not 0 and 1.
  EXPECT_EQ(plan->ranks[0].gpu, 0);
  EXPECT_EQ(plan->ranks[1].gpu, 2);
  EXPECT_EQ(plan->ranks[2].gpu, 1);
  EXPECT_EQ(plan->ranks[3].gpu, 3);
}

TEST(Planner, KeepsTensorParallelInsideNodesAndDataParallelOutermost) {
  ClusterTopology c = Cluster("dgx-h100.xml", 4);
  auto plan = MakePlan(c, Request());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_LE(plan->tp, 8);
  EXPECT_NE(plan->cost.tp_link, LinkClass::kNetwork);
  EXPECT_EQ(plan->dp * plan->pp * plan->tp, 32);
  EXPECT_NE(plan->reason.find("Runner-up"), std::string::npos) << plan->reason;
  // The chosen plan is at least as cheap as every other accepted candidate.
  for (const auto& cand : plan->candidates) {
    if (cand.rejected.empty()) {
      EXPECT_LE(plan->cost.total(), cand.cost.total() * (1 + 1e-12));
    }
  }
}

TEST(Planner, TensorParallelOverNetworkCostsMore) {
  ClusterTopology c = Cluster("dgx-h100.xml", 2);
  auto inside = EstimateCost(c, Request(), 2, 1, 8);
  auto across = EstimateCost(c, Request(), 1, 1, 16);
  ASSERT_TRUE(inside.ok()) << inside.status().message();
  ASSERT_TRUE(across.ok()) << across.status().message();
  EXPECT_EQ(inside->tp_link, LinkClass::kNvlink);
  EXPECT_EQ(across->tp_link, LinkClass::kNetwork);
  EXPECT_GT(across->tp_s, inside->tp_s);
}

TEST(Planner, ChosenTensorGroupsStayInTheNvlinkDomain) {
  // On the PCIe box only pairs are NVLinked: an automatic plan never uses tp=4.
  ClusterTopology c = Cluster("pcie4-nvlink-pairs.xml", 2);
  auto plan = MakePlan(c, Request());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_LE(plan->tp, 2);
  bool saw_reason = false;
  for (const auto& cand : plan->candidates) {
    if (cand.tp == 4) {
      EXPECT_NE(cand.rejected.find("NVLink domain of 2"), std::string::npos) << cand.rejected;
      saw_reason = true;
    }
  }
  EXPECT_TRUE(saw_reason);
  // Fixed by the user, tp=4 is honoured (and priced over the slower links).
  PlanRequest req = Request();
  req.tp = 4;
  auto fixed = MakePlan(c, req);
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  EXPECT_EQ(fixed->tp, 4);
  EXPECT_EQ(fixed->cost.tp_link, LinkClass::kInterSocket);
}

TEST(Planner, RespectsFixedDegrees) {
  ClusterTopology c = Cluster("dgx-h100.xml", 2);
  PlanRequest req = Request();
  req.dp = 4;
  auto plan = MakePlan(c, req);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->dp, 4);
  EXPECT_EQ(plan->pp * plan->tp, 4);
}

TEST(Planner, RefusesImpossibleRequests) {
  ClusterTopology c = Cluster("pcie4-nvlink-pairs.xml", 1);
  auto expect_error = [&](PlanRequest req, const std::string& needle) {
    auto plan = MakePlan(c, req);
    ASSERT_FALSE(plan.ok()) << needle;
    EXPECT_NE(plan.status().message().find(needle), std::string::npos) << plan.status().message();
  };
  expect_error(Request(8), "8 ranks requested but the 1 node(s) have 4 GPUs");
  PlanRequest r = Request();
  r.dp = 2, r.pp = 1, r.tp = 1;
  expect_error(r, "= 2 but the world has 4 ranks");
  r = Request();
  r.tp = 3;
  expect_error(r, "does not divide the world");
  r = Request();
  r.model.widths = {10, 6, 6, 2};
  r.tp = 4;
  expect_error(r, "tp=4 does not divide hidden width 6");
  r = Request();
  r.model.widths = {10, 8, 2};  // 2 layers
  r.pp = 4;
  expect_error(r, "pp=4 exceeds");
  r = Request();
  r.model.widths = {10};
  expect_error(r, "at least an input and an output");
}

TEST(Planner, CpuOnlyNodesShareCoresEvenly) {
  ClusterTopology c = Cluster("cpu-only.xml", 2);
  auto plan = MakePlan(c, Request(8));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->ranks.size(), 8u);
  for (const auto& r : plan->ranks) {
    EXPECT_EQ(r.gpu, -1);
    EXPECT_EQ(r.cpus.size(), 8u);  // 32 cores / 4 ranks per node
    EXPECT_EQ(r.node, r.rank / 4);
  }
  EXPECT_NE(FormatPlan(c, *plan).find("plan: dp="), std::string::npos);
}

}  // namespace
}  // namespace hpcml::topology
