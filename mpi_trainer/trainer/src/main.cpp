// hpcml-train: trains an MLP across dp x pp x tp ranks (see docs/trainer.md).
//
// Error contract: every failure is agreed on by all ranks (AgreeOnStatus),
// rank 0 prints one message naming the option or file, and every rank exits
// with the same code (common/exit_codes.hpp): 2 for a usage error (CLI11's,
// or CheckTrainOptions: the same on every rank from the same argv, so no
// agreement is needed), 1 for anything else, --stop-exit-code (85) after a
// save and stop. No rank is left waiting.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "gbdt_program.hpp"
#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/mpi.hpp"
#include "hpcml/topology/gather.hpp"
#include "hpcml/topology/planner.hpp"
#include "program.hpp"
#include "train_options.hpp"

namespace {

namespace topo = hpcml::topology;
using hpcml::trainer::TrainOptions;

// --plan: the placement hpcml-plan --live would choose for this allocation,
// with the model and degrees of this command line. Returns the agreed exit code.
int PrintPlan(const TrainOptions& o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  topo::PlanRequest req;
  // Degrees given on the command line are fixed; --dp/--pp/--tp left at 1 are not.
  req.dp = o.grid.dp > 1 ? o.grid.dp : 0;
  req.pp = o.grid.pp > 1 ? o.grid.pp : 0;
  req.tp = o.grid.tp > 1 ? o.grid.tp : 0;
  req.model.global_batch = o.batch;
  req.model.microbatches = o.microbatches;
  // Sustained FLOP/s per rank: an H100 in bf16, or one AVX-512 core in fp32
  // through oneDNN (220-240 GFLOP/s measured in a step: docs/trainer.md).
  req.model.flops_per_device = o.backend == hpcml::trainer::BackendKind::kCuda ? 400e12 : 200e9;
  auto hidden = topo::ParseWidths(o.hidden, "--hidden");
  if (!hidden.ok()) {  // the same on every rank: no agreement needed
    if (rank == 0) hpcml::Logger("hpcml-train").error("--plan: {}", hidden.status().message());
    return hpcml::kExitUsage;
  }
  req.model.widths.push_back(o.input_dim);
  req.model.widths.insert(req.model.widths.end(), hidden->begin(), hidden->end());
  req.model.widths.push_back(o.outputs);
  auto live = topo::PlanLiveJob(MPI_COMM_WORLD, req);
  if (live.ok() && rank == 0) {
    std::printf("%s", topo::FormatPlan(live->cluster, live->plan).c_str());
  }
  if (!live.ok() && rank == 0) {
    hpcml::Logger("hpcml-train").error("--plan: {}", live.status().message());
  }
  return hpcml::AgreeOnExitCode(MPI_COMM_WORLD, live.ok() ? hpcml::kExitOk : hpcml::kExitError);
}

// Training: 0, the --stop-exit-code after a save-and-stop, 1 on an error
// (agreed by Program::Run's phases), or 2 when CheckTrainOptions refuses the
// command line (the same on every rank).
int Train(const TrainOptions& o, int rank) {
  hpcml::Logger log("hpcml-train");
  if (o.model == hpcml::trainer::ModelKind::kGbdt) {
    if (hpcml::Status st = hpcml::trainer::CheckTreeOptions(o); !st.ok()) {
      if (rank == 0) log.error("{}", st.message());
      return hpcml::kExitUsage;
    }
    hpcml::Result<bool> stopped = hpcml::trainer::RunGbdt(o, log);
    // RunGbdt agrees on each phase's outcome; this also makes one rank's
    // failure inside XGBoost's rounds (its peers then fail in the
    // collective) one outcome, with the lowest failing rank's message.
    const hpcml::Status agreed = hpcml::AgreeOnStatus(MPI_COMM_WORLD, stopped.status());
    if (!agreed.ok() && rank == 0) log.error("{}", agreed.message());
    if (!stopped.ok() && rank != 0 &&
        agreed.message().find(stopped.status().message()) == std::string::npos) {
      log.error("{}", stopped.status().message());
    }
    return !agreed.ok() ? hpcml::kExitError : *stopped ? o.stop_exit_code : hpcml::kExitOk;
  }
  if (hpcml::Status st = hpcml::trainer::CheckTrainOptions(o); !st.ok()) {
    if (rank == 0) log.error("{}", st.message());
    return hpcml::kExitUsage;
  }
  hpcml::trainer::Program program(o);
  hpcml::Status s = program.Run();
  if (!s.ok()) {
    if (rank == 0) log.error("{}", s.message());
    return hpcml::kExitError;
  }
  return program.stopped() ? o.stop_exit_code : hpcml::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TrainOptions o;
  CLI::App app{"hpcml-train: data, pipeline and tensor parallel MLP training over MPI",
               "hpcml-train"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-train"));
  hpcml::trainer::AddTrainOptions(app, o);
  app.footer(
      hpcml::ExitStatusHelp({{TrainOptions{}.stop_exit_code,
                              "saved and stopped (a signal, a spot notice, the time limit): the\n"
                              "      --stop-exit-code, for slurm.conf RequeueExit"}}));
  int code = -1;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same argv and fails the same way: no agreement needed.
    code = (rank == 0 ? app.exit(e) : e.get_exit_code()) == 0 ? hpcml::kExitOk : hpcml::kExitUsage;
  }
  if (code < 0) code = o.plan ? PrintPlan(o) : Train(o, rank);
  MPI_Finalize();
  return code;
}
