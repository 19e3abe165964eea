// Planner scaling: MakePlan for 1..1,024 DGX H100 nodes (8 GPUs each).
// Target: under 1 s for 1,024 nodes. Printed as a ratio against that target
// and against the time for 128 nodes measured in the same run (scaling).
#include <chrono>
#include <cstdio>

#include "hpcml/topology/planner.hpp"

using namespace hpcml::topology;

static double TimePlan(const NodeTopology& node, int nodes, Plan* out) {
  ClusterTopology c;
  for (int i = 0; i < nodes; ++i) {
    NodeTopology n = node;
    n.hostname = "n" + std::to_string(i);
    c.nodes.push_back(std::move(n));
  }
  PlanRequest req;
  req.model.widths = {8192, 32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768, 8192};
  req.model.global_batch = 8192;
  req.model.microbatches = 16;
  auto t0 = std::chrono::steady_clock::now();
  auto plan = MakePlan(c, req);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!plan.ok()) {
    std::fprintf(stderr, "plan-bench: %s\n", plan.status().message().c_str());
    return -1;
  }
  *out = std::move(plan).value();
  return s;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <dgx-h100.xml>\n", argv[0]);
    return 2;
  }
  auto node = ReadTopologyFile(argv[1]);
  if (!node.ok()) {
    std::fprintf(stderr, "plan-bench: %s\n", node.status().message().c_str());
    return 1;
  }
  double t128 = 0;
  for (int nodes : {1, 16, 128, 1024}) {
    Plan plan;
    double s = TimePlan(*node, nodes, &plan);
    if (s < 0) return 1;
    if (nodes == 128) t128 = s;
    std::printf("plan-bench: %5d nodes x 8 GPUs: %8.3f ms -> dp=%d pp=%d tp=%d, %zu candidates\n",
                nodes, s * 1e3, plan.dp, plan.pp, plan.tp, plan.candidates.size());
    if (nodes == 1024) {
      std::printf(
          "plan-bench: 1024 nodes: %.3f s = %.3fx the 1 s target; %.1fx the 128-node time (8x "
          "nodes)\n",
          s, s / 1.0, s / t128);
      return s < 1.0 ? 0 : 1;
    }
  }
  return 0;
}
