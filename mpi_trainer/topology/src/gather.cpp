#include "hpcml/topology/gather.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/common/mpi.hpp"

namespace hpcml::topology {

Result<ClusterTopology> GatherTopology(MPI_Comm comm, std::vector<int>* node_of_rank) {
  auto local = DiscoverLocal();
  // A rank that failed sends nothing; every rank then reports the failure.
  std::string mine = local.ok() ? JsonText(ToJson(*local)) : std::string();
  const std::vector<std::string> all = AllGatherStrings(comm, mine);
  ClusterTopology cluster;
  std::map<std::string, int> index;
  node_of_rank->clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].empty()) return Unavailable("rank {} could not discover its node's topology", i);
    auto node = NodeFromJson(nlohmann::json::parse(all[i]));
    if (!node.ok()) return node.status();
    auto [it, fresh] = index.emplace(node->hostname, static_cast<int>(cluster.nodes.size()));
    if (fresh) cluster.nodes.push_back(std::move(node).value());
    node_of_rank->push_back(it->second);
  }
  return cluster;
}

Result<LivePlan> PlanLiveJob(MPI_Comm comm, PlanRequest request) {
  LivePlan live;
  HPCML_ASSIGN_OR_RETURN(live.cluster, GatherTopology(comm, &live.node_of_rank));
  if (request.world == 0) MPI_Comm_size(comm, &request.world);
  HPCML_ASSIGN_OR_RETURN(live.plan, MakePlan(live.cluster, request));
  return live;
}

}  // namespace hpcml::topology
