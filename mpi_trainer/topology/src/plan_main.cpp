// hpcml-plan: shows where the ranks of a training job would run and why.
//
//   hpcml-plan --topology dgx-h100.xml --nodes 2 --widths 4096,16384,16384,4096
//   srun --mpi=pmix -n 8 hpcml-plan --live ...   (topology of the live allocation)
//   srun --mpi=pmix -n 2 hpcml-plan --bind       (bind every rank as planned and report)
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hpcml/common/log.hpp"
#include "hpcml/topology/binding.hpp"
#include "hpcml/topology/gather.hpp"
#include "hpcml/topology/planner.hpp"

namespace {

using namespace hpcml;
using namespace hpcml::topology;

Result<std::vector<std::int64_t>> ParseWidths(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return InvalidArgument("--widths: '{}' is not a positive integer", item);
    }
  }
  if (out.size() < 2)
    return InvalidArgument("--widths: need at least input and output widths, got '{}'", text);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Logger log("hpcml-plan");
  CLI::App app{"hpcml-plan: choose dp x pp x tp and rank placement from the machine's topology"};
  std::vector<std::string> files;
  int nodes = 1;
  bool live = false, bind = false, json = false, force = false;
  std::string widths_text = "1024,4096,4096,4096,4096,1024";
  PlanRequest req;
  app.add_option("--topology", files, "NCCL or hwloc topology XML, one per node (repeatable)")
      ->check(CLI::ExistingFile);
  app.add_option("--nodes", nodes, "replicate a single --topology file to this many nodes")
      ->check(CLI::PositiveNumber);
  app.add_flag("--live", live, "plan for the nodes this job runs on (run under srun/mpirun)");
  app.add_flag("--bind", bind, "bind every rank as planned and report its cores (implies --live)");
  app.add_flag("--force-bind", force, "rebind even when the launcher already bound the ranks");
  app.add_flag("--json", json, "print the plan as JSON");
  app.add_option("--world", req.world, "ranks (default: every GPU, or the job's size with --live)");
  app.add_option("--dp", req.dp, "fix the data-parallel degree");
  app.add_option("--pp", req.pp, "fix the pipeline-parallel degree");
  app.add_option("--tp", req.tp, "fix the tensor-parallel degree");
  app.add_option("--widths", widths_text, "layer widths: input,hidden...,output")
      ->capture_default_str();
  app.add_option("--batch", req.model.global_batch, "global batch (samples per step)")
      ->capture_default_str();
  app.add_option("--microbatches", req.model.microbatches, "pipeline microbatches")
      ->capture_default_str();
  app.add_option("--flops", req.model.flops_per_device, "sustained FLOP/s per device")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (bind) live = true;
  if (live == !files.empty()) {
    log.error("give either --topology FILE... or --live/--bind");
    return 2;
  }
  auto widths = ParseWidths(widths_text);
  if (!widths.ok()) {
    log.error("{}", widths.status().message());
    return 2;
  }
  req.model.widths = *widths;

  int rank = 0, size = 1;
  if (live) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  auto finish = [&](int code) {
    if (live) {
      // Every rank leaves with the worst exit code, so a launcher sees one answer.
      int worst = 0;
      MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      MPI_Finalize();
      return worst;
    }
    return code;
  };

  ClusterTopology cluster;
  std::vector<int> node_of_rank;
  if (live) {
    auto c = GatherTopology(MPI_COMM_WORLD, &node_of_rank);
    if (!c.ok()) {
      if (rank == 0) log.error("{}", c.status().message());
      return finish(1);
    }
    cluster = std::move(c).value();
    if (req.world == 0) req.world = size;
  } else {
    for (const auto& f : files) {
      auto n = ReadTopologyFile(f);
      if (!n.ok()) {
        log.error("{}", n.status().message());
        return 1;
      }
      cluster.nodes.push_back(std::move(n).value());
    }
    if (nodes > 1) {
      if (files.size() != 1) {
        log.error("--nodes needs exactly one --topology file");
        return 2;
      }
      NodeTopology one = cluster.nodes.front();
      cluster.nodes.clear();
      for (int i = 0; i < nodes; ++i) {
        NodeTopology n = one;
        n.hostname = fmt::format("{}-{:03}", one.hostname.empty() ? "node" : one.hostname, i);
        cluster.nodes.push_back(std::move(n));
      }
    }
  }

  auto plan = MakePlan(cluster, req);
  if (!plan.ok()) {
    if (rank == 0) log.error("{}", plan.status().message());
    return finish(1);
  }
  if (rank == 0 && !bind) {
    if (json) {
      nlohmann::json j = {{"dp", plan->dp},
                          {"pp", plan->pp},
                          {"tp", plan->tp},
                          {"reason", plan->reason},
                          {"predicted_step_s", plan->cost.total()}};
      for (const auto& r : plan->ranks) {
        j["ranks"].push_back({{"rank", r.rank},
                              {"node", cluster.nodes[static_cast<size_t>(r.node)].hostname},
                              {"gpu", r.gpu},
                              {"cores", FormatCpuList(r.cpus)},
                              {"numa", r.numa_node},
                              {"dp", r.dp_idx},
                              {"pp", r.pp_idx},
                              {"tp", r.tp_idx}});
      }
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", FormatPlan(cluster, *plan).c_str());
    }
  }
  if (!bind) return finish(0);

  // Bind: this rank's node from the gathered topology, its device from what
  // Slurm made visible, its cores from the plan's rule.
  const NodeTopology& node =
      cluster.nodes[static_cast<size_t>(node_of_rank[static_cast<size_t>(rank)])];
  LocalRank local = LocalRankFromEnv();
  int gpu = SelectDevice(local, node.num_gpus());
  std::vector<int> cores = CoresForRank(node, local, gpu);
  auto rep = BindProcess(cores, force);
  std::string line = rep.ok()
                         ? fmt::format("rank {} host {} local {}/{} gpu {} cores {}: {}", rank,
                                       node.hostname, local.local_rank, local.local_size, gpu,
                                       FormatCpuList(rep->cpus), rep->detail)
                         : fmt::format("rank {}: binding failed: {}", rank, rep.status().message());
  // Print in rank order through rank 0.
  int len = static_cast<int>(line.size());
  std::vector<int> lens(static_cast<size_t>(size)), offs(static_cast<size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    offs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(rank == 0 ? total : 0), '\0');
  MPI_Gatherv(line.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  if (rank == 0) {
    for (int i = 0; i < size; ++i) {
      std::printf("hpcml-plan: %s\n", all.substr(static_cast<size_t>(offs[static_cast<size_t>(i)]),
                                                 static_cast<size_t>(lens[static_cast<size_t>(i)]))
                                          .c_str());
    }
    std::fflush(stdout);
  }
  return finish(rep.ok() ? 0 : 1);
}
