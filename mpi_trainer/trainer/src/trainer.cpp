#include "hpcml/trainer/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <utility>

namespace hpcml::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The part of parameter p inside the shard [begin, end) of the flat buffer:
// [lo, hi), empty when lo >= hi.
std::pair<std::size_t, std::size_t> InShard(const ParamInfo& p, std::size_t begin,
                                            std::size_t end) {
  return {std::max(p.offset, begin), std::min(p.offset + p.size, end)};
}

}  // namespace

double LrSchedule::At(std::int64_t step) const {
  if (warmup > 0 && step <= warmup) {
    return peak * static_cast<double>(step) / static_cast<double>(warmup);
  }
  if (step >= total || total <= warmup) return step >= total ? min : peak;
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  return min + 0.5 * (peak - min) * (1.0 + std::cos(std::numbers::pi * progress));
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const TrainConfig& config,
                                                 const ModelConfig& model_config,
                                                 const ProcessGrid* grid, Backend* backend,
                                                 BatchSource* source) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->grid_ = grid;
  t->backend_ = backend;
  t->source_ = source;
  if (grid != nullptr) {
    t->shape_ = grid->shape();
    t->dp_idx_ = grid->dp_idx();
    t->pp_idx_ = grid->pp_idx();
    t->tp_idx_ = grid->tp_idx();
  }
  HPCML_RETURN_IF_ERROR(t->SplitBatch());
  HPCML_ASSIGN_OR_RETURN(t->partition_, PartitionModel(model_config, t->shape_));
  HPCML_RETURN_IF_ERROR(t->CheckSource(model_config));
  HPCML_ASSIGN_OR_RETURN(t->model_,
                         Model::Create(model_config, t->partition_,
                                       Placement{t->pp_idx_, t->shape_.tp, t->tp_idx_}, backend));
  t->AllocateActivations();
  HPCML_RETURN_IF_ERROR(t->AllocateOptimizer());
  t->MakeBuckets();
  return t;
}

// The global batch into replicas and microbatches, exactly.
Status Trainer::SplitBatch() {
  const TrainConfig& c = config_;
  if (c.global_batch < 1 || c.microbatches < 1) {
    return InvalidArgument("--batch and --microbatches must be >= 1");
  }
  if (c.global_batch % shape_.dp != 0) {
    return InvalidArgument("--batch {} is not divisible by --dp {}", c.global_batch, shape_.dp);
  }
  local_rows_ = c.global_batch / shape_.dp;
  if (local_rows_ % c.microbatches != 0) {
    return InvalidArgument(
        "the per-replica batch {} (--batch {} / --dp {}) is not divisible by --microbatches {}",
        local_rows_, c.global_batch, shape_.dp, c.microbatches);
  }
  mb_rows_ = local_rows_ / c.microbatches;
  return Status::Ok();
}

// The first and last stages read the source: it must fit the model.
Status Trainer::CheckSource(const ModelConfig& mc) const {
  const auto weights = static_cast<std::int64_t>(config_.class_weights.size());
  if (weights != 0 && (mc.loss != LossKind::kCrossEntropy || weights != mc.output_dim)) {
    return InvalidArgument("{} class weights for a model with {} {}", weights, mc.output_dim,
                           mc.loss == LossKind::kCrossEntropy ? "classes" : "regression outputs");
  }
  for (float w : config_.class_weights) {
    if (!(w > 0.0f) || !std::isfinite(w)) {
      return InvalidArgument("class weight {}: each must be positive and finite", w);
    }
  }
  if (pp_idx_ != 0 && pp_idx_ != shape_.pp - 1) return Status::Ok();
  if (source_ == nullptr) return InvalidArgument("the first and last stages need a data source");
  if (source_->feature_dim() != mc.input_dim) {
    return InvalidArgument("the data has {} features but the model expects {}",
                           source_->feature_dim(), mc.input_dim);
  }
  if (mc.loss == LossKind::kCrossEntropy &&
      (source_->num_classes() != mc.output_dim || source_->target_dim() != 1)) {
    return InvalidArgument("cross-entropy with {} classes needs class labels with {} classes",
                           mc.output_dim, mc.output_dim);
  }
  if (mc.loss == LossKind::kMse &&
      (source_->num_classes() != 0 || source_->target_dim() != mc.output_dim)) {
    return InvalidArgument("MSE with {} outputs needs {} regression targets per sample",
                           mc.output_dim, mc.output_dim);
  }
  return Status::Ok();
}

