// CUDA backend: fp32 master weights and activations in device memory, GEMMs
// on cuBLAS with bf16 tensor-core compute (CUBLAS_COMPUTE_32F_FAST_16BF:
// fp32 storage, inputs rounded to bf16, fp32 accumulation), collectives on
// NCCL communicators (one per tensor / data / world group, ids broadcast
// over MPI), host sums of doubles over MPI.
//
// Pipeline point-to-point (pp > 1): NCCL send/receive on a pipeline
// communicator, on a stream of their own. Send only records the message;
// Recv issues every held send together with the receive in one
// ncclGroupStart/End, so a send never sits in front of the receive its peer
// is waiting for (grouped operations progress together: the CPU backend's
// MPI_Isend + MPI_Recv). FlushSends issues held sends alone, which the
// schedule does only when its next operation receives nothing, and WaitSends
// flushes and orders later compute after the sends. NCCL matches messages
// between two ranks in issue order, which the schedules keep; tags are not
// used. Compiled, never run on a GPU yet.
// Errors of asynchronous calls are sticky and surface through status()
// after the step.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "../cuda/kernels.cuh"
#include "hpcml/trainer/backend.hpp"

namespace hpcml::trainer {
namespace {

// Move-only owners of the CUDA, cuBLAS and NCCL handles.
template <typename T, auto Destroy>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  T get() const { return h_; }
  void reset() {
    if (h_ != T{}) Destroy(h_);
    h_ = T{};
  }

 private:
  T h_{};
};

using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Cublas = Handle<cublasHandle_t, cublasDestroy>;
using Nccl = Handle<ncclComm_t, ncclCommDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;

Status CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal("CUDA {}: {}", what, cudaGetErrorString(e));
}

Status NcclCheck(ncclResult_t e, const char* what) {
  if (e == ncclSuccess) return Status::Ok();
  return Internal("NCCL {}: {}", what, ncclGetErrorString(e));
}

