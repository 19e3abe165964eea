// hpcml-infer: batch scoring on CPU nodes, model inspection and ONNX export
// (docs/inference.md), of MLP and GBDT model files (told apart by their
// format attribute; GBDT models have no ONNX export yet).
//
//   srun -n 4 hpcml-infer score --model m.h5 --data /data/ae/x.h5 --data-version v3
//       --output /data/ae/scores.h5
//   hpcml-infer inspect m.h5 [--json]
//   hpcml-infer export-onnx m.h5 -o m.onnx
//
// Exit codes (common/exit_codes.hpp): 0 success, 2 a usage error (CLI11's,
// or CheckScoreOptions), 1 anything else; with several ranks every rank
// exits with the same code and rank 0 prints the one message.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include <cstdio>
#include "hpcml/common/cli.hpp"

#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/mpi.hpp"
#include "hpcml/trees/model_file.hpp"
#include "inspect.hpp"
#include "onnx_export.hpp"
#include "score.hpp"

namespace {

namespace hi = hpcml::inference;

struct Args {
  hi::ScoreOptions score;
  std::string model, onnx;
  bool json = false;
};

void AddScore(CLI::App& app, Args& a) {
  CLI::App* s = app.add_subcommand("score", "score a feature-cache version or a CSV");
  hi::ScoreOptions& o = a.score;
  s->add_option("--model", o.model, "model file written by hpcml-train (an MLP or GBDT model)")
      ->required();
  s->add_option("--data", o.data, "feature set (.h5) to score");
  s->add_option("--data-version", o.data_version, "its version (default: latest)");
  s->add_option("--csv", o.csv, "or a CSV with a header row naming the model's features");
  s->add_option("--keep", o.keep, "CSV input: columns copied to the output (e.g. an id)")
      ->delimiter(',');
  s->add_option("--output,-o", o.output,
                "where the predictions go: a .csv file, or a feature set (a new version)")
      ->required();
  s->add_option("--classification", o.classification,
                "of the output version (default, and minimum: the input's)");
  s->add_option("--batch", o.batch, "rows per block (scored together, sharded over ranks)")
      ->capture_default_str();
  hpcml::AddEnumOption(*s, "--precision", &o.precision,
                       {hi::Precision::kFloat32, hi::Precision::kInt8},
                       "fp32, or int8 (MLP models): weights and activations quantised, int32 "
                       "accumulation (docs/inference.md has the accuracy change)");
  s->add_option("--skew-warn", o.skew_warn,
                "report features whose mean moved more than this many training standard "
                "deviations from the training version's")
      ->capture_default_str();
  s->add_option("--max-skew", o.max_skew,
                "fail, before scoring, when a feature's mean moved more than this (0: never)")
      ->capture_default_str();
  s->add_option("--threads", o.threads,
                "math threads per rank (default: OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or the "
                "rank's cores)");
}

void AddInspect(CLI::App& app, Args& a) {
  CLI::App* s = app.add_subcommand("inspect", "print a model's architecture and lineage");
  s->add_option("model", a.model, "model file")->required();
  s->add_flag("--json", a.json, "as JSON");
}

void AddExport(CLI::App& app, Args& a) {
  CLI::App* s = app.add_subcommand(
      "export-onnx",
      "write the model as ONNX (standardisation included) for ONNX Runtime/OpenVINO");
  s->add_option("model", a.model, "model file")->required();
  s->add_option("--output,-o", a.onnx, "the .onnx file to write")->required();
}

// inspect and export-onnx of a GBDT model (rank 0).
int GbdtModelCommand(const std::string& cmd, const Args& a, hpcml::Logger& log) {
  auto m = hpcml::trees::LoadGbdtModel(a.model);
  if (!m.ok()) {
    log.error("{}", m.status().message());
    return hpcml::kExitError;
  }
  if (cmd == "export-onnx") {
    hpcml::Status s = hi::ExportGbdtOnnx(*m, a.onnx);
    if (!s.ok()) {
      log.error("{}", s.message());
      return hpcml::kExitError;
    }
    log.info("wrote {} (opset {}, ai.onnx.ml {}) from {} (sha256 {})", a.onnx, hi::kOnnxOpset,
             hi::kOnnxMlOpset, a.model, m->sha256);
    return hpcml::kExitOk;
  }
  const std::string text = a.json ? hi::InspectJson(*m) : hi::InspectText(*m);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return hpcml::kExitOk;
}

// inspect and export-onnx: rank 0 does the work, for either kind of model.
int ModelCommand(const std::string& cmd, const Args& a, int rank) {
  if (rank != 0) return hpcml::kExitOk;
  hpcml::Logger log("hpcml-infer");
  if (hpcml::trees::IsGbdtModelFile(a.model)) return GbdtModelCommand(cmd, a, log);
  // Another program's model (a Python job's) with its lineage record beside it.
  std::error_code ec;
  if (cmd == "inspect" && std::filesystem::exists(hpcml::trainer::LineageRecordPath(a.model), ec)) {
    auto r = hpcml::trainer::LoadLineageRecord(a.model);
    if (!r.ok()) {
      log.error("{}", r.status().message());
      return hpcml::kExitError;
    }
    const std::string text = a.json ? hi::InspectJson(*r) : hi::InspectText(*r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return hpcml::kExitOk;
  }
  auto m = hpcml::trainer::LoadModelFile(a.model);
  if (!m.ok()) {
    log.error("{}", m.status().message());
    return hpcml::kExitError;
  }
  if (cmd == "export-onnx") {
    hpcml::Status s = hi::ExportOnnx(*m, a.onnx);
    if (!s.ok()) {
      log.error("{}", s.message());
      return hpcml::kExitError;
    }
    log.info("wrote {} (opset {}) from {} (sha256 {})", a.onnx, hi::kOnnxOpset, a.model,
             m->sha256.substr(0, 12));
    return hpcml::kExitOk;
  }
  const std::string text = a.json ? hi::InspectJson(*m) : hi::InspectText(*m);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return hpcml::kExitOk;
}

// The options first: refused, they are a usage error on every rank alike.
int Score(const Args& a, int rank) {
  hpcml::Logger log("hpcml-infer");
  if (hpcml::Status s = hi::CheckScoreOptions(a.score); !s.ok()) {
    if (rank == 0) log.error("score: {}", s.message());
    return hpcml::kExitUsage;
  }
  hpcml::Status s = hi::RunScore(a.score, MPI_COMM_WORLD, log);
  if (!s.ok() && rank == 0) log.error("{}", s.message());
  return s.ok() ? hpcml::kExitOk : hpcml::kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Args a;
  CLI::App app{"hpcml-infer: batch scoring, model lineage and ONNX export", "hpcml-infer"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-infer"));
  app.require_subcommand(1);
  AddScore(app, a);
  AddInspect(app, a);
  AddExport(app, a);
  // Set after the subcommands, which would copy it into their own --help.
  app.footer(hpcml::ExitStatusHelp());
  int code = -1;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same argv and fails the same way.
    code = (rank == 0 ? app.exit(e) : e.get_exit_code()) == 0 ? hpcml::kExitOk : hpcml::kExitUsage;
  }
  if (code < 0) {
    const std::string cmd = app.get_subcommands().front()->get_name();
    code = cmd == "score" ? Score(a, rank) : ModelCommand(cmd, a, rank);
    code = hpcml::AgreeOnExitCode(MPI_COMM_WORLD, code);
  }
  MPI_Finalize();
  return code;
}