// The batch's inputs and targets, and the messages between stages.
void Trainer::AllocateActivations() {
  Model& m = *model_;
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const int nmb = config_.microbatches;
  m.Reserve(nmb, mb_rows_);
  const auto rows = static_cast<std::size_t>(mb_rows_);
  if (first) {
    const auto n = static_cast<std::size_t>(local_rows_ * m.config().input_dim);
    features_ = backend_->Alloc(n);
    if (!backend_->host_memory()) {
      for (Buffer& slot : host_features_) slot = backend_->AllocHost(n);
      next_features_ = backend_->Alloc(n);
    }
  } else {
    recv_act_ = backend_->Alloc(static_cast<std::size_t>(nmb) * rows *
                                static_cast<std::size_t>(m.input_width()));
  }
  if (last) {
    const auto n = static_cast<std::size_t>(local_rows_ * source_->target_dim());
    targets_ = backend_->Alloc(n);
    if (!backend_->host_memory()) {
      for (Buffer& slot : host_targets_) slot = backend_->AllocHost(n);
      next_targets_ = backend_->Alloc(n);
    }
    dlogits_ = backend_->Alloc(static_cast<std::size_t>(nmb) * rows *
                               static_cast<std::size_t>(m.output_width()));
    if (!config_.class_weights.empty()) {
      class_weight_ = backend_->Alloc(config_.class_weights.size());
      backend_->ToDevice(class_weight_.data(), config_.class_weights.data(),
                         config_.class_weights.size());
    }
  } else {
    recv_grad_ = backend_->Alloc(rows * static_cast<std::size_t>(m.output_width()));
  }
}

// AdamW's moments: for every parameter, or with ZeRO-1 for this replica's
// shard of the flat buffer (contiguous shards in dp order, the last shorter).
Status Trainer::AllocateOptimizer() {
  const std::size_t nparams = model_->num_params();
  if (config_.zero1) {
    if (backend_->name() != "cpu") {
      return InvalidArgument("--zero1 is implemented on --backend cpu only (backend '{}')",
                             backend_->name());
    }
    const auto dp = static_cast<std::size_t>(shape_.dp);
    const std::size_t per = (nparams + dp - 1) / dp;
    for (std::size_t r = 0; r < dp; ++r) {
      const std::size_t b = std::min(nparams, r * per), e = std::min(nparams, b + per);
      shard_counts_.push_back(e - b);
    }
    shard_begin_ = std::min(nparams, static_cast<std::size_t>(dp_idx_) * per);
    shard_end_ = shard_begin_ + shard_counts_[static_cast<std::size_t>(dp_idx_)];
    grad_shard_ = backend_->Alloc(shard_end_ - shard_begin_);
  } else {
    shard_begin_ = 0;
    shard_end_ = nparams;
  }
  m_ = backend_->Alloc(shard_end_ - shard_begin_);
  v_ = backend_->Alloc(shard_end_ - shard_begin_);
  return Status::Ok();
}

// Buckets from the last layer backwards, each at least bucket_bytes (a
// layer is never split: its gradients complete together).
void Trainer::MakeBuckets() {
  if (shape_.dp <= 1) return;
  const Model& m = *model_;
  Bucket cur;
  bool open = false;
  for (int i = m.num_local_layers() - 1; i >= 0; --i) {
    if (!open) {
      cur.end = m.layer_offset(i) + m.layer_size(i);
      open = true;
    }
    cur.begin = i == 0 ? 0 : m.layer_offset(i);  // the first stage's embeddings lead the buffer
    cur.start_layer = i;
    if ((cur.end - cur.begin) * sizeof(float) >= config_.bucket_bytes || i == 0) {
      buckets_.push_back(cur);
      open = false;
    }
  }
}

