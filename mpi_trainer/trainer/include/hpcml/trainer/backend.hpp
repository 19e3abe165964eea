// Backend: where tensors live, how the math runs and how ranks talk.
//
// The model and the step loop only use this interface, so the CPU backend
// (float32, OpenBLAS, MPI) and the CUDA backend (cuBLAS bf16 compute with
// fp32 master weights, NCCL) run the same schedules. Every pointer passed in
// is backend memory (Buffer::data()); matrices are row-major. Host values
// (loss sums, norms) come back as double.
//
// Collectives: the caller guarantees that every rank of a group issues the
// same collectives in the same order (the schedules do). Send never blocks:
// its buffer must stay unchanged until WaitSends(). Messages between two
// stages are matched in the order they are sent (tags label them; a backend
// may rely on the order alone). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

enum class Group { kTensor, kPipeline, kData, kWorld };

class Backend;

// Move-only owner of n floats of backend memory, or of host memory the
// backend uploads from (Backend::AllocHost: `host` true).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* backend, float* data, std::size_t n, bool host = false) noexcept
      : b_(backend), p_(data), n_(n), host_(host) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept
      : b_(std::exchange(o.b_, nullptr)),
        p_(std::exchange(o.p_, nullptr)),
        n_(std::exchange(o.n_, 0)),
        host_(o.host_) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      b_ = std::exchange(o.b_, nullptr);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      host_ = o.host_;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  float* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }
  void reset() noexcept;

 private:
  Backend* b_ = nullptr;
  float* p_ = nullptr;
  std::size_t n_ = 0;
  bool host_ = false;
};

struct AdamWStep {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled (AdamW): p -= lr * wd * p
  float grad_scale = 1.0f;    // applied to g first (gradient clipping)
  std::int64_t step = 1;      // 1-based, for bias correction
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // --- memory (zero-filled) and host transfers
  virtual Buffer Alloc(std::size_t n) = 0;
  virtual void Free(float* p) noexcept = 0;
  virtual void ToDevice(float* dst, const float* host, std::size_t n) = 0;
  virtual void ToHost(float* host, const float* src, std::size_t n) = 0;
  virtual void Copy(float* dst, const float* src, std::size_t n) = 0;
  virtual void Fill(float* x, std::size_t n, float v) = 0;
  // Whether backend memory is host memory (the host may write it directly,
  // with no ToDevice copy).
  virtual bool host_memory() const { return false; }
  // Batch uploads beside the device work: AllocHost gives host memory the
  // device copies from fastest (pinned on CUDA; another thread may fill it),
  // UploadAsync copies it to `dst` on a stream of its own, unordered with
  // the device work queued so far (which must not use `dst`), and
  // WaitUploads orders all device work queued after it behind those copies.
  // The host memory must stay unchanged until then. The defaults, for
  // host-memory backends: plain host memory and a memcpy.
  virtual Buffer AllocHost(std::size_t n);
  virtual void FreeHost(float* p) noexcept;
  virtual Status UploadAsync(float* dst, const float* host, std::size_t n);
  virtual void WaitUploads() {}

