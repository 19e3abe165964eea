// The topology of a live MPI job: every rank discovers its node with hwloc
// (and NVML) and the results are exchanged, so every rank holds the same
// ClusterTopology. Collective over `comm`.
#pragma once

#include <mpi.h>

#include <vector>

#include "hpcml/topology/planner.hpp"
#include "hpcml/topology/topology.hpp"

namespace hpcml::topology {

// One node per distinct host, in order of the host's lowest rank;
// `node_of_rank[r]` is rank r's index into it.
Result<ClusterTopology> GatherTopology(MPI_Comm comm, std::vector<int>* node_of_rank);

// The plan for the job `comm` spans: its nodes' topology gathered, then
// MakePlan (request.world 0: the size of `comm`). Collective; every rank gets
// the same answer, failures included.
struct LivePlan {
  ClusterTopology cluster;
  std::vector<int> node_of_rank;  // index into cluster.nodes, per rank of `comm`
  Plan plan;
};
Result<LivePlan> PlanLiveJob(MPI_Comm comm, PlanRequest request);

}  // namespace hpcml::topology