// One NCCL communicator over the members of `comm` (collective over it).
Result<Nccl> MakeNccl(MPI_Comm comm) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size == 1) return Nccl();  // a group of one needs no communication
  ncclUniqueId id{};
  if (rank == 0) HPCML_RETURN_IF_ERROR(NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm);
  ncclComm_t c = nullptr;
  HPCML_RETURN_IF_ERROR(NcclCheck(ncclCommInitRank(&c, size, id, rank), "ncclCommInitRank"));
  return Nccl(c);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const ProcessGrid* grid) : grid_(grid) {}

  Status Init(int device) {
    HPCML_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device), "cudaSetDevice"));
    cudaStream_t s = nullptr;
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    stream_ = Stream(s);
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return Internal("cublasCreate failed");
    cublas_ = Cublas(h);
    if (cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS) return Internal("cublasSetStream failed");
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    p2p_stream_ = Stream(s);
    for (Event* e : {&compute_done_, &p2p_done_}) {
      cudaEvent_t ev = nullptr;
      HPCML_RETURN_IF_ERROR(
          CudaCheck(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate"));
      *e = Event(ev);
    }
    void* p = nullptr;
    HPCML_RETURN_IF_ERROR(CudaCheck(cudaMalloc(&p, sizeof(double)), "cudaMalloc"));
    scalar_ = static_cast<double*>(p);
    return Status::Ok();
  }

  // Collective over the grid's world: every rank creates the same groups in
  // the same order.
  Status InitNccl() {
    if (grid_ == nullptr) return Status::Ok();
    HPCML_ASSIGN_OR_RETURN(tp_, MakeNccl(grid_->tp_comm()));
    HPCML_ASSIGN_OR_RETURN(dp_, MakeNccl(grid_->dp_comm()));
    HPCML_ASSIGN_OR_RETURN(world_, MakeNccl(grid_->world()));
    HPCML_ASSIGN_OR_RETURN(pp_, MakeNccl(grid_->pp_comm()));
    return Status::Ok();
  }

  ~CudaBackend() override {
    // Held sends are dropped, not issued: their peers may be gone.
    if (p2p_stream_.get() != nullptr) cudaStreamSynchronize(p2p_stream_.get());
    if (stream_.get() != nullptr) cudaStreamSynchronize(stream_.get());
    if (scalar_ != nullptr) cudaFree(scalar_);
    if (row_loss_ != nullptr) cudaFree(row_loss_);
  }

  std::string_view name() const override { return "cuda"; }
  Status status() const override { return error_; }

  Buffer Alloc(std::size_t n) override {
    void* p = nullptr;
    Note(CudaCheck(cudaMalloc(&p, (n == 0 ? 1 : n) * sizeof(float)), "cudaMalloc"));
    if (p != nullptr) Note(CudaCheck(cudaMemset(p, 0, n * sizeof(float)), "cudaMemset"));
    return Buffer(this, static_cast<float*>(p), p != nullptr ? n : 0);
  }
  void Free(float* p) noexcept override { cudaFree(p); }
  void ToDevice(float* dst, const float* host, std::size_t n) override {
    Note(CudaCheck(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, S()),
                   "copy to device"));
    Synchronize();  // the host buffer may change right after
  }
  void ToHost(float* host, const float* src, std::size_t n) override {
    Note(CudaCheck(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, S()),
                   "copy to host"));
    Synchronize();
  }
  void Copy(float* dst, const float* src, std::size_t n) override {
    if (n == 0 || dst == src) return;
    Note(CudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, S()),
                   "copy"));
  }
  void Fill(float* x, std::size_t n, float v) override { cuda::Fill(x, n, v, S()); }

  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
    // row-major matrix read column-major is its transpose.
    const cublasStatus_t st = cublasGemmEx(
        cublas_.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F,
        static_cast<int>(ldb), a, CUDA_R_32F, static_cast<int>(lda), &beta, c, CUDA_R_32F,
        static_cast<int>(ldc), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      Note(Internal("cublasGemmEx failed ({})", static_cast<int>(st)));
  }
  void AddBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override {
    cuda::AddBias(y, bias, rows, cols, S());
  }
  void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    cuda::BiasGrad(dy, rows, cols, db, S());
  }
  void ActForward(Activation act, const float* pre, float* out, std::size_t n) override {
    cuda::ActForward(static_cast<int>(act), pre, out, n, S());
  }
  void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    cuda::ActBackward(static_cast<int>(act), pre, dout, dpre, n, S());
  }

  double LossAndGrad(LossKind loss, const float* logits, const float* targets, std::int64_t rows,
                     std::int64_t cols, float scale, float* dlogits) override {
    if (rows > row_loss_rows_) {
      if (row_loss_ != nullptr) cudaFree(row_loss_);
      void* p = nullptr;
      Note(
          CudaCheck(cudaMalloc(&p, static_cast<std::size_t>(rows) * sizeof(double)), "cudaMalloc"));
      row_loss_ = static_cast<double*>(p);
      row_loss_rows_ = p != nullptr ? rows : 0;
      if (p == nullptr) return std::nan("");
    }
    if (loss == LossKind::kCrossEntropy) {
      cuda::CrossEntropy(logits, targets, rows, cols, scale, dlogits, row_loss_, S());
    } else {
      cuda::Mse(logits, targets, rows, cols, scale, dlogits, row_loss_, S());
    }
    host_loss_.resize(static_cast<std::size_t>(rows));
    Note(CudaCheck(cudaMemcpyAsync(host_loss_.data(), row_loss_,
                                   static_cast<std::size_t>(rows) * sizeof(double),
                                   cudaMemcpyDeviceToHost, S()),
                   "loss to host"));
    Synchronize();
    double total = 0.0;
    for (double v : host_loss_) total += v;
    return total;
  }

  double SumSquares(const float* x, std::size_t n) override {
    double out = 0.0;
    Note(CudaCheck(cudaMemsetAsync(scalar_, 0, sizeof(double), S()), "memset"));
    cuda::SumSquares(x, n, scalar_, S());
    Note(CudaCheck(cudaMemcpyAsync(&out, scalar_, sizeof(double), cudaMemcpyDeviceToHost, S()),
                   "norm to host"));
    Synchronize();
    return out;
  }

  void AdamW(float* param, const float* grad, float* m, float* v, std::size_t n,
             const AdamWStep& st) override {
    const double bc1 = 1.0 - std::pow(static_cast<double>(st.beta1), static_cast<double>(st.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(st.beta2), static_cast<double>(st.step));
    cuda::AdamArgs a{st.beta1,
                     st.beta2,
                     st.eps,
                     1.0f - st.lr * st.weight_decay,
                     st.grad_scale,
                     static_cast<float>(static_cast<double>(st.lr) / bc1),
                     static_cast<float>(1.0 / std::sqrt(bc2))};
    cuda::AdamW(param, grad, m, v, n, a, S());
  }

  void Allreduce(float* x, std::size_t n, Group g) override {
    ncclComm_t c = Comm(g);
    if (c == nullptr || n == 0) return;
    Note(NcclCheck(ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, S()), "ncclAllReduce"));
  }
  // Queued on the compute stream: later kernels see the result, so waiting
  // is implicit (no overlap with the backward pass on this backend yet).
  void StartAllreduce(float* x, std::size_t n, Group g) override { Allreduce(x, n, g); }
  void WaitAllreduces() override {}

  void AllreduceHost(double* x, std::size_t n, Group g) override {
    if (grid_ == nullptr || n == 0) return;
    MPI_Comm c = g == Group::kTensor     ? grid_->tp_comm()
                 : g == Group::kData     ? grid_->dp_comm()
                 : g == Group::kPipeline ? grid_->pp_comm()
                                         : grid_->world();
    MPI_Allreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c);
  }

  // ZeRO-1 runs on the cpu backend only; Trainer::Create refuses --zero1 on
  // this one, so these are never reached.
  void ReduceScatter(const float*, float*, const std::vector<std::size_t>&, Group) override {
    Note(Unavailable("--zero1 reduce-scatter on the cuda backend"));
  }
  void AllGather(float*, const std::vector<std::size_t>&, Group) override {
    Note(Unavailable("--zero1 all-gather on the cuda backend"));
  }

  // Pipeline point-to-point (see the file comment). `peer_stage` is the
  // peer's rank in the pipeline communicator.
  void Send(const float* x, std::size_t n, int peer_stage, int /*tag*/) override {
    held_.push_back(HeldSend{x, n, peer_stage});
  }
  void Recv(float* x, std::size_t n, int peer_stage, int /*tag*/) override {
    IssueP2p(x, n, peer_stage);
    // Compute queued after this sees the received data.
    Note(CudaCheck(cudaEventRecord(p2p_done_.get(), p2p_stream_.get()), "cudaEventRecord"));
    Note(CudaCheck(cudaStreamWaitEvent(S(), p2p_done_.get(), 0), "cudaStreamWaitEvent"));
  }
  void FlushSends() override {
    if (!held_.empty()) IssueP2p(nullptr, 0, -1);
  }
  void WaitSends() override {
    FlushSends();
    // Later compute may overwrite the send buffers only after the sends.
    Note(CudaCheck(cudaEventRecord(p2p_done_.get(), p2p_stream_.get()), "cudaEventRecord"));
    Note(CudaCheck(cudaStreamWaitEvent(S(), p2p_done_.get(), 0), "cudaStreamWaitEvent"));
  }

  void Synchronize() override {
    Note(CudaCheck(cudaStreamSynchronize(S()), "cudaStreamSynchronize"));
  }

 private:
  cudaStream_t S() const { return stream_.get(); }

  // One NCCL group on the p2p stream: every held send, plus a receive into
  // `recv` when it is not null. The p2p stream first waits for the compute
  // queued so far (the sent data is produced there, and the receive buffer
  // may still be read there).
  void IssueP2p(float* recv, std::size_t n, int recv_peer) {
    ncclComm_t c = pp_.get();
    if (c == nullptr) {
      Note(Internal("pipeline send/receive without a pipeline communicator"));
      held_.clear();
      return;
    }
    Note(CudaCheck(cudaEventRecord(compute_done_.get(), S()), "cudaEventRecord"));
    Note(CudaCheck(cudaStreamWaitEvent(p2p_stream_.get(), compute_done_.get(), 0),
                   "cudaStreamWaitEvent"));
    Note(NcclCheck(ncclGroupStart(), "ncclGroupStart"));
    for (const HeldSend& h : held_) {
      Note(NcclCheck(ncclSend(h.data, h.n, ncclFloat, h.peer, c, p2p_stream_.get()), "ncclSend"));
    }
    if (recv != nullptr) {
      Note(NcclCheck(ncclRecv(recv, n, ncclFloat, recv_peer, c, p2p_stream_.get()), "ncclRecv"));
    }
    Note(NcclCheck(ncclGroupEnd(), "ncclGroupEnd"));
    held_.clear();
  }
  void Note(Status s) {
    if (error_.ok() && !s.ok()) error_ = std::move(s);
  }
  ncclComm_t Comm(Group g) const {
    switch (g) {
      case Group::kTensor:
        return tp_.get();
      case Group::kData:
        return dp_.get();
      case Group::kWorld:
        return world_.get();
      case Group::kPipeline:
        return pp_.get();
    }
    return nullptr;
  }

  struct HeldSend {
    const float* data;
    std::size_t n;
    int peer;
  };

  const ProcessGrid* grid_;
  Stream stream_;
  Cublas cublas_;
  Stream p2p_stream_;              // pipeline sends and receives
  Event compute_done_, p2p_done_;  // ordering between the two streams
  std::vector<HeldSend> held_;     // sends not issued yet (see the file comment)
  Nccl tp_, dp_, world_, pp_;
  double* scalar_ = nullptr;
  double* row_loss_ = nullptr;
  std::int64_t row_loss_rows_ = 0;
  std::vector<double> host_loss_;
  Status error_;
};

}  // namespace

bool CudaBackendBuilt() {
  return true;
}

Result<std::unique_ptr<Backend>> MakeCudaBackend(const ProcessGrid* grid) {
  // Local checks first, agreed on by all ranks before any collective setup.
  Status local;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    local = Unavailable(
        "--backend cuda: no GPU visible (CUDA_VISIBLE_DEVICES={})",
        std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "unset");
  }
  int local_rank = 0;
  if (grid != nullptr) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(grid->world(), MPI_COMM_TYPE_SHARED, grid->rank(), MPI_INFO_NULL, &node);
    MpiComm owner(node);
    local_rank = owner.rank();
  }
  auto b = std::make_unique<CudaBackend>(grid);
  if (local.ok()) local = b->Init(devices > 0 ? local_rank % devices : 0);
  if (grid != nullptr)
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid->world(), local));
  else
    HPCML_RETURN_IF_ERROR(local);
  HPCML_RETURN_IF_ERROR(b->InitNccl());
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace hpcml::trainer
