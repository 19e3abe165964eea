// The step loop: one global batch per step, run through the pipeline
// schedule over the stages, gradients averaged over the data-parallel
// replicas, clipped by their global norm, applied with AdamW.
//
// Semantics independent of the layout: the loss of a step is the mean over
// the global batch (the same samples in every layout, see BatchSource), so
// for a fixed seed every grid computes the same losses up to float rounding.
//
// A Trainer is driven from every rank of the grid in lock step; all its
// methods are collective over the grid's world. Not thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/data.hpp"
#include "hpcml/trainer/eval_metrics.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

// Linear warm-up from 0 to `peak` over `warmup` steps, then cosine decay to
// `min` at step `total`; constant `min` after that. Steps are 1-based.
struct LrSchedule {
  double peak = 1e-3;
  double min = 0.0;
  std::int64_t warmup = 0;
  std::int64_t total = 1;
  double At(std::int64_t step) const;
};

struct TrainConfig {
  std::int64_t global_batch = 32;
  int microbatches = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  LrSchedule lr;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;                        // applied to weights, not biases
  float clip = 0.0f;                                // global gradient-norm limit; 0 = off
  std::size_t bucket_bytes = std::size_t{1} << 20;  // data-parallel all-reduce bucket
  bool overlap_dp = true;  // start bucket all-reduces during the last backward
  // ZeRO-1: each data-parallel rank keeps the AdamW moments of one shard of
  // the flat parameter buffer only; gradients are reduce-scattered, each
  // rank updates its shard, the weights are all-gathered. Same results as
  // the unsharded run up to float summation order. CPU backend only; the
  // reduction then follows the backward pass (no overlap).
  bool zero1 = false;
  // Cross-entropy only: a weight per class (empty: 1 for all) multiplying
  // each sample's loss; the step's loss stays the sum over the global batch
  // divided by its size.
  std::vector<float> class_weights;
};

struct StepStats {
  std::int64_t step = 0;   // 1-based number of the step just done
  double loss = 0.0;       // mean loss over the global batch
  double grad_norm = 0.0;  // before clipping
  double lr = 0.0;
  double step_time_s = 0.0;  // wall time of the step on this rank
  double bubble = 0.0;       // mean over stages of 1 - busy / longest stage's pipeline phase
  double busy_s = 0.0;       // this rank's compute seconds in the pipeline phase
  double samples_per_s = 0.0;
};

class Trainer {
 public:
  // `grid` may be null for a single process (no MPI calls at all). The grid,
  // backend and source are borrowed and must outlive the trainer. Fails when
  // the batch does not split into replicas and microbatches, or the model
  // does not fit the layout (see PartitionModel).
  static Result<std::unique_ptr<Trainer>> Create(const TrainConfig& config,
                                                 const ModelConfig& model_config,
                                                 const ProcessGrid* grid, Backend* backend,
                                                 BatchSource* source);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimisation step on the next batch. On a backend whose memory is
  // not host memory, a reader thread reads and uploads the next batch while
  // this one computes (see ReadBatch).
  Result<StepStats> Step();
  // Forward and backward on the next batch without updating the weights;
  // the gradients (averaged over replicas) stay in model().grad_data().
  // Returns the mean loss over the global batch.
  Result<double> ForwardBackward();

  // What the step hook asks of Run: go on, or end the loop here, as asked
  // (a stop for requeue, early stopping). Stopping is an outcome, not an
  // error.
  enum class AfterStep { kContinue, kStop };
  // Steps until `steps` have been done or `after_step` (run on every rank
  // between steps: logging, checkpoints) returns kStop; an error from it
  // ends the loop and is returned. It must return the same verdict on every
  // rank (use AgreeOnStatus when the decision is local to one rank).
  Status Run(std::int64_t steps,
             const std::function<Result<AfterStep>(const StepStats&)>& after_step);

  // The model on a held-out set: the forward pass over every row of `val`
  // (one pass of val->batches() batches of replica_rows() rows, split into
  // the training microbatches and run through the pipeline stages; a short
  // batch is padded with zero rows, which are computed and not counted),
  // then the metrics over the rows of all replicas, computed once and
  // identical on every rank (sums all-reduced, binary scores gathered to
  // world rank 0 for the AUC). `val` is read on the first and last stages
  // and may be null on the others. Changes no weights, gradients, optimizer
  // state or training data position; result.step is step().
  Result<EvalMetrics> Evaluate(EvalSource* val);
  // Rows per replica of one global batch (an EvalSource's batch size).
  std::int64_t replica_rows() const { return local_rows_; }

  Model& model() { return *model_; }
  const ModelPartition& partition() const { return partition_; }
  const TrainConfig& config() const { return config_; }
  std::int64_t step() const { return step_; }
  // For resuming (issue 7): the number of steps already done.
  void set_step(std::int64_t step) { step_ = step; }
  // The optimizer moments of [moments_begin(), moments_end()) of the flat
  // parameter buffer (all of it without ZeRO-1); element i of adam_m()
  // belongs to parameter element moments_begin() + i.
  float* adam_m() const { return m_.data(); }
  float* adam_v() const { return v_.data(); }
  std::size_t moments_begin() const { return shard_begin_; }
  std::size_t moments_end() const { return shard_end_; }
  // Floats of optimizer state held by this rank (both moments).
  std::size_t optimizer_state_floats() const { return m_.size() + v_.size(); }
  // Collective over the data-parallel group: the first replica (dp index 0)
  // receives both moments over the whole flat buffer as host vectors (the
  // other ranks get empty ones). For checkpoints.
  void GatherMoments(std::vector<float>* m, std::vector<float>* v) const;
  // The data source's position after the batches trained on so far (a batch
  // read ahead is not counted), and the restore of one (a batch read ahead
  // is dropped). For checkpoints; on ranks without a source, empty and OK.
  std::string SourcePosition() const;
  Status RestoreSourcePosition(std::string_view position);