bool Trainer::contributes_loss() const {
  return pp_idx_ == shape_.pp - 1 && tp_idx_ == 0;
}

Status Trainer::RunBatch(double* loss_sum, double* busy_s, double* wall_s, bool sharded) {
  HPCML_RETURN_IF_ERROR(ReadBatch());
  model_->ZeroGradOnNextBackward();
  const bool allreduce = shape_.dp > 1 && !sharded;
  const bool overlap = allreduce && config_.overlap_dp;
  batch_ = BatchState{};
  if (overlap) {
    // A layer's last backward starts the buckets that begin at it.
    batch_.layer_done = [this](int layer) {
      while (batch_.next_bucket < buckets_.size() &&
             buckets_[batch_.next_bucket].start_layer == layer) {
        const Bucket& b = buckets_[batch_.next_bucket++];
        backend_->StartAllreduce(model_->grad_data() + b.begin, b.end - b.begin, Group::kData);
      }
    };
  }
  backend_->Synchronize();
  const auto t0 = Clock::now();
  RunSchedule();
  *wall_s = Seconds(t0, Clock::now());
  if (shape_.pp == 1) batch_.busy = *wall_s;
  if (allreduce) ReduceGradients(overlap);
  *loss_sum = batch_.loss;
  *busy_s = batch_.busy;
  return Status::Ok();
}

// Host-memory backends read straight into the batch buffers. Others take
// the batch a reader thread read into pinned host memory during the last
// step and this thread queued for upload on the backend's copy stream (at
// the poll in Step, or here if the read was not done by then), then start
// the reader on the next one: the host read and the upload overlap the
// device work instead of leaving the device idle in front of it (on an
// H200, 32 MiB of batch read, staged and copied had taken 14 of a step's
// 33 ms, docs/trainer.md). The first step, or the first after a restore,
// waits for its read. Only this thread calls the backend.
Status Trainer::ReadBatch() {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const bool ahead = !backend_->host_memory() && (first || last);
  Status read;
  if (ahead) {
    if (!ahead_) StartReadAhead();
    UploadReadAhead();
    read = std::exchange(ahead_status_, Status::Ok());
    backend_->WaitUploads();
    std::swap(features_, next_features_);
    std::swap(targets_, next_targets_);
  } else if (first || last) {
    read = source_->Next(local_rows_, first ? features_.data() : nullptr,
                         last ? targets_.data() : nullptr);
  }
  if (!read.ok()) read = std::move(read).WithContext(fmt::format("step {}", step_ + 1));
  // A rank that cannot read must not leave its peers waiting in the schedule.
  if (grid_ != nullptr) {
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid_->world(), read));
  } else {
    HPCML_RETURN_IF_ERROR(read);
  }
  if (ahead) {
    position_ = source_->SavePosition();
    StartReadAhead();
  }
  return Status::Ok();
}

// The reader fills the other pinned slot. Its last upload (two batches
// back) and the device work on next_features_/next_targets_ (the last
// batch's; at the first read, their zero fill) must be done: a step ends
// synchronised, so the wait returns at once then.
void Trainer::StartReadAhead() {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  backend_->Synchronize();
  ahead_ = true;
  uploaded_ = false;
  slot_ ^= 1;
  read_done_.store(false, std::memory_order_relaxed);
  float* f = first ? host_features_[slot_].data() : nullptr;
  float* t = last ? host_targets_[slot_].data() : nullptr;
  reader_ = std::thread([this, f, t] {
    try {
      ahead_status_ = source_->Next(local_rows_, f, t);
    } catch (const std::exception& e) {
      ahead_status_ = Internal("reading the next batch: {}", e.what());
    }
    read_done_.store(true, std::memory_order_release);
  });
}

// Waits for the reader (if it has not finished) and queues its batch's
// upload, once.
void Trainer::UploadReadAhead() {
  if (!ahead_ || uploaded_) return;
  JoinReadAhead();
  uploaded_ = true;
  if (!ahead_status_.ok()) return;
  const int s = slot_;
  if (host_features_[s].data() != nullptr) {
    ahead_status_ = backend_->UploadAsync(next_features_.data(), host_features_[s].data(),
                                          host_features_[s].size());
  }
  if (ahead_status_.ok() && host_targets_[s].data() != nullptr) {
    ahead_status_ = backend_->UploadAsync(next_targets_.data(), host_targets_[s].data(),
                                          host_targets_[s].size());
  }
}

