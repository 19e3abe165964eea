// CUDA backend: fp32 master weights and activations in device memory, GEMMs
// on cuBLAS with bf16 tensor cores (operands rounded to bf16 copies, fp32
// accumulation and output; see Gemm), kernels in
// ../cuda/kernels.cu, NCCL communicators for the tensor, data and pipeline
// groups (ids broadcast over MPI), host sums of doubles over MPI.
//
// One stream. Every kernel, copy, cuBLAS call and NCCL operation of this
// rank goes on one compute stream (the one exception: batch uploads, on a
// copy stream the compute stream waits for with an event), so operations of two
// communicators are never in flight at once: NCCL does not guarantee progress for concurrent
// communicators (its kernels block waiting for peers and may need the
// device). The price is that a pipeline send no longer overlaps compute.
//
// Pipeline point-to-point (pp > 1): Send only records the message; Recv
// issues every held send together with the receive in one
// ncclGroupStart/End, so a send never sits in front of the receive its peer
// is waiting for (grouped operations progress together: the CPU backend's
// MPI_Isend + MPI_Recv). FlushSends issues held sends alone, which the
// schedule does only when its next operation receives nothing. NCCL
// matches messages between two ranks in issue order, which the schedules
// keep; tags are not used.
//
// Host waits (Synchronize, values returned to the host, ToHost) poll the
// stream and, with communicators, ncclCommGetAsyncError of each, with a
// deadline (HPCML_NCCL_TIMEOUT_S, default 600 s): a dead or stuck peer
// fails the step instead of hanging it. Any failure aborts the
// communicators (ncclCommAbort); a clean end finalizes them
// (ncclCommFinalize, then ncclCommDestroy, the same order on every rank).
//
// Errors are sticky and surface through status(); kernel launches are
// checked where they are made. Reductions are deterministic (see
// kernels.cuh), and so are cuBLAS GEMMs on one GPU model and cuBLAS version
// (no atomics mode): a run repeats bit for bit on the same machine.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "../cuda/kernels.cuh"
#include "hpcml/common/mpi.hpp"
#include "hpcml/common/owner.hpp"
#include "hpcml/trainer/backend.hpp"

namespace hpcml::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Owners (owner.hpp) of the CUDA and cuBLAS handles.
using Stream = Owner<CloseWith<cudaStream_t, cudaStreamDestroy>>;
using Event = Owner<CloseWith<cudaEvent_t, cudaEventDestroy>>;
using Cublas = Owner<CloseWith<cublasHandle_t, cublasDestroy>>;

Status CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal("CUDA {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

Status NcclCheck(ncclResult_t e, const char* what) {
  if (e == ncclSuccess) return Status::Ok();
  return Internal("NCCL {}: {}", what, ncclGetErrorString(e));
}

// Owner of a communicator. Finalize() is the clean end (ncclCommFinalize
// flushes outstanding work and waits for the peers to finalize too, then
// ncclCommDestroy); the destructor aborts, which never waits for peers.
class NcclComm : public Owner<CloseWith<ncclComm_t, ncclCommAbort>> {
 public:
  using Owner::Owner;
  Status Finalize() {
    if (!valid()) return Status::Ok();
    ncclComm_t c = release();
    Status s = NcclCheck(ncclCommFinalize(c), "ncclCommFinalize");
    if (!s.ok()) {
      ncclCommAbort(c);
      return s;
    }
    return NcclCheck(ncclCommDestroy(c), "ncclCommDestroy");
  }
};

// How long a member waits in ncclCommInitRank for its peers: a peer that
// failed before it (no GPU memory, a lost process) never arrives.
constexpr std::chrono::seconds kNcclInitTimeout{120};

// Initialises `c` without blocking (config.blocking = 0) and polls it until
// it is ready, fails, or `timeout` passes: a member never waits for ever
// for a peer that is not coming.
Status InitNcclComm(ncclComm_t* c, int size, const ncclUniqueId& id, int rank,
                    std::chrono::steady_clock::duration timeout) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(c, size, id, rank, &config);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (r == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline)
      return Unavailable(
          "NCCL ncclCommInitRankConfig: rank {} of {}: its peers did not all "
          "arrive within {} s",
          rank, size, std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(*c, &r) != ncclSuccess) r = ncclInternalError;
  }
  return NcclCheck(r, "ncclCommInitRankConfig");
}

// One NCCL communicator over the members of `comm` (collective over it):
// every member returns its communicator, or every member the same error
// (agreed on over MPI before and after the NCCL set-up, so no member is
// left waiting in a collective its peers skipped). A member's half-made
// communicator is aborted (NcclComm's destructor).
Result<NcclComm> MakeNccl(MPI_Comm comm,
                          std::chrono::steady_clock::duration timeout = kNcclInitTimeout) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size == 1) return NcclComm();  // a group of one needs no communication
  ncclUniqueId id{};
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(
      comm, rank == 0 ? NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId") : Status::Ok()));
  MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm);
  ncclComm_t c = nullptr;
  Status made = InitNcclComm(&c, size, id, rank, timeout);
  NcclComm owner(c);
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(comm, made));
  return owner;
}