  // --- math
  // C[m,n] = alpha * op(A) * op(B) + beta * C; op(A) is [m,k], op(B) is [k,n].
  virtual void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                    float beta, float* c, std::int64_t ldc) = 0;
  // y[r, :] += bias for every row r.
  virtual void AddBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) = 0;
  // db[c] += sum over rows of dy[r, c].
  virtual void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) = 0;
  virtual void ActForward(Activation act, const float* pre, float* out, std::size_t n) = 0;
  // dpre = dout * act'(pre).
  virtual void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                           std::size_t n) = 0;
  // Fused forward epilogue of a layer: z[r, :] += bias, then out = act(z)
  // (out may be null: no activation). One pass over z where a backend can;
  // the default composes AddBias and ActForward.
  virtual void AddBiasAct(Activation act, float* z, const float* bias, float* out,
                          std::int64_t rows, std::int64_t cols) {
    AddBias(z, bias, rows, cols);
    if (out != nullptr) ActForward(act, z, out, static_cast<std::size_t>(rows * cols));
  }
  // A dense layer's forward: z = x W^T + bias (x [rows, in], W [out, in]),
  // then a = act(z) when a is non-null. One fused call where a backend can
  // (the CPU backend: one oneDNN matmul with bias and activation post-ops).
  // With act relu and a given, z may be left unwritten: the backward then
  // reads a in place of z, which is exact (relu'(z) = [z > 0] = [a > 0]).
  // The default is Gemm then AddBiasAct.
  virtual void DenseForward(const float* x, const float* w, const float* bias, std::int64_t rows,
                            std::int64_t in, std::int64_t out, Activation act, float* z, float* a) {
    Gemm(false, true, rows, out, in, 1.0f, x, in, w, in, 0.0f, z, out);
    AddBiasAct(act, z, bias, a, rows, out);
  }
  // Fused backward prologue: dpre = dout * act'(pre), db[c] += column sums of
  // dpre. The default composes ActBackward and BiasGrad.
  virtual void ActBackwardBiasGrad(Activation act, const float* pre, const float* dout, float* dpre,
                                   std::int64_t rows, std::int64_t cols, float* db) {
    ActBackward(act, pre, dout, dpre, static_cast<std::size_t>(rows * cols));
    BiasGrad(dpre, rows, cols, db);
  }
  // Per-sample losses summed over `rows`; writes dlogits = scale * dLoss/dlogits
  // of the summed loss. Cross-entropy: targets[r] holds the class index, and
  // with `class_weight` (backend memory, one per class) a sample's loss and
  // gradient are multiplied by its class's weight; MSE: targets is
  // [rows, cols], the sample loss is mean((y - t)^2), class_weight unused.
  virtual double LossAndGrad(LossKind loss, const float* logits, const float* targets,
                             std::int64_t rows, std::int64_t cols, float scale, float* dlogits,
                             const float* class_weight = nullptr) = 0;
  // Embedding lookup (model.hpp): `x` points at a slot of `rows` rows of
  // `stride` floats. For each row, code = x[r * stride] (encoding.hpp),
  // codes[r] = code, then x[r * stride + c] = table[code * dim + c], c < dim.
  virtual void EmbedLookup(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                           std::int64_t rows, float* codes) = 0;
  // Its gradient: dtable[codes[r] * dim + c] += dx[r * stride + c].
  virtual void EmbedGrad(const float* dx, std::int64_t stride, const float* codes,
                         std::int64_t rows, std::int64_t dim, float* dtable) = 0;
  virtual double SumSquares(const float* x, std::size_t n) = 0;
  // The sum of SumSquares over the spans, added in span order (one wait for
  // the host, where a backend can).
  struct Span {
    const float* data;
    std::size_t size;
  };
  virtual double SumSquaresOf(const std::vector<Span>& spans) {
    double sum = 0.0;
    for (const Span& s : spans) sum += SumSquares(s.data, s.size);
    return sum;
  }
  virtual void AdamW(float* param, const float* grad, float* m, float* v, std::size_t n,
                     const AdamWStep& step) = 0;

  // --- communication (float sums over the group of this rank)
  virtual void Allreduce(float* x, std::size_t n, Group g) = 0;
  // Starts a sum all-reduce in place; finished by WaitAllreduces().
  virtual void StartAllreduce(float* x, std::size_t n, Group g) = 0;
  virtual void WaitAllreduces() = 0;
  // Host doubles, summed over the group.
  virtual void AllreduceHost(double* x, std::size_t n, Group g) = 0;
  // Sharded collectives (ZeRO-1). `counts[i]` is the length of member i's
  // segment of x (segments back to back, member order of the group; the sum
  // is x's length). ReduceScatter: `shard` (counts[my index] floats) gets
  // the sum over the group of my segment of x; x is left unchanged.
  // AllGather: every member's segment of x, in place, is copied to all.
  // Blocking; the counts must be the same on every member.
  virtual void ReduceScatter(const float* x, float* shard, const std::vector<std::size_t>& counts,
                             Group g) = 0;
  virtual void AllGather(float* x, const std::vector<std::size_t>& counts, Group g) = 0;
  // Point-to-point along the pipeline group; peer is a stage index.
  virtual void Send(const float* x, std::size_t n, int peer_stage, int tag) = 0;
  virtual void Recv(float* x, std::size_t n, int peer_stage, int tag) = 0;
  virtual void WaitSends() = 0;
  // Whether the message Recv(peer_stage, tag) would take has arrived, so a
  // stage can fill a wait with deferred work. Backends that cannot tell
  // answer true (the work then waits for the end of the step).
  virtual bool Arrived(int /*peer_stage*/, int /*tag*/) { return true; }
  // Starts the sends made since the last Recv now. A backend may hold sends
  // back to issue them together with the next Recv (NCCL: one group, so a
  // send never waits in front of the receive its peer needs first); the
  // schedule calls this when its next operation receives nothing. No-op on
  // backends whose Send starts at once.
  virtual void FlushSends() {}
  // Lets outstanding sends advance without waiting for them (a library that
  // moves large messages only inside its own calls needs the sender to call
  // in). Cheap; called between layers. No-op by default.
  virtual void Progress() {}
  // Blocks until queued device work is done (for timing); no-op on CPU.
  virtual void Synchronize() = 0;
  // The first error of an asynchronous device or communication call (sticky);
  // OK on the CPU backend, whose calls cannot fail.
  virtual Status status() const { return Status::Ok(); }
};

// Which library runs the CPU backend's GEMMs. oneDNN is the default: it
// picks its kernels from the running CPU (AVX-512 where there is one) and
// fuses bias and activation; OpenBLAS is the fallback (Debian's 0.3.21
// detects AVX-512 Zen cores as Haswell and runs at half speed there unless
// OPENBLAS_CORETYPE is set; see docs/trainer.md).
enum class GemmLibrary { kOneDnn, kOpenBlas };
// Where the model's math runs (hpcml-train --backend).
enum class BackendKind { kCpu, kCuda };
std::string_view Name(BackendKind b);
Result<GemmLibrary> ParseGemmLibrary(std::string_view s);
std::string_view Name(GemmLibrary g);

struct CpuOptions {
  GemmLibrary gemm = GemmLibrary::kOneDnn;
  int threads = 1;  // math threads of this rank (GEMMs and elementwise loops)
};

// The CPU backend over `grid` (borrowed; must outlive the backend). A null
// grid gives a backend whose communication calls are no-ops (single process).
// Sets the process's OpenMP and OpenBLAS thread counts to options.threads.
std::unique_ptr<Backend> MakeCpuBackend(const ProcessGrid* grid, const CpuOptions& options = {});

// The CUDA backend, when built (HPCML_HAVE_CUDA); an Unavailable status
// otherwise or when no GPU is visible. Collective over grid->world().
Result<std::unique_ptr<Backend>> MakeCudaBackend(const ProcessGrid* grid);
bool CudaBackendBuilt();

}  // namespace hpcml::trainer