void Trainer::JoinReadAhead() {
  if (reader_.joinable()) reader_.join();
}

Trainer::~Trainer() {
  JoinReadAhead();
}

std::string Trainer::SourcePosition() const {
  if (source_ == nullptr) return {};
  return ahead_ ? position_ : source_->SavePosition();
}

Status Trainer::RestoreSourcePosition(std::string_view position) {
  if (source_ == nullptr) return Status::Ok();
  JoinReadAhead();
  ahead_ = false;
  ahead_status_ = Status::Ok();
  backend_->WaitUploads();  // a queued upload finishes before its buffer is reused
  return source_->RestorePosition(position);
}

// Weight gradients (Model::WeightGrads) are off the critical path: a stage
// fills its waits with them, one layer (over its pending microbatches) at a
// time while the message it waits for has not arrived, and does the rest
// when its schedule ends (a later stage: while the stages before it drain).
// Only layers with two microbatches or more pending: one microbatch's
// product (K = its rows) added into a weight gradient that has left the
// cache ran at half speed and lengthened the first stage (GPipe m=8 bubble
// 1.32 x ideal, 1.20 with two).
// A pipeline stage's compute seconds since c0: the device drained first, so
// the bubble counts what ran. Without a pipeline (one stage) the stage is
// busy for the whole schedule (RunBatch), and the device is not drained
// between operations: every wait for the host leaves it idle.
void Trainer::AddBusy(Clock::time_point c0) {
  if (shape_.pp == 1) return;
  backend_->Synchronize();
  batch_.busy += Seconds(c0, Clock::now());
}

void Trainer::RecvFilling(float* buf, std::size_t n, int peer, int tag) {
  while (model_->most_pending() >= 2 && !backend_->Arrived(peer, tag)) {
    const auto c0 = Clock::now();
    model_->WeightGrads(batch_.layer_done, /*max_layers=*/1);
    backend_->Synchronize();
    batch_.busy += Seconds(c0, Clock::now());
  }
  backend_->Recv(buf, n, peer, tag);
}

void Trainer::RunSchedule() {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const std::vector<PipeOp> ops =
      BuildSchedule(config_.schedule, shape_.pp, pp_idx_, config_.microbatches);
  // Whether op k receives from a neighbour stage (see Backend::FlushSends):
  // an op that does not lets the sends before it go now.
  auto receives = [&](std::size_t k) {
    return k < ops.size() && (ops[k].forward ? !first : !last);
  };
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const bool flush = k + 1 < ops.size() && !receives(k + 1);
    if (ops[k].forward) {
      ForwardOp(ops[k].microbatch, flush);
    } else {
      BackwardOp(ops[k].microbatch, flush);
    }
  }
  // The weight gradients still pending, after the sends are on their way
  // (a backend holding its last send until WaitSends would keep the
  // previous stage waiting through them).
  backend_->FlushSends();
  const auto w0 = Clock::now();
  model_->WeightGrads(batch_.layer_done);
  backend_->Synchronize();
  batch_.busy += Seconds(w0, Clock::now());
  backend_->WaitSends();
}

const float* Trainer::StageInput(int mb) {
  const auto rows = static_cast<std::size_t>(mb_rows_);
  const auto in_w = static_cast<std::size_t>(model_->input_width());
  const auto at = static_cast<std::size_t>(mb) * rows;
  if (pp_idx_ == 0) {
    float* x = features_.data() + at * in_w;
    model_->Embed(mb, x);
    return x;
  }
  float* buf = recv_act_.data() + at * in_w;
  RecvFilling(buf, rows * in_w, pp_idx_ - 1, 2 * mb);
  return buf;
}