// Device scratch that grows with stream-ordered allocation on the compute
// stream: no device-wide synchronisation inside a step (cudaFree waits for
// the whole device, including an NCCL kernel that waits for this host).
class Scratch {
 public:
  Status Ensure(std::size_t bytes, cudaStream_t s) {
    if (bytes <= bytes_) return Status::Ok();
    Release(s);
    void* p = nullptr;
    HPCML_RETURN_IF_ERROR(CudaCheck(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync"));
    p_ = p;
    bytes_ = bytes;
    return Status::Ok();
  }
  void Release(cudaStream_t s) noexcept {
    if (p_ != nullptr) cudaFreeAsync(p_, s);
    p_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// bf16 copies of GEMM operands, kept while their fp32 source is unchanged,
// so an operand is rounded once per write of it rather than once per GEMM
// that reads it (a weight feeds the forward and the input-gradient GEMMs, an
// activation the forward and the weight-gradient ones, an output gradient
// the input- and weight-gradient ones): on an H200 the roundings were 2.6 ms
// of a 20.5 ms step. A copy is keyed by the operand's pointer, row stride,
// rows and columns. Every backend call that writes device memory marks the
// copies overlapping what it wrote stale (Wrote); a kernel that writes a
// whole contiguous operand writes its copy too when one is kept (Target:
// the rounding then costs one 2-byte store per element).
//
// A kernel may also write only the copy (TargetOwed): the fp32 source is
// then owed, and is widened from the copy before anything reads it as fp32
// (Reading, which every backend call that reads device memory makes) or
// writes part of it. What was owed and read back has bf16 precision: the
// value every GEMM reading it used anyway.
class Bf16Cache {
 public:
  // Beyond this many copies operands are rounded into scratch each time.
  static constexpr std::size_t kMaxCopies = 64;

  // The stream widenings are queued on, and where their failures go.
  void Use(cudaStream_t s, std::function<void(Status)> note) {
    s_ = s;
    note_ = std::move(note);
  }

  // The copy of the operand, rounded now if stale; nullptr when none is
  // kept (the cache is full) or on failure (*error set).
  void* Get(const float* p, std::int64_t ld, std::int64_t rows, std::int64_t cols, cudaStream_t s,
            Status* error) {
    Copy* c = Find(p, ld, rows, cols);
    if (c == nullptr) {
      if (copies_.size() >= kMaxCopies) return nullptr;
      copies_.push_back(std::make_unique<Copy>());
      c = copies_.back().get();
      *c = Copy{const_cast<float*>(p), ld, rows, cols, Extent(ld, rows, cols), {}, false, false};
      *error = c->buf.Ensure(c->extent * 2, s);
      if (!error->ok()) {
        copies_.pop_back();
        return nullptr;
      }
    }
    if (!c->fresh) {
      Reading(p, c->extent);
      *error = CudaCheck(cuda::ToBf16(p, ld, rows, cols, c->buf.as<void>(), s), "ToBf16");
      if (!error->ok()) return nullptr;
      c->fresh = true;
    }
    return c->buf.as<void>();
  }
  // `n` floats at p are about to be written. An owed copy the write does
  // not cover whole is widened first (its other elements stay).
  void Wrote(const void* p, std::size_t n) {
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t hi = lo + n * sizeof(float);
    for (auto& c : copies_) {
      const auto c_lo = reinterpret_cast<std::uintptr_t>(c->p);
      const std::uintptr_t c_hi = c_lo + c->extent * sizeof(float);
      if (!(c_lo < hi && lo < c_hi)) continue;
      if (c->owed && !(lo <= c_lo && c_hi <= hi)) Widen(*c);
      c->owed = false;
      c->fresh = false;
    }
  }
  // `n` floats at p are about to be read as fp32: owed copies there are
  // widened first.
  void Reading(const void* p, std::size_t n) {
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t hi = lo + n * sizeof(float);
    for (auto& c : copies_) {
      const auto c_lo = reinterpret_cast<std::uintptr_t>(c->p);
      if (c->owed && c_lo < hi && lo < c_lo + c->extent * sizeof(float)) Widen(*c);
    }
  }
  // Device memory was written where only the device knows.
  void WroteAnywhere() {
    for (auto& c : copies_) {
      if (c->owed) Widen(*c);
      c->fresh = false;
    }
  }
  // A kernel is about to write the n contiguous floats at p: the copy of a
  // contiguous operand of exactly those it must write too (then fresh), or
  // nullptr; the other copies it overlaps go stale.
  void* Target(float* p, std::size_t n) {
    Wrote(p, n);
    Copy* c = Exact(p, n);
    if (c == nullptr) return nullptr;
    c->fresh = true;
    return c->buf.as<void>();
  }
  // As Target, for a kernel that writes only the copy: the n floats at p
  // are owed from then on. nullptr (nothing owed) when no such copy is kept.
  void* TargetOwed(float* p, std::size_t n) {
    Wrote(p, n);
    Copy* c = Exact(p, n);
    if (c == nullptr) return nullptr;
    c->fresh = true;
    c->owed = true;
    return c->buf.as<void>();
  }
  // Widens what is owed, then drops every copy.
  void Clear(cudaStream_t s) {
    for (auto& c : copies_) {
      if (c->owed) Widen(*c);
    }
    for (auto& c : copies_) c->buf.Release(s);
    copies_.clear();
  }

 private:
  struct Copy {
    float* p;
    std::int64_t ld, rows, cols;
    std::size_t extent;  // floats from p to the last element
    Scratch buf;
    bool fresh;  // buf holds p's values rounded
    bool owed;   // p's values are only in buf (then fresh too)
  };
  static std::size_t Extent(std::int64_t ld, std::int64_t rows, std::int64_t cols) {
    return static_cast<std::size_t>((rows - 1) * ld + cols);
  }
  Copy* Find(const float* p, std::int64_t ld, std::int64_t rows, std::int64_t cols) {
    for (auto& c : copies_) {
      if (c->p == p && c->ld == ld && c->rows == rows && c->cols == cols) return c.get();
    }
    return nullptr;
  }
  Copy* Exact(const float* p, std::size_t n) {
    for (auto& c : copies_) {
      if (c->p == p && c->ld == c->cols && static_cast<std::size_t>(c->rows * c->cols) == n) {
        return c.get();
      }
    }
    return nullptr;
  }
  void Widen(Copy& c) {
    c.owed = false;
    const cudaError_t e = cuda::FromBf16(c.buf.as<void>(), c.ld, c.rows, c.cols, c.p, s_);
    if (e != cudaSuccess && note_) note_(CudaCheck(e, "FromBf16"));
  }
  cudaStream_t s_ = nullptr;
  std::function<void(Status)> note_;
  std::vector<std::unique_ptr<Copy>> copies_;
};

// Floats per staged copy: larger transfers go in pieces of this size.
constexpr std::size_t kStageChunk = std::size_t{16} << 20;  // 64 MiB

Result<double> TimeoutSeconds() {
  const char* v = std::getenv("HPCML_NCCL_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return 600.0;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(t > 0.0)) {
    return InvalidArgument("HPCML_NCCL_TIMEOUT_S={}: want a positive number of seconds", v);
  }
  return t;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const ProcessGrid* grid) : grid_(grid) {}

  Status Init(int device) {
    HPCML_ASSIGN_OR_RETURN(timeout_s_, TimeoutSeconds());
    device_ = device;
    HPCML_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device), "cudaSetDevice"));
    int pools = 0;
    HPCML_RETURN_IF_ERROR(CudaCheck(
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device), "attribute"));
    if (pools == 0) {
      return FailedPrecondition("--backend cuda: GPU {} has no stream-ordered allocator", device);
    }
    // Non-blocking: libraries' work on the legacy default stream must not
    // serialise with ours. Everything of this backend but the batch uploads
    // is on the compute stream, cuBLAS included.
    cudaStream_t compute = nullptr, uploads = nullptr;
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate"));
    stream_ = Stream(compute);
    HPCML_RETURN_IF_ERROR(CudaCheck(cudaStreamCreateWithFlags(&uploads, cudaStreamNonBlocking),
                                    "cudaStreamCreate (uploads)"));
    copy_stream_ = Stream(uploads);
    cudaEvent_t e = nullptr;
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    upload_done_ = Event(e);
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return Internal("cublasCreate failed");
    cublas_ = Cublas(h);
    if (cublasSetStream(h, compute) != CUBLAS_STATUS_SUCCESS) {
      return Internal("cublasSetStream failed");
    }
    bf16_.Use(compute, [this](Status st) { Fail(std::move(st)); });
    void* p = nullptr;
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaMalloc(&p, (cuda::kSumPartials + 1) * sizeof(double)), "cudaMalloc"));
    partials_ = static_cast<double*>(p);
    HPCML_RETURN_IF_ERROR(
        CudaCheck(cudaHostAlloc(&p, sizeof(double), cudaHostAllocDefault), "cudaHostAlloc"));
    host_scalar_ = static_cast<double*>(p);
    return Status::Ok();
  }

  // Collective over the grid's world: every rank creates the same groups in
  // the same order. No world communicator: nothing reduces device memory
  // over the whole world (host sums go over MPI).
  Status InitNccl() {
    if (grid_ == nullptr) return Status::Ok();
    HPCML_ASSIGN_OR_RETURN(tp_, MakeNccl(grid_->tp_comm()));
    HPCML_ASSIGN_OR_RETURN(dp_, MakeNccl(grid_->dp_comm()));
    HPCML_ASSIGN_OR_RETURN(pp_, MakeNccl(grid_->pp_comm()));
    return Status::Ok();
  }

  ~CudaBackend() override {
    // Held sends are dropped, not issued: their peers may be gone.
    held_.clear();
    if (stream_.get() != nullptr) (void)Drain();
    if (error_.ok()) {
      // Same order as creation on every rank: finalize waits for the peers.
      for (NcclComm* c : {&tp_, &dp_, &pp_}) {
        Status s = c->Finalize();
        if (!s.ok()) {
          Note(std::move(s));
          AbortComms();
          break;
        }
      }
    } else {
      AbortComms();
    }
    if (stream_.get() != nullptr) {
      row_loss_.Release(S());
      norms_.Release(S());
      bf16_.Clear(S());
      bias_scratch_.Release(S());
      a16_.Release(S());
      b16_.Release(S());
      cudaStreamSynchronize(S());
    }
    if (partials_ != nullptr) cudaFree(partials_);
    if (host_scalar_ != nullptr) cudaFreeHost(host_scalar_);
    if (stage_ != nullptr) cudaFreeHost(stage_);
    // A destructor has no caller to return to; say why the end was unclean.
    if (!error_.ok()) std::fprintf(stderr, "hpcml cuda backend: %s\n", error_.ToString().c_str());
  }

  std::string_view name() const override { return "cuda"; }
  Status status() const override { return error_; }

  // Zero-filled on the compute stream, so the fill is ordered before
  // anything this backend later does with the buffer (a cudaMemset on the
  // legacy stream would not be: ours is non-blocking).
  Buffer Alloc(std::size_t n) override {
    void* p = nullptr;
    Note(CudaCheck(cudaMalloc(&p, (n == 0 ? 1 : n) * sizeof(float)), "cudaMalloc"));
    if (p != nullptr && n > 0) {
      bf16_.Wrote(p, n);
      Note(CudaCheck(cudaMemsetAsync(p, 0, n * sizeof(float), S()), "cudaMemsetAsync"));
    }
    return Buffer(this, static_cast<float*>(p), p != nullptr ? n : 0);
  }
  void Free(float* p) noexcept override {
    // cudaFree waits for the device: drain (and poll NCCL) first, so a
    // stuck communicator is aborted rather than hanging here.
    // Copies of what lived there must not outlive it; what other buffers
    // owe is widened first, and that is done before the free too.
    if (stream_.get() != nullptr) {
      bf16_.Clear(S());
      (void)Drain();
    }
    cudaFree(p);
  }
  // Through pinned staging: returns without waiting (the host buffer may
  // change right after; its contents are already copied).
  void ToDevice(float* dst, const float* host, std::size_t n) override {
    bf16_.Wrote(dst, n);
    for (std::size_t done = 0; done < n;) {
      const std::size_t k = std::min(n - done, kStageChunk);
      float* st = Stage(k);
      if (st == nullptr) return;
      std::memcpy(st, host + done, k * sizeof(float));
      Note(
          CudaCheck(cudaMemcpyAsync(dst + done, st, k * sizeof(float), cudaMemcpyHostToDevice, S()),
                    "copy to device"));
      done += k;
    }
  }
  void ToHost(float* host, const float* src, std::size_t n) override {
    bf16_.Reading(src, n);
    for (std::size_t done = 0; done < n;) {
      const std::size_t k = std::min(n - done, kStageChunk);
      float* st = Stage(k);
      if (st == nullptr) return;
      Note(
          CudaCheck(cudaMemcpyAsync(st, src + done, k * sizeof(float), cudaMemcpyDeviceToHost, S()),
                    "copy to host"));
      if (!Drain()) return;
      std::memcpy(host + done, st, k * sizeof(float));
      done += k;
    }
  }
  Buffer AllocHost(std::size_t n) override {
    void* p = nullptr;
    Note(CudaCheck(cudaHostAlloc(&p, (n == 0 ? 1 : n) * sizeof(float), cudaHostAllocDefault),
                   "cudaHostAlloc"));
    return Buffer(this, static_cast<float*>(p), p != nullptr ? n : 0, /*host=*/true);
  }
  void FreeHost(float* p) noexcept override {
    cudaStreamSynchronize(copy_stream_.get());  // an upload may still read it
    cudaFreeHost(p);
  }
  Status UploadAsync(float* dst, const float* host, std::size_t n) override {
    if (n == 0) return Status::Ok();
    bf16_.Wrote(dst, n);
    HPCML_RETURN_IF_ERROR(CudaCheck(
        cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, copy_stream_.get()),
        "upload to device"));
    return CudaCheck(cudaEventRecord(upload_done_.get(), copy_stream_.get()), "cudaEventRecord");
  }
  void WaitUploads() override {
    Note(CudaCheck(cudaStreamWaitEvent(S(), upload_done_.get(), 0), "cudaStreamWaitEvent"));
  }
  void Copy(float* dst, const float* src, std::size_t n) override {
    if (n == 0 || dst == src) return;
    bf16_.Reading(src, n);
    bf16_.Wrote(dst, n);
    Note(CudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, S()),
                   "copy"));
  }
  void Fill(float* x, std::size_t n, float v) override {
    bf16_.Wrote(x, n);
    Launched(cuda::Fill(x, n, v, S()), "Fill");
  }

  // cuBLAS given fp32 operands with CUBLAS_COMPUTE_32F_FAST_16BF ran TF32
  // kernels on an H200 (sm90_xmma_gemm_f32f32_tf32f32_*, ncu), at half the
  // bf16 rate. So the operands are rounded to bf16 copies first and the
  // product runs on bf16 tensor cores: fp32 accumulation, fp32 C.
  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    // Row-major op(A) is m x k: stored k x m when transposed. With k = 0
    // nothing is read (C = beta C): the fp32 operands are passed as they are.
    const std::int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const std::int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const void* a16 = k == 0 ? a : Bf16Operand(a16_, a, lda, a_rows, a_cols);
    const void* b16 = k == 0 ? b : Bf16Operand(b16_, b, ldb, b_rows, b_cols);
    const cudaDataType_t type = k == 0 ? CUDA_R_32F : CUDA_R_16BF;
    if (a16 == nullptr || b16 == nullptr) return;
    const auto c_extent = static_cast<std::size_t>((m - 1) * ldc + n);
    if (beta != 0.0f) bf16_.Reading(c, c_extent);
    bf16_.Wrote(c, c_extent);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
    // row-major matrix read column-major is its transpose.
    const cublasStatus_t st = cublasGemmEx(
        cublas_.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b16, type,
        static_cast<int>(ldb), a16, type, static_cast<int>(lda), &beta, c, CUDA_R_32F,
        static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      Fail(Internal("cublasGemmEx {}x{}x{}: {}", m, n, k, cublasGetStatusString(st)));
    }
  }
  void AddBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override {
    AddBiasActKernel(cuda::kNoActivation, y, true, bias, nullptr, rows, cols);
  }
  void AddBiasAct(Activation act, float* z, const float* bias, float* out, std::int64_t rows,
                  std::int64_t cols) override {
    const int code = out != nullptr ? static_cast<int>(act) : cuda::kNoActivation;
    AddBiasActKernel(code, z, true, bias, out, rows, cols);
  }
  // As the interface allows: with relu and an output, z is left unwritten
  // (the backward reads the output), a pass of 4 bytes an element saved.
  void DenseForward(const float* x, const float* w, const float* bias, std::int64_t rows,
                    std::int64_t in, std::int64_t out, Activation act, float* z,
                    float* a) override {
    Gemm(false, true, rows, out, in, 1.0f, x, in, w, in, 0.0f, z, out);
    const int code = a != nullptr ? static_cast<int>(act) : cuda::kNoActivation;
    AddBiasActKernel(code, z, !(act == Activation::kRelu && a != nullptr), bias, a, rows, out);
  }
  void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    float* scratch = BiasScratch(rows, cols);
    if (scratch == nullptr) return;
    bf16_.Reading(dy, static_cast<std::size_t>(rows * cols));
    bf16_.Reading(db, static_cast<std::size_t>(cols));
    bf16_.Wrote(db, static_cast<std::size_t>(cols));
    Launched(cuda::BiasGrad(cuda::kNoActivation, nullptr, dy, nullptr, nullptr, rows, cols, db,
                            scratch, S()),
             "BiasGrad");
  }
  void ActBackwardBiasGrad(Activation act, const float* pre, const float* dout, float* dpre,
                           std::int64_t rows, std::int64_t cols, float* db) override {
    float* scratch = BiasScratch(rows, cols);
    if (scratch == nullptr) return;
    const auto n = static_cast<std::size_t>(rows * cols);
    bf16_.Reading(pre, n);
    bf16_.Reading(dout, n);
    bf16_.Reading(db, static_cast<std::size_t>(cols));
    bf16_.Wrote(db, static_cast<std::size_t>(cols));
    // The gradient feeds GEMMs (which read its bf16 copy): when a copy is
    // kept, only the copy is written and dpre is owed.
    void* dpre16 = bf16_.TargetOwed(dpre, n);
    Launched(cuda::BiasGrad(static_cast<int>(act), pre, dout, dpre16 != nullptr ? nullptr : dpre,
                            dpre16, rows, cols, db, scratch, S()),
             "ActBackwardBiasGrad");
  }
  void ActForward(Activation act, const float* pre, float* out, std::size_t n) override {
    bf16_.Reading(pre, n);
    bf16_.Wrote(out, n);
    Launched(cuda::ActForward(static_cast<int>(act), pre, out, n, S()), "ActForward");
  }
  void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    bf16_.Reading(pre, n);
    bf16_.Reading(dout, n);
    bf16_.Wrote(dpre, n);
    Launched(cuda::ActBackward(static_cast<int>(act), pre, dout, dpre, n, S()), "ActBackward");
  }

  // Per-row losses summed on the device in a fixed order; one 8-byte copy.
  double LossAndGrad(LossKind loss, const float* logits, const float* targets, std::int64_t rows,
                     std::int64_t cols, float scale, float* dlogits,
                     const float* class_weight = nullptr) override {
    Status st = row_loss_.Ensure(static_cast<std::size_t>(rows) * sizeof(double), S());
    if (!st.ok()) {
      Fail(std::move(st));
      return std::nan("");
    }
    double* row_loss = row_loss_.as<double>();
    bf16_.Reading(logits, static_cast<std::size_t>(rows * cols));
    bf16_.Reading(targets,
                  static_cast<std::size_t>(loss == LossKind::kCrossEntropy ? rows : rows * cols));
    if (class_weight != nullptr) bf16_.Reading(class_weight, static_cast<std::size_t>(cols));
    bf16_.Wrote(dlogits, static_cast<std::size_t>(rows * cols));
    if (loss == LossKind::kCrossEntropy) {
      Launched(cuda::CrossEntropy(logits, targets, class_weight, rows, cols, scale, dlogits,
                                  row_loss, S()),
               "CrossEntropy");
    } else {
      Launched(cuda::Mse(logits, targets, rows, cols, scale, dlogits, row_loss, S()), "Mse");
    }
    Launched(cuda::SumDoubles(row_loss, static_cast<std::size_t>(rows), Scalar(), S()), "loss sum");
    return ScalarToHost();
  }

  void EmbedLookup(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                   std::int64_t rows, float* codes) override {
    bf16_.Reading(x, static_cast<std::size_t>(rows * stride));
    bf16_.Wrote(x, static_cast<std::size_t>(rows * stride));
    bf16_.Wrote(codes, static_cast<std::size_t>(rows));
    Launched(cuda::EmbedLookup(table, dim, x, stride, rows, codes, S()), "EmbedLookup");
  }
  void EmbedGrad(const float* dx, std::int64_t stride, const float* codes, std::int64_t rows,
                 std::int64_t dim, float* dtable) override {
    bf16_.Reading(dx, static_cast<std::size_t>(rows * stride));
    bf16_.Reading(codes, static_cast<std::size_t>(rows));
    bf16_.WroteAnywhere();  // rows of dtable by code: which, only the device knows
    Launched(cuda::EmbedGrad(dx, stride, codes, rows, dim, dtable, S()), "EmbedGrad");
  }

  double SumSquares(const float* x, std::size_t n) override {
    bf16_.Reading(x, n);
    Launched(cuda::SumSquares(x, n, partials_, Scalar(), S()), "SumSquares");
    return ScalarToHost();
  }
  // Each span's sum to its own device double, those added in span order:
  // one wait for the host instead of one per span.
  double SumSquaresOf(const std::vector<Span>& spans) override {
    if (spans.empty()) return 0.0;
    Status st = norms_.Ensure(spans.size() * sizeof(double), S());
    if (!st.ok()) {
      Fail(std::move(st));
      return std::nan("");
    }
    double* each = norms_.as<double>();
    for (const Span& sp : spans) bf16_.Reading(sp.data, sp.size);
    for (std::size_t i = 0; i < spans.size(); ++i) {
      Launched(cuda::SumSquares(spans[i].data, spans[i].size, partials_, each + i, S()),
               "SumSquares");
    }
    Launched(cuda::SumDoubles(each, spans.size(), Scalar(), S()), "norm sum");
    return ScalarToHost();
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
    bf16_.Reading(param, n);
    bf16_.Reading(grad, n);
    bf16_.Reading(m, n);
    bf16_.Reading(v, n);
    bf16_.Wrote(m, n);
    bf16_.Wrote(v, n);
    // A weight updated whole rounds its GEMM copy in the same pass.
    void* p16 = bf16_.Target(param, n);
    Launched(cuda::AdamW(param, p16, grad, m, v, n, a, S()), "AdamW");
  }

  void Allreduce(float* x, std::size_t n, Group g) override {
    if (n == 0 || !error_.ok()) return;
    if (g == Group::kWorld) {
      if (grid_ != nullptr && grid_->size() > 1) {
        Fail(FailedPrecondition("cuda backend: no device all-reduce over the world group"));
      }
      return;
    }
    ncclComm_t c = Comm(g);
    if (c == nullptr) return;  // a group of one
    bf16_.Reading(x, n);
    bf16_.Wrote(x, n);
    Enqueued(ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, S()), "ncclAllReduce");
  }
  // Queued on the compute stream: later work sees the result, so waiting
  // is implicit (no overlap with the backward pass on this backend).
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
    bf16_.Reading(x, n);
    held_.push_back(HeldSend{x, n, peer_stage});
  }
  void Recv(float* x, std::size_t n, int peer_stage, int /*tag*/) override {
    bf16_.Wrote(x, n);
    IssueP2p(x, n, peer_stage);
  }
  void FlushSends() override {
    if (!held_.empty()) IssueP2p(nullptr, 0, -1);
  }
  // Later work on the stream runs after the sends, so their buffers may be
  // reused by anything queued from now on.
  void WaitSends() override { FlushSends(); }

  void Synchronize() override { (void)Drain(); }

 private:
  cudaStream_t S() const { return stream_.get(); }
  double* Scalar() const { return partials_ + cuda::kSumPartials; }

  void Note(Status s) {
    if (error_.ok() && !s.ok()) error_ = std::move(s);
  }
  // A failure after which this rank's peers cannot be served: record it and
  // abort the communicators, so blocked NCCL kernels end (here and, through
  // their failed connections, on the peers).
  void Fail(Status s) {
    Note(std::move(s));
    AbortComms();
  }
  void AbortComms() noexcept {
    tp_.reset();  // aborts
    dp_.reset();  // aborts
    pp_.reset();  // aborts
  }
  void Launched(cudaError_t e, const char* kernel) {
    if (e != cudaSuccess) Fail(CudaCheck(e, kernel));
  }
  void Enqueued(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) Fail(NcclCheck(r, what));
  }
  bool HasComms() const {
    return tp_.get() != nullptr || dp_.get() != nullptr || pp_.get() != nullptr;
  }
  ncclComm_t Comm(Group g) const {
    switch (g) {
      case Group::kTensor:
        return tp_.get();
      case Group::kData:
        return dp_.get();
      case Group::kPipeline:
        return pp_.get();
      case Group::kWorld:
        return nullptr;
    }
    return nullptr;
  }

  // Waits until the stream is idle. With communicators: polls the stream
  // and each communicator's asynchronous error, up to the deadline.
  Status WaitStream() {
    if (!HasComms()) return CudaCheck(cudaStreamSynchronize(S()), "cudaStreamSynchronize");
    const auto start = Clock::now();
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(S());
      if (q == cudaSuccess) return Status::Ok();
      if (q != cudaErrorNotReady) return CudaCheck(q, "stream");
      for (const NcclComm* c : {&tp_, &dp_, &pp_}) {
        if (c->get() == nullptr) continue;
        ncclResult_t r = ncclSuccess;
        HPCML_RETURN_IF_ERROR(
            NcclCheck(ncclCommGetAsyncError(c->get(), &r), "ncclCommGetAsyncError"));
        if (r != ncclSuccess && r != ncclInProgress) {
          return NcclCheck(r, c == &tp_   ? "tensor-parallel group"
                              : c == &dp_ ? "data-parallel group"
                                          : "pipeline group");
        }
      }
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > timeout_s_) {
        return Unavailable(
            "NCCL: device work not done after {:.0f} s (HPCML_NCCL_TIMEOUT_S): a peer rank is "
            "gone or stuck; communicators aborted",
            waited);
      }
      // Spin briefly (a step's last kernels), then stop burning the core.
      if (spins < 2000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }
  // WaitStream, recording a failure (and aborting the communicators). The
  // staging area is free again once the stream is idle.
  bool Drain() {
    Status s = WaitStream();
    if (!s.ok()) {
      Fail(std::move(s));
      return false;
    }
    staged_ = 0;
    return true;
  }

  // `n` floats of pinned staging; drains the stream when the area is full
  // (earlier copies may still read it), and grows it only then.
  float* Stage(std::size_t n) {
    if (staged_ + n > stage_cap_) {
      if (!Drain()) return nullptr;
      if (n > stage_cap_) {
        if (stage_ != nullptr) cudaFreeHost(stage_);
        stage_ = nullptr;
        stage_cap_ = 0;
        void* p = nullptr;
        const std::size_t cap = std::max(n, std::min(2 * n, kStageChunk));
        Status st = CudaCheck(cudaHostAlloc(&p, cap * sizeof(float), cudaHostAllocDefault),
                              "cudaHostAlloc");
        if (!st.ok()) {
          Fail(std::move(st));
          return nullptr;
        }
        stage_ = static_cast<float*>(p);
        stage_cap_ = cap;
      }
    }
    float* p = stage_ + staged_;
    staged_ += n;
    return p;
  }

  double ScalarToHost() {
    Note(CudaCheck(
        cudaMemcpyAsync(host_scalar_, Scalar(), sizeof(double), cudaMemcpyDeviceToHost, S()),
        "copy to host"));
    if (!Drain() || !error_.ok()) return std::numeric_limits<double>::quiet_NaN();
    return *host_scalar_;
  }

  // The kernel of AddBias, AddBiasAct and DenseForward: the activation's
  // GEMM copy written in the same pass when one is kept.
  void AddBiasActKernel(int code, float* z, bool write_z, const float* bias, float* out,
                        std::int64_t rows, std::int64_t cols) {
    bf16_.Reading(z, static_cast<std::size_t>(rows * cols));
    bf16_.Reading(bias, static_cast<std::size_t>(cols));
    if (write_z) bf16_.Wrote(z, static_cast<std::size_t>(rows * cols));
    void* out16 = code != cuda::kNoActivation
                      ? bf16_.Target(out, static_cast<std::size_t>(rows * cols))
                      : nullptr;
    Launched(cuda::AddBiasAct(code, z, write_z, bias, out, out16, rows, cols, S()), "AddBiasAct");
  }

  // A GEMM operand in bf16: its cached copy, or rounded into `buf` when the
  // cache keeps no more.
  void* Bf16Operand(Scratch& buf, const float* x, std::int64_t ld, std::int64_t rows,
                    std::int64_t cols) {
    Status st;
    void* kept = bf16_.Get(x, ld, rows, cols, S(), &st);
    if (!st.ok()) {
      Fail(std::move(st));
      return nullptr;
    }
    return kept != nullptr ? kept : Bf16Copy(buf, x, ld, rows, cols);
  }

  // `x` (rows x cols, row stride ld) rounded to bf16 in `buf`, same stride.
  void* Bf16Copy(Scratch& buf, const float* x, std::int64_t ld, std::int64_t rows,
                 std::int64_t cols) {
    const auto elems = static_cast<std::size_t>((rows - 1) * ld + cols);
    bf16_.Reading(x, elems);
    Status st = buf.Ensure(elems * 2, S());
    if (st.ok()) st = CudaCheck(cuda::ToBf16(x, ld, rows, cols, buf.as<void>(), S()), "ToBf16");
    if (!st.ok()) {
      Fail(std::move(st));
      return nullptr;
    }
    return buf.as<void>();
  }

  float* BiasScratch(std::int64_t rows, std::int64_t cols) {
    Status st = bias_scratch_.Ensure(cuda::BiasGradScratch(rows, cols) * sizeof(float), S());
    if (!st.ok()) {
      Fail(std::move(st));
      return nullptr;
    }
    return bias_scratch_.as<float>();
  }

  // One NCCL group on the compute stream: every held send, plus a receive
  // into `recv` when it is not null.
  void IssueP2p(float* recv, std::size_t n, int recv_peer) {
    std::vector<HeldSend> sends = std::exchange(held_, {});
    if (!error_.ok()) return;
    ncclComm_t c = pp_.get();
    if (c == nullptr) {
      Fail(Internal("pipeline send/receive without a pipeline communicator"));
      return;
    }
    ncclResult_t first = ncclGroupStart();
    const char* what = "ncclGroupStart";
    auto keep = [&](ncclResult_t r, const char* w) {
      if (first == ncclSuccess && r != ncclSuccess) {
        first = r;
        what = w;
      }
    };
    if (first == ncclSuccess) {
      for (const HeldSend& h : sends)
        keep(ncclSend(h.data, h.n, ncclFloat, h.peer, c, S()), "ncclSend");
      if (recv != nullptr) keep(ncclRecv(recv, n, ncclFloat, recv_peer, c, S()), "ncclRecv");
      keep(ncclGroupEnd(), "ncclGroupEnd");  // always closes the group
    }
    Enqueued(first, what);
  }

  struct HeldSend {
    const float* data;
    std::size_t n;
    int peer;
  };

  const ProcessGrid* grid_;
  double timeout_s_ = 600.0;
  int device_ = 0;
  Stream stream_;
  Stream copy_stream_;  // batch uploads (UploadAsync)
  Event upload_done_;   // recorded after the latest upload
  Cublas cublas_;
  std::vector<HeldSend> held_;  // sends not issued yet (see the file comment)
  NcclComm tp_, dp_, pp_;
  double* partials_ = nullptr;     // kSumPartials partial sums, then the result scalar
  double* host_scalar_ = nullptr;  // pinned: the one value a reduction sends back
  float* stage_ = nullptr;         // pinned staging for ToDevice/ToHost
  std::size_t stage_cap_ = 0, staged_ = 0;
  Scratch row_loss_, norms_, bias_scratch_;
  Scratch a16_, b16_;  // Gemm's bf16 operands when the cache keeps no more
  Bf16Cache bf16_;
  Status error_;
};

}  // namespace

