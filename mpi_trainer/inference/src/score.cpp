#include "score.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "hpcml/common/mpi.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/inference/engine.hpp"
#include "hpcml/topology/binding.hpp"
#include "inputs.hpp"
#include "outputs.hpp"
#include "schema.hpp"
#include "scoring_model.hpp"
#include "skew.hpp"

namespace hpcml::inference {
namespace {

constexpr int kBlockTag = 7401;

// Inside a guarded job, a model trained on another zone's data is refused:
// its weights are derived from that zone's rows.
Status CheckModelZone(const trainer::ModelFile& m) {
  const featurecache::AccessContext ctx = featurecache::AccessContext::FromEnvironment();
  if (!ctx.guarded || !m.lineage || m.lineage->data.zone.empty()) return Status::Ok();
  if (m.lineage->data.zone == ctx.zone) return Status::Ok();
  return PermissionDenied(
      "{}: the model was trained on data of zone \"{}\" ({} {}); this job runs "
      "in zone \"{}\"",
      m.path, m.lineage->data.zone, m.lineage->data.path, m.lineage->data.version, ctx.zone);
}

// One run's state on this rank, built phase by phase; every phase ends in
// an agreement, so all ranks fail together.
class Scoring {
 public:
  Scoring(const ScoreOptions& o, MPI_Comm world, Logger& log) : o_(o), world_(world), log_(log) {
    MPI_Comm_rank(world, &rank_);
    MPI_Comm_size(world, &ranks_);
  }

  Status Run();

 private:
  Status Agree(const Status& s) { return AgreeOnStatus(world_, s); }
  Status Open();
  Status CheckSkew();
  Status MakeEngine();
  Status ScoreMyBlocks();
  Status WriteInOrder();
  void LogRun(double seconds) const;
  std::uint64_t blocks() const {
    const auto b = static_cast<std::uint64_t>(o_.batch);
    return (input_->rows() + b - 1) / b;
  }
  bool mine(std::uint64_t block) const {
    return block % static_cast<std::uint64_t>(ranks_) == static_cast<std::uint64_t>(rank_);
  }