void Trainer::ForwardOp(int mb, bool flush) {
  const bool last = pp_idx_ == shape_.pp - 1;
  const ModelConfig& mc = model_->config();
  const auto rows = static_cast<std::size_t>(mb_rows_);
  const auto out_w = static_cast<std::size_t>(model_->output_width());
  const auto at = static_cast<std::size_t>(mb) * rows;
  const float* input = StageInput(mb);
  const auto c0 = Clock::now();
  model_->Forward(mb, input);
  if (last) {
    // Mean over the global batch: every sample's loss is scaled by 1/B.
    const float scale = 1.0f / static_cast<float>(config_.global_batch);
    const auto tdim = static_cast<std::size_t>(source_->target_dim());
    batch_.loss += backend_->LossAndGrad(mc.loss, model_->Output(mb), targets_.data() + at * tdim,
                                         mb_rows_, mc.output_dim, scale,
                                         dlogits_.data() + at * out_w, class_weight_.data());
  }
  AddBusy(c0);
  if (!last) backend_->Send(model_->Output(mb), rows * out_w, pp_idx_ + 1, 2 * mb);
  if (!last && flush) backend_->FlushSends();
}

void Trainer::BackwardOp(int mb, bool flush) {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const auto rows = static_cast<std::size_t>(mb_rows_);
  const auto in_w = static_cast<std::size_t>(model_->input_width());
  const auto out_w = static_cast<std::size_t>(model_->output_width());
  const float* dout;
  if (last) {
    dout = dlogits_.data() + static_cast<std::size_t>(mb) * rows * out_w;
  } else {
    RecvFilling(recv_grad_.data(), rows * out_w, pp_idx_ + 1, 2 * mb + 1);
    dout = recv_grad_.data();
  }
  const auto c0 = Clock::now();
  model_->Backward(mb, dout, !first);
  AddBusy(c0);
  if (!first) backend_->Send(model_->InputGrad(mb), rows * in_w, pp_idx_ - 1, 2 * mb + 1);
  if (!first && flush) backend_->FlushSends();
}

// Without overlap every bucket starts now; either way, wait for them all.
void Trainer::ReduceGradients(bool overlapped) {
  if (!overlapped) {
    for (const Bucket& b : buckets_) {
      backend_->StartAllreduce(model_->grad_data() + b.begin, b.end - b.begin, Group::kData);
    }
  }
  backend_->WaitAllreduces();
}

Result<double> Trainer::ForwardBackward() {
  double loss = 0.0, busy = 0.0, wall = 0.0;
  // The contract is the full averaged gradient, so never sharded here.
  HPCML_RETURN_IF_ERROR(RunBatch(&loss, &busy, &wall, /*sharded=*/false));
  double v = contributes_loss() ? loss : 0.0;
  if (grid_ != nullptr) backend_->AllreduceHost(&v, 1, Group::kWorld);
  return v / static_cast<double>(config_.global_batch);
}

Result<StepStats> Trainer::Step() {
  const auto t0 = Clock::now();
  double loss = 0.0, busy = 0.0, wall = 0.0;
  HPCML_RETURN_IF_ERROR(RunBatch(&loss, &busy, &wall, config_.zero1));
  // The next batch's upload, if its read is done, beside the update.
  if (ahead_ && read_done_.load(std::memory_order_acquire)) UploadReadAhead();
  if (config_.zero1) {
    backend_->ReduceScatter(model_->grad_data(), grad_shard_.data(), shard_counts_, Group::kData);
  }
  // World sums: squared gradient norm, loss, busy time of the stages of the
  // first replica.
  double sums[3] = {GradNormSquaredPart(), 0.0, 0.0};
  if (dp_idx_ == 0 && tp_idx_ == 0) sums[2] = busy;
  if (contributes_loss()) sums[1] = loss;
  if (grid_ != nullptr) backend_->AllreduceHost(sums, 3, Group::kWorld);
  // Bubble against one schedule time for all stages: the longest pipeline
  // phase (the stages start together, right after the world agreement in
  // RunBatch). Each stage's own wall time would not count the drain of the
  // last stage, which finishes its backwards before the first one does.
  if (grid_ != nullptr) {
    MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, grid_->world());
  }

  StepStats st;
  st.step = ++step_;
  st.grad_norm = std::sqrt(sums[0]);
  st.loss = sums[1] / static_cast<double>(config_.global_batch);
  // Every rank holds the same world sums, so all stop here together, before
  // the update: the parameters stay as the last finite step left them.
  if (!std::isfinite(st.loss) || !std::isfinite(st.grad_norm)) {
    return FailedPrecondition(
        "step {}: non-finite math: loss {}, gradient norm {} (the learning rate {:.3g} may be "
        "too high for this data); the parameters were not updated",
        st.step, st.loss, st.grad_norm, config_.lr.At(st.step));
  }
  st.bubble = wall > 0.0
                  ? std::clamp(1.0 - sums[2] / (static_cast<double>(shape_.pp) * wall), 0.0, 1.0)
                  : 0.0;
  st.busy_s = busy;
  st.lr = config_.lr.At(st.step);
  ApplyAdamW(st);
  backend_->Synchronize();
  HPCML_RETURN_IF_ERROR(backend_->status());
  st.step_time_s = Seconds(t0, Clock::now());
  st.samples_per_s =
      st.step_time_s > 0.0 ? static_cast<double>(config_.global_batch) / st.step_time_s : 0.0;
  return st;
}

