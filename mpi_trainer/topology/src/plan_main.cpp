// hpcml-plan: shows where the ranks of a training job would run and why.
//
//   hpcml-plan --topology dgx-h100.xml --nodes 2 --widths 4096,16384,16384,4096
//   srun --mpi=pmix -n 8 hpcml-plan --live ...   (topology of the live allocation)
//   srun --mpi=pmix -n 2 hpcml-plan --bind       (bind every rank as planned and report)
//
// Exit status (common/exit_codes.hpp): 0 the plan printed, 1 an error (a
// topology file missing or unreadable, no plan fits, a rank failed to bind),
// 2 a usage error; under --live every rank leaves with the same code.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/mpi.hpp"
#include "hpcml/topology/binding.hpp"
#include "hpcml/topology/gather.hpp"
#include "hpcml/topology/planner.hpp"

namespace {

using namespace hpcml;
using namespace hpcml::topology;

struct Args {
  std::vector<std::string> files;
  int nodes = 1;
  bool live = false, bind = false, json = false, force = false;
  std::string widths = "1024,4096,4096,4096,4096,1024";
  PlanRequest req;
};

void AddOptions(CLI::App& app, Args& a) {
  // No CLI::ExistingFile: a missing file is an error naming it (1), not a usage error.
  app.add_option("--topology", a.files, "NCCL or hwloc topology XML, one per node (repeatable)");
  app.add_option("--nodes", a.nodes, "replicate a single --topology file to this many nodes")
      ->check(CLI::PositiveNumber);
  app.add_flag("--live", a.live, "plan for the nodes this job runs on (run under srun/mpirun)");
  app.add_flag("--bind", a.bind,
               "bind every rank as planned and report its cores (implies --live)");
  app.add_flag("--force-bind", a.force, "rebind even when the launcher already bound the ranks");
  app.add_flag("--json", a.json, "print the plan as JSON");
  app.add_option("--world", a.req.world,
                 "ranks (default: every GPU, or the job's size with --live)");
  app.add_option("--dp", a.req.dp, "fix the data-parallel degree");
  app.add_option("--pp", a.req.pp, "fix the pipeline-parallel degree");
  app.add_option("--tp", a.req.tp, "fix the tensor-parallel degree");
  app.add_option("--widths", a.widths, "layer widths: input,hidden...,output")
      ->capture_default_str();
  app.add_option("--batch", a.req.model.global_batch, "global batch (samples per step)")
      ->capture_default_str();
  app.add_option("--microbatches", a.req.model.microbatches, "pipeline microbatches")
      ->capture_default_str();
  app.add_option("--flops", a.req.model.flops_per_device, "sustained FLOP/s per device")
      ->capture_default_str();
}

// The cluster described by --topology files (one per node, or one file
// replicated to --nodes nodes). Precondition: with --nodes > 1, one file.
Result<ClusterTopology> ClusterFromFiles(const Args& a) {
  ClusterTopology cluster;
  for (const auto& f : a.files) {
    HPCML_ASSIGN_OR_RETURN(NodeTopology n, ReadTopologyFile(f));
    cluster.nodes.push_back(std::move(n));
  }
  if (a.nodes > 1) {
    NodeTopology one = cluster.nodes.front();
    cluster.nodes.clear();
    for (int i = 0; i < a.nodes; ++i) {
      NodeTopology n = one;
      n.hostname = fmt::format("{}-{:03}", one.hostname.empty() ? "node" : one.hostname, i);
      cluster.nodes.push_back(std::move(n));
    }
  }
  return cluster;
}

std::string PlanJson(const ClusterTopology& cluster, const Plan& plan) {
  nlohmann::json j = {{"dp", plan.dp},
                      {"pp", plan.pp},
                      {"tp", plan.tp},
                      {"reason", plan.reason},
                      {"predicted_step_s", plan.cost.total()}};
  for (const auto& r : plan.ranks) {
    j["ranks"].push_back({{"rank", r.rank},
                          {"node", cluster.nodes[static_cast<size_t>(r.node)].hostname},
                          {"gpu", r.gpu},
                          {"cores", FormatCpuList(r.cpus)},
                          {"numa", r.numa_node},
                          {"dp", r.dp_idx},
                          {"pp", r.pp_idx},
                          {"tp", r.tp_idx}});
  }
  return JsonText(j, 2) + "\n";
}

// --bind: every rank binds as planned; rank 0 prints one line per rank, in
// rank order. Returns this rank's exit code.
int BindAndReport(const LivePlan& live, bool force) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const NodeTopology& node =
      live.cluster.nodes[static_cast<size_t>(live.node_of_rank[static_cast<size_t>(rank)])];
  auto b = BindLocalRank(node, /*with_gpu=*/true, force);
  std::string line = b.ok()
                         ? fmt::format("rank {} host {} local {}/{} gpu {} cores {}: {}", rank,
                                       node.hostname, b->local.local_rank, b->local.local_size,
                                       b->gpu, FormatCpuList(b->report.cpus), b->report.detail)
                         : fmt::format("rank {}: binding failed: {}", rank, b.status().message());
  for (const std::string& l : GatherStrings(MPI_COMM_WORLD, line)) {
    std::printf("hpcml-plan: %s\n", l.c_str());
  }
  std::fflush(stdout);
  return b.ok() ? kExitOk : kExitError;
}

// --live / --bind, under srun or mpirun. Every rank leaves with the worst
// exit code, so a launcher sees one answer.
int RunLive(const Args& a, Logger& log) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = kExitOk;
  auto live = PlanLiveJob(MPI_COMM_WORLD, a.req);
  if (!live.ok()) {
    if (rank == 0) log.error("{}", live.status().message());
    code = kExitError;
  } else if (a.bind) {
    code = BindAndReport(*live, a.force);
  } else if (rank == 0) {
    std::printf("%s", a.json ? PlanJson(live->cluster, live->plan).c_str()
                             : FormatPlan(live->cluster, live->plan).c_str());
  }
  code = AgreeOnExitCode(MPI_COMM_WORLD, code);
  MPI_Finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Logger log("hpcml-plan");
  CLI::App app{"hpcml-plan: choose dp x pp x tp and rank placement from the machine's topology",
               "hpcml-plan"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-plan"));
  Args a;
  AddOptions(app, a);
  app.footer(ExitStatusHelp());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help and --version are 0
  }
  if (a.bind) a.live = true;
  if (a.live == !a.files.empty()) {
    log.error("give either --topology FILE... or --live/--bind");
    return kExitUsage;
  }
  if (!a.live && a.nodes > 1 && a.files.size() != 1) {
    log.error("--nodes needs exactly one --topology file");
    return kExitUsage;
  }
  auto widths = ParseWidths(a.widths, "--widths");
  if (widths.ok() && widths->size() < 2) {
    widths = InvalidArgument("--widths: need at least input and output widths, got '{}'", a.widths);
  }
  if (!widths.ok()) {
    log.error("{}", widths.status().message());
    return kExitUsage;
  }
  a.req.model.widths = *widths;
  if (a.live) return RunLive(a, log);

  auto cluster = ClusterFromFiles(a);
  if (!cluster.ok()) {
    log.error("{}", cluster.status().message());
    return kExitError;
  }
  auto plan = MakePlan(*cluster, a.req);
  if (!plan.ok()) {
    log.error("{}", plan.status().message());
    return kExitError;
  }
  std::printf("%s",
              a.json ? PlanJson(*cluster, *plan).c_str() : FormatPlan(*cluster, *plan).c_str());
  return kExitOk;
}
