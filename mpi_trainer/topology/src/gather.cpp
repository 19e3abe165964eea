#include "hpcml/topology/gather.hpp"

#include <map>
#include <nlohmann/json.hpp>

namespace hpcml::topology {

Result<ClusterTopology> GatherTopology(MPI_Comm comm, std::vector<int>* node_of_rank) {
  auto local = DiscoverLocal();
  // A rank that failed sends nothing; every rank then reports the failure.
  std::string mine = local.ok() ? ToJson(*local).dump() : std::string();
  int size = 0;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), offs(static_cast<size_t>(size));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    offs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, comm);
  ClusterTopology cluster;
  std::map<std::string, int> index;
  node_of_rank->clear();
  for (int i = 0; i < size; ++i) {
    const auto n = static_cast<size_t>(lens[static_cast<size_t>(i)]);
    if (n == 0) return Unavailable("rank {} could not discover its node's topology", i);
    auto node = NodeFromJson(
        nlohmann::json::parse(all.substr(static_cast<size_t>(offs[static_cast<size_t>(i)]), n)));
    if (!node.ok()) return node.status();
    auto [it, fresh] = index.emplace(node->hostname, static_cast<int>(cluster.nodes.size()));
    if (fresh) cluster.nodes.push_back(std::move(node).value());
    node_of_rank->push_back(it->second);
  }
  return cluster;
}

}  // namespace hpcml::topology