// Each parameter counted once over the world: by the first replica (with
// ZeRO-1, by the replica whose shard holds it) and, when replicated over the
// tensor group, by tensor rank 0.
double Trainer::GradNormSquaredPart() const {
  std::vector<Backend::Span> spans;
  for (const ParamInfo& p : model_->params()) {
    if (p.tp_replicated && tp_idx_ != 0) continue;
    if (config_.zero1) {
      const auto [lo, hi] = InShard(p, shard_begin_, shard_end_);
      if (lo < hi) spans.push_back({grad_shard_.data() + (lo - shard_begin_), hi - lo});
    } else if (dp_idx_ == 0 && p.size > 0) {
      spans.push_back({model_->grad_data() + p.offset, p.size});
    }
  }
  return backend_->SumSquaresOf(spans);
}

// Updates the parameters whose moments this rank holds (all without ZeRO-1),
// then shares the updated shards.
void Trainer::ApplyAdamW(const StepStats& st) {
  AdamWStep a;
  a.lr = static_cast<float>(st.lr);
  a.beta1 = config_.beta1;
  a.beta2 = config_.beta2;
  a.eps = config_.eps;
  a.step = st.step;
  if (config_.clip > 0.0f && st.grad_norm > static_cast<double>(config_.clip)) {
    a.grad_scale = static_cast<float>(static_cast<double>(config_.clip) / (st.grad_norm + 1e-6));
  }
  const float* grads = config_.zero1 ? grad_shard_.data() : model_->grad_data() + shard_begin_;
  for (const ParamInfo& p : model_->params()) {
    const auto [lo, hi] = InShard(p, shard_begin_, shard_end_);
    if (lo >= hi) continue;
    a.weight_decay = p.is_bias ? 0.0f : config_.weight_decay;
    const std::size_t k = lo - shard_begin_;
    backend_->AdamW(model_->param_data() + lo, grads + k, m_.data() + k, v_.data() + k, hi - lo, a);
  }
  if (config_.zero1) backend_->AllGather(model_->param_data(), shard_counts_, Group::kData);
}

void Trainer::GatherMoments(std::vector<float>* m, std::vector<float>* v) const {
  const std::size_t n = model_->num_params(), mine = shard_end_ - shard_begin_;
  m->clear();
  v->clear();
  if (!config_.zero1 || grid_ == nullptr || shape_.dp == 1) {
    if (dp_idx_ != 0) return;
    m->resize(n);
    v->resize(n);
    backend_->ToHost(m->data(), m_.data(), n);
    backend_->ToHost(v->data(), v_.data(), n);
    return;
  }
  std::vector<float> host(mine);
  std::vector<int> counts(shard_counts_.begin(), shard_counts_.end()), displs(counts.size());
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  for (auto [src, dst] : {std::pair{m_.data(), m}, std::pair{v_.data(), v}}) {
    backend_->ToHost(host.data(), src, mine);
    if (dp_idx_ == 0) dst->resize(n);
    MPI_Gatherv(host.data(), static_cast<int>(mine), MPI_FLOAT, dst->data(), counts.data(),
                displs.data(), MPI_FLOAT, 0, grid_->dp_comm());
  }
}