bool CudaBackendBuilt() {
  return true;
}

Result<std::unique_ptr<Backend>> MakeCudaBackend(const ProcessGrid* grid) {
  // Local checks first, agreed on by all ranks before any collective setup.
  // Only a machine without any NVIDIA GPU is "no GPU visible"; a CUDA error
  // beside a GPU (old driver, missing device nodes, no libcuda) says so.
  Status local;
  const cuda::DeviceCount devices = cuda::CountDevices();
  if (devices.count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (devices.no_gpu) {
      local = Unavailable("--backend cuda: no GPU visible: {} (CUDA_VISIBLE_DEVICES={})",
                          devices.reason, visible != nullptr ? visible : "unset");
    } else {
      local = FailedPrecondition("--backend cuda: CUDA cannot use this machine's GPUs: {}",
                                 devices.reason);
    }
  }
  int local_rank = 0;
  if (grid != nullptr) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(grid->world(), MPI_COMM_TYPE_SHARED, grid->rank(), MPI_INFO_NULL, &node);
    MpiComm owner(node);
    local_rank = owner.rank();
  }
  auto b = std::make_unique<CudaBackend>(grid);
  if (local.ok()) local = b->Init(local_rank % devices.count);
  if (grid != nullptr)
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid->world(), local));
  else
    HPCML_RETURN_IF_ERROR(local);
  HPCML_RETURN_IF_ERROR(b->InitNccl());
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace hpcml::trainer