  const ScoreOptions& o_;
  MPI_Comm world_;
  Logger& log_;
  int rank_ = 0, ranks_ = 1, threads_ = 1;
  std::unique_ptr<ScoringModel> loaded_;
  const trainer::ModelFile* model_ = nullptr;  // loaded_->file
  std::unique_ptr<InputData> input_;
  Input mode_ = Input::kRaw;
  std::unique_ptr<Output> output_;
  std::unique_ptr<Engine> engine_;
  std::vector<float> predictions_;  // this rank's blocks, in block order
  double seconds_ = 0;
};

Status Scoring::Open() {
  HPCML_RETURN_IF_ERROR(CheckScoreOptions(o_));
  auto m = LoadScoringModel(o_.model);
  HPCML_RETURN_IF_ERROR(m.status());
  loaded_ = std::make_unique<ScoringModel>(std::move(m).value());
  model_ = &loaded_->file;
  if (loaded_->gbdt && o_.precision == Precision::kInt8) {
    return InvalidArgument(
        "--precision int8: {} is a GBDT model, which scores in fp32 only (int8 quantises an "
        "MLP's layers)",
        o_.model);
  }
  if (o_.batch > (1 << 30) / model_->config.output_dim) {  // one block is one MPI message
    return InvalidArgument("--batch {}: at most {} rows for {} outputs", o_.batch,
                           (1 << 30) / model_->config.output_dim, model_->config.output_dim);
  }
  HPCML_RETURN_IF_ERROR(CheckModelZone(*model_));
  auto in = o_.data.empty() ? OpenCsvInput(o_.csv, *model_, o_.keep)
                            : OpenVersionInput(o_.data, o_.data_version, *model_);
  HPCML_RETURN_IF_ERROR(in.status());
  input_ = std::move(in).value();
  HPCML_ASSIGN_OR_RETURN(mode_, MatchSchema(*model_, input_->what(), input_->features(),
                                            input_->kinds(), input_->scaling()));
  HPCML_RETURN_IF_ERROR(CheckSkew());
  if (rank_ != 0) return Status::Ok();
  // Rank 0 opens the output before any scoring: a refused output fails fast.
  HPCML_ASSIGN_OR_RETURN(output_, OpenOutput(o_.output, *input_, *model_,
                                             OutputOptions{o_.classification, o_.precision}));
  return Status::Ok();
}

// The input's statistics against the training version's: reported (rank 0)
// above skew_warn, an error above max_skew.
Status Scoring::CheckSkew() {
  const std::optional<featurecache::VersionStats> stats = input_->stats();
  if (!stats) return Status::Ok();
  const std::vector<Skew> skew = FindSkew(*model_, mode_, *stats, o_.skew_warn);
  std::vector<std::string> over;
  for (const Skew& s : skew) {
    if (rank_ == 0) log_.warn("skew: {}", s.text);
    if (o_.max_skew > 0 && s.shift > o_.max_skew) over.push_back(s.text);
  }
  if (over.empty()) return Status::Ok();
  return FailedPrecondition("{}: training/serving skew beyond --max-skew {}: {}", input_->what(),
                            o_.max_skew, fmt::format("{}", fmt::join(over, "; ")));
}

// Threads as the trainer picks them: the request cut to this rank's cores.
Status Scoring::MakeEngine() {
  const std::vector<int> cpus = topology::CurrentAffinity();
  const int sharing = topology::RanksSharingCores(world_, cpus);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
  auto tc = topology::ChooseThreads(o_.threads, omp ? omp : "", slurm ? slurm : "",
                                    std::max(1, static_cast<int>(cpus.size())), sharing);
  HPCML_RETURN_IF_ERROR(Agree(tc.status()));
  threads_ = tc->threads;
  EngineOptions eo;
  eo.threads = threads_;
  eo.max_batch = o_.batch;
  eo.precision = o_.precision;
  auto e = inference::MakeEngine(*loaded_, eo);
  HPCML_RETURN_IF_ERROR(Agree(e.status()));
  engine_ = std::move(e).value();
  return Status::Ok();
}

Status Scoring::ScoreMyBlocks() {
  const auto b = static_cast<std::uint64_t>(o_.batch);
  const auto k = static_cast<size_t>(model_->config.output_dim);
  std::vector<float> x(b * static_cast<size_t>(engine_->inputs()));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t blk = 0; blk < blocks(); ++blk) {
    if (!mine(blk)) continue;
    const std::uint64_t first = blk * b, n = std::min(b, input_->rows() - first);
    HPCML_RETURN_IF_ERROR(input_->Read(first, n, x.data()));
    const size_t at = predictions_.size();
    predictions_.resize(at + n * k);
    HPCML_RETURN_IF_ERROR(
        engine_->Score(x.data(), static_cast<std::int64_t>(n), predictions_.data() + at, mode_));
  }
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

// Rank 0 appends every block in row order, its own from memory and the
// others' as they arrive; after an error it keeps receiving (without
// writing) so that no sender is left blocked.
Status Scoring::WriteInOrder() {
  const auto b = static_cast<std::uint64_t>(o_.batch);
  const auto k = static_cast<std::uint64_t>(model_->config.output_dim);
  std::uint64_t mine_at = 0;
  std::vector<float> recv(b * k);
  Status s = Status::Ok();
  for (std::uint64_t blk = 0; blk < blocks(); ++blk) {
    const std::uint64_t first = blk * b, n = std::min(b, input_->rows() - first);
    const int owner = static_cast<int>(blk % static_cast<std::uint64_t>(ranks_));
    const float* p = predictions_.data() + mine_at;
    if (owner == rank_) {
      mine_at += n * k;
      if (rank_ != 0) {
        MPI_Send(p, static_cast<int>(n * k), MPI_FLOAT, 0, kBlockTag, world_);
        continue;
      }
    } else if (rank_ == 0) {
      MPI_Recv(recv.data(), static_cast<int>(n * k), MPI_FLOAT, owner, kBlockTag, world_,
               MPI_STATUS_IGNORE);
      p = recv.data();
    } else {
      continue;
    }
    if (s.ok()) s = output_->Append(first, n, p);
  }
  if (rank_ != 0 || !s.ok()) return s;
  auto written = output_->Finish();
  if (!written.ok()) return written.status();
  log_.info("wrote {}", *written);
  return Status::Ok();
}

// Rank 0: what was scored, with what, and the model's own lineage.
void Scoring::LogRun(double seconds) const {
  const auto rows = input_->rows();
  log_.info(
      "scored {} rows of {} with {} (sha256 {}{}) on {} rank(s) x {} thread(s) in {:.3f} s "
      "({:.0f} rows/s), {} input, {}",
      rows, input_->what(), model_->path, model_->sha256.substr(0, 12),
      loaded_->gbdt
          ? fmt::format(", GBDT {}, {} rounds", loaded_->gbdt->objective, loaded_->gbdt->rounds)
          : "",
      ranks_, threads_, seconds, seconds > 0 ? static_cast<double>(rows) / seconds : 0.0,
      mode_ == Input::kRaw ? "raw" : "already standardised",
      o_.precision == Precision::kInt8
          ? fmt::format("int8 ({} of {} layers; smaller ones stay fp32)", engine_->int8_layers(),
                        model_->config.num_layers())
          : std::string(Name(o_.precision)));
  if (model_->lineage && !model_->lineage->data.path.empty()) {
    const trainer::TrainingData& d = model_->lineage->data;
    log_.info("the model was trained on {} {} (data_sha256 {}){}", d.path, d.version,
              d.data_sha256.substr(0, 12),
              model_->lineage->job_id.empty() ? "" : " in job " + model_->lineage->job_id);
  }
}

Status Scoring::Run() {
  HPCML_RETURN_IF_ERROR(Agree(Open()));
  HPCML_RETURN_IF_ERROR(MakeEngine());
  HPCML_RETURN_IF_ERROR(Agree(ScoreMyBlocks()));
  double slowest = seconds_;
  MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world_);
  if (rank_ == 0) LogRun(slowest);
  return Agree(WriteInOrder());
}

}  // namespace

Status CheckScoreOptions(const ScoreOptions& options) {
  if (options.batch < 1) return InvalidArgument("--batch {}: must be at least 1", options.batch);
  if (options.data.empty() == options.csv.empty()) {
    return InvalidArgument("give exactly one of --data and --csv");
  }
  return Status::Ok();
}

Status RunScore(const ScoreOptions& options, MPI_Comm world, Logger& log) {
  Scoring s(options, world, log);
  return s.Run();
}

}  // namespace hpcml::inference