Result<EvalMetrics> Trainer::Evaluate(EvalSource* val) {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const ModelConfig& mc = model_->config();
  const bool classes = mc.loss == LossKind::kCrossEntropy;
  // The source must fit the model where it is read; every rank learns the
  // number of batches of a pass from those that read it.
  Status fits;
  std::int64_t batches = 0;
  if (first || last) {
    if (val == nullptr) {
      fits = InvalidArgument("the first and last stages need a validation source");
    } else if (val->feature_dim() != mc.input_dim) {
      fits = InvalidArgument("the validation data has {} features but the model expects {}",
                             val->feature_dim(), mc.input_dim);
    } else if (val->num_classes() != (classes ? mc.output_dim : 0) ||
               val->target_dim() != (classes ? 1 : mc.output_dim)) {
      fits = InvalidArgument("the validation data's targets do not fit --loss {} with {} outputs",
                             Name(mc.loss), mc.output_dim);
    } else {
      batches = val->batches();
    }
  }
  if (grid_ != nullptr) {
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid_->world(), fits));
    MPI_Allreduce(MPI_IN_PLACE, &batches, 1, MPI_INT64_T, MPI_MAX, grid_->world());
  } else {
    HPCML_RETURN_IF_ERROR(fits);
  }

  const auto in_w = static_cast<std::size_t>(mc.input_dim);
  const std::size_t tdim = classes ? 1 : static_cast<std::size_t>(mc.output_dim);
  std::vector<float> host_x, host_t;
  if (first) host_x.resize(static_cast<std::size_t>(local_rows_) * in_w);
  if (last) host_t.resize(static_cast<std::size_t>(local_rows_) * tdim);
  EvalSums sums;
  std::vector<double> scores;
  std::vector<std::uint8_t> positive;
  for (std::int64_t b = 0; b < batches; ++b) {
    std::int64_t valid = 0;
    Status read;
    if (first || last) {
      auto n =
          val->Next(local_rows_, first ? host_x.data() : nullptr, last ? host_t.data() : nullptr);
      read = n.ok() ? Status::Ok()
                    : n.status().WithContext(fmt::format("evaluation at step {}", step_));
      if (n.ok()) valid = *n;
    }
    // A rank that cannot read must not leave its peers waiting in the passes.
    if (grid_ != nullptr) {
      HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid_->world(), read));
    } else {
      HPCML_RETURN_IF_ERROR(read);
    }
    if (first) {
      // Padding rows: zeros, so they stay finite (and are not counted).
      std::fill(host_x.begin() + static_cast<std::ptrdiff_t>(valid * mc.input_dim), host_x.end(),
                0.0f);
      backend_->ToDevice(features_.data(), host_x.data(), host_x.size());
    }
    ForwardOnly();
    if (last && tp_idx_ == 0) AddEvalRows(valid, host_t.data(), &sums, &scores, &positive);
  }
  HPCML_RETURN_IF_ERROR(backend_->status());

  double s[4] = {sums.rows, sums.loss_sum, sums.correct, sums.values};
  if (grid_ != nullptr) backend_->AllreduceHost(s, 4, Group::kWorld);
  const EvalSums all{s[0], s[1], s[2], s[3]};
  EvalMetrics r;
  r.step = step_;
  r.rows = static_cast<std::int64_t>(all.rows);
  r.loss = mc.loss;
  if (classes) {
    r.log_loss = LogLoss(all);
    r.accuracy = Accuracy(all);
    r.binary = mc.output_dim == 2;
    if (r.binary) GatheredBinary(scores, positive, &r);
  } else {
    r.mse = all.values > 0 ? all.loss_sum / all.values : kNoMetric;
    r.rmse = Rmse(all);
  }
  return r;
}

