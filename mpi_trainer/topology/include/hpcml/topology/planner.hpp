// The placement planner: chooses dp x pp x tp and the order of ranks on the
// machine's GPUs (or cores) so that tensor-parallel groups stay inside the
// fastest link domain, pipeline neighbours sit on the same or neighbouring
// nodes, and data parallelism is outermost.
//
// Cost model (per training step, seconds), stated so a plan can be argued with:
//   compute  = 6 * params * batch / (world * flops_per_device), inflated by
//              the pipeline bubble (1 + (pp - 1) / microbatches)
//   tp       = per microbatch, per Megatron pair: 2 all-reduces (forward and
//              backward) of microbatch x width activations over the tp group
//   pp       = per microbatch, per stage boundary: 2 point-to-point messages
//              (activation forward, gradient backward)
//   dp       = one all-reduce of this rank's parameter shard per step
// A ring all-reduce of n bytes over p ranks costs 2(p-1)(alpha + n/(p*beta))
// on its slowest link; a message costs alpha + n/beta. alpha/beta per link
// class come from LinkModel (defaults: published H100/NDR figures).
// Pure functions: no MPI, no hwloc; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/topology/topology.hpp"

namespace hpcml::topology {

struct LinkCost {
  double alpha_s = 0;         // latency per message, seconds
  double beta_bytes_s = 1e9;  // bandwidth, bytes per second
};

// alpha/beta per LinkClass (indexed by the enum value).
struct LinkModel {
  std::array<LinkCost, 6> cost;
  static LinkModel Default();
  const LinkCost& operator[](LinkClass c) const { return cost[static_cast<size_t>(c)]; }
};

// The model as the planner costs it: its layer widths and how it is trained.
struct Workload {
  std::vector<std::int64_t> widths;  // input, hidden..., output: layers = widths.size() - 1
  std::int64_t global_batch = 256;
  int microbatches = 4;
  int bytes_per_value = 2;           // activations/gradients on the wire (bf16)
  double flops_per_device = 400e12;  // sustained, per GPU (or per core on CPU)
  int num_layers() const { return static_cast<int>(widths.size()) - 1; }
  std::int64_t num_params() const;
};

struct PlanRequest {
  int world = 0;  // ranks; 0 = every GPU of the cluster (or every core on CPU-only nodes)
  // Degrees the user fixed; 0 = let the planner choose.
  int dp = 0, pp = 0, tp = 0;
  Workload model;
  LinkModel links = LinkModel::Default();
};

struct RankPlacement {
  int rank = 0;
  int node = 0;  // index into ClusterTopology::nodes
  int local_rank = 0;
  int gpu = -1;           // device index on the node; -1 on CPU-only nodes
  std::vector<int> cpus;  // cores to bind to
  int numa_node = -1;
  int dp_idx = 0, pp_idx = 0, tp_idx = 0;
};

struct CostBreakdown {
  double compute_s = 0, tp_s = 0, pp_s = 0, dp_s = 0;
  LinkClass tp_link = LinkClass::kSelf, pp_link = LinkClass::kSelf, dp_link = LinkClass::kSelf;
  double total() const { return compute_s + tp_s + pp_s + dp_s; }
};

struct Candidate {
  int dp = 1, pp = 1, tp = 1;
  CostBreakdown cost;
  std::string rejected;  // non-empty: why this shape is not allowed
};

struct Plan {
  int dp = 1, pp = 1, tp = 1;
  CostBreakdown cost;
  std::vector<RankPlacement> ranks;
  std::vector<Candidate> candidates;  // every shape considered, best first; rejected last
  std::string reason;                 // one paragraph: why this plan won
};

// Chooses the plan. Fails with a message naming the constraint when no shape
// fits (fixed degrees whose product is not the world, tp not dividing a
// width, more stages than layers, more ranks than GPUs).
// A list of layer widths as given on a command line: "4096,1024" -> {4096,
// 1024}; "" -> {}. Every item a positive integer; the error names `option`.
Result<std::vector<std::int64_t>> ParseWidths(std::string_view text, std::string_view option);

Result<Plan> MakePlan(const ClusterTopology& cluster, const PlanRequest& request);

// Cost of one given shape with the placement MakePlan would use (exposed for
// tests and the benchmark).
Result<CostBreakdown> EstimateCost(const ClusterTopology& cluster, const PlanRequest& request,
                                   int dp, int pp, int tp);

// Human-readable plan: grid, per-rank node / GPU / cores, predicted costs,
// the best rejected alternatives and why the plan won.
std::string FormatPlan(const ClusterTopology& cluster, const Plan& plan);

}  // namespace hpcml::topology