 private:
  Trainer() = default;
  // Reads the batch, runs the schedule and the data-parallel reduction.
  // Outputs this rank's loss sum, its compute (busy) seconds in the pipeline
  // phase and that phase's wall seconds.
  // `sharded`: leave the data-parallel reduction to Step's reduce-scatter
  // (ZeRO-1); otherwise gradients are all-reduced over the replicas.
  Status RunBatch(double* loss_sum, double* busy_s, double* wall_s, bool sharded);
  bool contributes_loss() const;

  // Create's steps, in order.
  Status SplitBatch();
  Status CheckSource(const ModelConfig& mc) const;
  void AllocateActivations();
  Status AllocateOptimizer();
  void MakeBuckets();

  // RunBatch's steps: read (agreed over the world), the pipeline schedule
  // (its compute seconds into batch_), the data-parallel reduction.
  Status ReadBatch();
  // The reader thread: the next batch into the other pinned slot, its status
  // to ahead_status_; then (this thread) its upload to next_features_ and
  // next_targets_, queued once.
  void StartReadAhead();
  void UploadReadAhead();
  void JoinReadAhead();
  void RunSchedule();
  void ForwardOp(int mb, bool flush);
  void BackwardOp(int mb, bool flush);
  void AddBusy(std::chrono::steady_clock::time_point c0);
  // Receives into `buf`, filling the wait with pending weight gradients.
  void RecvFilling(float* buf, std::size_t n, int peer, int tag);
  // Microbatch mb's input on this stage: the batch's features on the first
  // stage, else the previous stage's activations (received with RecvFilling).
  const float* StageInput(int mb);
  void ReduceGradients(bool overlapped);
  // Evaluate's steps: one batch's forward passes (no loss, no backward),
  // and the last stage's metric sums of its first `valid` rows.
  void ForwardOnly();
  void AddEvalRows(std::int64_t valid, const float* targets, EvalSums* sums,
                   std::vector<double>* scores, std::vector<std::uint8_t>* positive);
  // The AUC and the share of positives over every replica's rows, on every rank.
  void GatheredBinary(const std::vector<double>& scores, const std::vector<std::uint8_t>& positive,
                      EvalMetrics* out) const;

  // Step's steps: the squared gradient norm of this rank's part, the update.
  double GradNormSquaredPart() const;
  void ApplyAdamW(const StepStats& st);

  TrainConfig config_;
  const ProcessGrid* grid_ = nullptr;
  Backend* backend_ = nullptr;
  BatchSource* source_ = nullptr;
  GridShape shape_;
  int dp_idx_ = 0, pp_idx_ = 0, tp_idx_ = 0;
  ModelPartition partition_;
  std::unique_ptr<Model> model_;
  std::int64_t local_rows_ = 0, mb_rows_ = 0;
  Buffer features_, targets_;  // the batch of this step
  // Reading ahead (backend memory not host memory): two pinned host slots
  // the reader fills in turn (slot_: the latest), the device buffers the
  // next batch is uploaded to (swapped with features_/targets_ when it is
  // taken), the source position before the read ahead began, whether one
  // is in flight, done reading, and queued for upload.
  Buffer host_features_[2], host_targets_[2];
  Buffer next_features_, next_targets_;
  int slot_ = 0;
  std::thread reader_;
  Status ahead_status_;
  std::string position_;
  bool ahead_ = false, uploaded_ = false;
  std::atomic<bool> read_done_{false};
  // All microbatches back to back (microbatch mb at mb * rows * width), so
  // the model's weight gradients can take several in one GEMM.
  Buffer recv_act_, dlogits_;
  Buffer recv_grad_;
  Buffer class_weight_;  // last stage, with class weights
  Buffer m_, v_;
  // ZeRO-1: this rank's shard [shard_begin_, shard_end_) of the flat buffer,
  // every replica's shard length, and the reduced gradients of the shard.
  std::size_t shard_begin_ = 0, shard_end_ = 0;
  std::vector<std::size_t> shard_counts_;
  Buffer grad_shard_;
  // Data-parallel buckets: [begin, end) of the flat gradient buffer, started
  // when local layer `start_layer` finishes its last backward.
  struct Bucket {
    std::size_t begin = 0, end = 0;
    int start_layer = 0;
  };
  std::vector<Bucket> buckets_;
  // The batch RunBatch is running: loss sum, compute seconds, the next
  // bucket to start, and the hook layers report their gradients done to.
  struct BatchState {
    double loss = 0.0, busy = 0.0;
    std::size_t next_bucket = 0;
    std::function<void(int)> layer_done;
  };
  BatchState batch_;
  std::int64_t step_ = 0;
};

}  // namespace hpcml::trainer