// All forwards of one batch, microbatch by microbatch (GPipe without the
// backwards); the schedule's tags and flushing rule, so no stage waits for
// a send that is held back.
void Trainer::ForwardOnly() {
  const bool first = pp_idx_ == 0, last = pp_idx_ == shape_.pp - 1;
  const auto rows = static_cast<std::size_t>(mb_rows_);
  const auto out_w = static_cast<std::size_t>(model_->output_width());
  const int nmb = config_.microbatches;
  for (int mb = 0; mb < nmb; ++mb) {
    // No weight gradients are pending between steps: StageInput only receives.
    model_->Forward(mb, StageInput(mb));
    if (!last) {
      backend_->Send(model_->Output(mb), rows * out_w, pp_idx_ + 1, 2 * mb);
      // The next operation receives (a later stage) unless this was the last.
      if (first || mb + 1 == nmb) backend_->FlushSends();
    }
  }
  backend_->WaitSends();
}

void Trainer::AddEvalRows(std::int64_t valid, const float* targets, EvalSums* sums,
                          std::vector<double>* scores, std::vector<std::uint8_t>* positive) {
  const ModelConfig& mc = model_->config();
  const auto out_w = static_cast<std::size_t>(mc.output_dim);
  std::vector<float> out(static_cast<std::size_t>(mb_rows_) * out_w);
  for (int mb = 0; mb < config_.microbatches; ++mb) {
    const std::int64_t at = mb * mb_rows_;
    const std::int64_t n = std::clamp<std::int64_t>(valid - at, 0, mb_rows_);
    if (n == 0) break;
    backend_->ToHost(out.data(), model_->Output(mb), static_cast<std::size_t>(n) * out_w);
    if (mc.loss == LossKind::kCrossEntropy) {
      AddCrossEntropy(out.data(), targets + at, n, mc.output_dim, sums, scores, positive);
    } else {
      AddSquaredError(out.data(), targets + at * mc.output_dim, n, mc.output_dim, sums);
    }
  }
}

// The binary scores of every replica's last stage (tensor rank 0) at world
// rank 0, in world rank order (replica order: the rows' order in the set),
// the AUC and the share of positives computed there and broadcast.
void Trainer::GatheredBinary(const std::vector<double>& scores,
                             const std::vector<std::uint8_t>& positive, EvalMetrics* out) const {
  if (grid_ == nullptr) {
    out->positive_rate = PositiveRate(positive);
    out->auc = RocAuc(scores, positive);
    return;
  }
  MPI_Comm world = grid_->world();
  const int size = grid_->size();
  const bool root = grid_->rank() == 0;
  int mine = static_cast<int>(scores.size());
  std::vector<int> counts(root ? static_cast<std::size_t>(size) : 0), displs(counts.size());
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += counts[i];
  }
  std::vector<double> all_scores(static_cast<std::size_t>(total));
  std::vector<std::uint8_t> all_pos(static_cast<std::size_t>(total));
  MPI_Gatherv(scores.data(), mine, MPI_DOUBLE, all_scores.data(), counts.data(), displs.data(),
              MPI_DOUBLE, 0, world);
  MPI_Gatherv(positive.data(), mine, MPI_UINT8_T, all_pos.data(), counts.data(), displs.data(),
              MPI_UINT8_T, 0, world);
  double figures[2] = {0.0, 0.0};
  if (root) {
    figures[0] = PositiveRate(all_pos);
    figures[1] = RocAuc(std::move(all_scores), all_pos);
  }
  MPI_Bcast(figures, 2, MPI_DOUBLE, 0, world);
  out->positive_rate = figures[0];
  out->auc = figures[1];
}

Status Trainer::Run(std::int64_t steps,
                    const std::function<Result<AfterStep>(const StepStats&)>& after_step) {
  while (step_ < steps) {
    HPCML_ASSIGN_OR_RETURN(StepStats st, Step());
    if (!after_step) continue;
    HPCML_ASSIGN_OR_RETURN(AfterStep next, after_step(st));
    if (next == AfterStep::kStop) break;
  }
  return Status::Ok();
}

}  // namespace hpcml::trainer
