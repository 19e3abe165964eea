// CPU backend: float32 math with oneDNN (OpenBLAS as the fallback),
// elementwise loops on OpenMP threads, communication with MPI.
#include <cblas.h>
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "hpcml/trainer/backend.hpp"

namespace hpcml::trainer {

void Buffer::reset() noexcept {
  if (p_ != nullptr && b_ != nullptr) {
    if (host_) {
      b_->FreeHost(p_);
    } else {
      b_->Free(p_);
    }
  }
  p_ = nullptr;
  n_ = 0;
}

Buffer Backend::AllocHost(std::size_t n) {
  return Buffer(this, new float[n == 0 ? 1 : n](), n, /*host=*/true);
}
void Backend::FreeHost(float* p) noexcept {
  delete[] p;
}
Status Backend::UploadAsync(float* dst, const float* host, std::size_t n) {
  if (n > 0) std::memcpy(dst, host, n * sizeof(float));
  return Status::Ok();
}

Result<GemmLibrary> ParseGemmLibrary(std::string_view s) {
  if (s == "onednn") return GemmLibrary::kOneDnn;
  if (s == "openblas") return GemmLibrary::kOpenBlas;
  return InvalidArgument("--gemm '{}': expected onednn or openblas", s);
}

std::string_view Name(BackendKind b) {
  return b == BackendKind::kCuda ? "cuda" : "cpu";
}

std::string_view Name(GemmLibrary g) {
  return g == GemmLibrary::kOneDnn ? "onednn" : "openblas";
}

namespace {

// The memory-bound loops are compiled for AVX-512, AVX2 and the x86-64
// baseline; the loader picks the widest the node has (GCC function
// multiversioning), as oneDNN picks its GEMM kernels. Same IEEE operations
// in every clone: no fast-math, so the results do not depend on the node.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HPCML_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HPCML_VECTOR_CLONES
#endif

// Runs fn(chunk, begin, end) over [0, n) cut into equal contiguous chunks,
// one per OpenMP thread, and returns the number of chunks. Below `grain`
// items per thread it uses fewer threads (a parallel region costs a few
// microseconds). The cut depends only on n, grain and the thread count, so a
// reduction summed in chunk order is reproducible for a given --threads.
template <class F>
int ParallelChunks(std::size_t n, std::size_t grain, F&& fn) {
  const auto most = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  const int chunks =
      static_cast<int>(std::clamp<std::size_t>(n / std::max<std::size_t>(grain, 1), 1, most));
  if (chunks == 1) {
    fn(0, std::size_t{0}, n);
    return 1;
  }
#pragma omp parallel num_threads(chunks)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto c = static_cast<std::size_t>(chunks);
    fn(static_cast<int>(t), n * t / c, n * (t + 1) / c);
  }
  return chunks;
}

// Elementwise work per thread below which one thread does it all.
constexpr std::size_t kGrain = 16384;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

template <Activation A>
inline float Act(float x) {
  if constexpr (A == Activation::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (A == Activation::kTanh) {
    return std::tanh(x);
  } else {
    return 0.5f * x * (1.0f + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
  }
}

// dout * act'(x). ReLU loads dout unconditionally so the select vectorises
// (a conditional load kept it a scalar loop with a mispredicted branch).
template <Activation A>
inline float ActGrad(float x, float dout) {
  if constexpr (A == Activation::kRelu) {
    return x > 0.0f ? dout : 0.0f;
  } else if constexpr (A == Activation::kTanh) {
    const float t = std::tanh(x);
    return dout * (1.0f - t * t);
  } else {
    const float t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
    const float d =
        0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
    return dout * d;
  }
}

// The loops below take restrict pointers: callers never pass overlapping
// arrays (Backend contract), and without it GCC keeps them scalar.
template <Activation A>
HPCML_VECTOR_CLONES void ForwardLoop(const float* __restrict pre, float* __restrict out,
                                     std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = Act<A>(pre[i]);
}

template <Activation A>
HPCML_VECTOR_CLONES void BackwardLoop(const float* __restrict pre, const float* __restrict dout,
                                      float* __restrict dpre, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dpre[i] = ActGrad<A>(pre[i], dout[i]);
}

template <Activation A>
HPCML_VECTOR_CLONES void BiasActRows(float* z, const float* bias, float* out, std::int64_t rows,
                                     std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* __restrict zr = z + r * cols;
    float* __restrict o = out + r * cols;
    const float* __restrict b = bias;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = zr[c] + b[c];
      zr[c] = v;
      o[c] = Act<A>(v);
    }
  }
}

// Columns [0, width) of rows of length ld (a column block of the matrix:
// the threads split the columns, so each column's sum keeps the serial order).
template <Activation A>
HPCML_VECTOR_CLONES void BackwardBiasRows(const float* pre, const float* dout, float* dpre,
                                          std::int64_t rows, std::int64_t ld, std::int64_t width,
                                          float* db) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* __restrict p = pre + r * ld;
    const float* __restrict g = dout + r * ld;
    float* __restrict d = dpre + r * ld;
    float* __restrict acc = db;
    for (std::int64_t c = 0; c < width; ++c) {
      const float v = ActGrad<A>(p[c], g[c]);
      d[c] = v;
      acc[c] += v;
    }
  }
}

// oneDNN matmuls, one primitive per distinct GEMM (transposes, shape,
// strides, alpha, beta, epilogue), created on first use and kept: a step
// reuses the same few shapes. Run returns false where oneDNN has no
// implementation for a GEMM (then the caller uses OpenBLAS).
class OneDnnMatmuls {
 public:
  enum class Epilogue { kNone, kBias, kBiasRelu };
  struct Key {
    bool ta, tb;
    std::int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    Epilogue epilogue;
    auto operator<=>(const Key&) const = default;
  };

  bool Run(const Key& key, const float* a, const float* b, const float* bias, float* c) {
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, Create(key)).first;
    if (!it->second) return false;
    Entry& e = *it->second;
    // The memory objects are handles shared with e.args: pointing them at
    // this call's operands is all a call costs besides the product.
    e.a.set_data_handle(const_cast<float*>(a));
    e.b.set_data_handle(const_cast<float*>(b));
    e.c.set_data_handle(c);
    if (key.epilogue != Epilogue::kNone) e.bias.set_data_handle(const_cast<float*>(bias));
    e.prim.execute(stream_, e.args);
    stream_.wait();
    return true;
  }

 private:
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory a, b, bias, c;
    std::unordered_map<int, dnnl::memory> args;  // built once, from the handles above
  };

  // op(A) [m,k] and op(B) [k,n] as strided views of the row-major operands.
  std::optional<Entry> Create(const Key& k) {
    using dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    try {
      const dnnl::memory::desc ad({k.m, k.k}, dt::f32, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
      const dnnl::memory::desc bd({k.k, k.n}, dt::f32, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
      const dnnl::memory::desc cd({k.m, k.n}, dt::f32, dims{k.ldc, 1});
      const dnnl::memory::desc biasd({1, k.n}, dt::f32, dims{k.n, 1});
      dnnl::primitive_attr attr;
      if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
      dnnl::post_ops ops;
      if (k.beta != 0.0f) ops.append_sum(k.beta);
      if (k.epilogue == Epilogue::kBiasRelu) {
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      }
      attr.set_post_ops(ops);
      const auto desc = k.epilogue == Epilogue::kNone ? dnnl::matmul::desc(ad, bd, cd)
                                                      : dnnl::matmul::desc(ad, bd, biasd, cd);
      const dnnl::matmul::primitive_desc pd(desc, attr, engine_);
      Entry e{dnnl::matmul(pd),
              dnnl::memory(ad, engine_, DNNL_MEMORY_NONE),
              dnnl::memory(bd, engine_, DNNL_MEMORY_NONE),
              dnnl::memory(biasd, engine_, DNNL_MEMORY_NONE),
              dnnl::memory(cd, engine_, DNNL_MEMORY_NONE),
              {}};
      e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
      if (k.epilogue != Epilogue::kNone) e.args.emplace(DNNL_ARG_BIAS, e.bias);
      return e;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<Key, std::optional<Entry>> cache_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ProcessGrid* grid, const CpuOptions& options)
      : grid_(grid), gemm_(options.gemm) {
    // The process's math threads: oneDNN and the loops below run on OpenMP,
    // the fallback on OpenBLAS's own pool.
    omp_set_num_threads(std::max(1, options.threads));
    openblas_set_num_threads(std::max(1, options.threads));
  }
  ~CpuBackend() override {
    // Requests must not outlive the backend; finish what is in flight.
    WaitAllreduces();
    WaitSends();
  }

  std::string_view name() const override { return "cpu"; }

  Buffer Alloc(std::size_t n) override {
    float* p = new float[n == 0 ? 1 : n]();
    return Buffer(this, p, n);
  }
  void Free(float* p) noexcept override { delete[] p; }
  void ToDevice(float* dst, const float* host, std::size_t n) override { Copy(dst, host, n); }
  void ToHost(float* host, const float* src, std::size_t n) override { Copy(host, src, n); }
  void Copy(float* dst, const float* src, std::size_t n) override {
    if (n != 0 && dst != src) std::memcpy(dst, src, n * sizeof(float));
  }
  void Fill(float* x, std::size_t n, float v) override { std::fill(x, x + n, v); }
  bool host_memory() const override { return true; }

  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    if (gemm_ == GemmLibrary::kOneDnn) {
      // Large products go to oneDNN's packed GEMM, the rest to its matmul:
      // measured on AVX-512 (docs/trainer.md), dnnl_sgemm is 10-20% faster
      // on the 4096-wide shapes, the matmul up to 25% faster where a
      // dimension is small (the first and last layers, K = 64 rows). A fixed
      // rule, not a timing, so a run's results do not depend on the load.
      if (std::min({m, n, k}) >= 512 &&
          dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta,
                     c, ldc) == dnnl_success) {
        return;
      }
      if (matmuls_.Run({trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta,
                        OneDnnMatmuls::Epilogue::kNone},
                       a, b, nullptr, c)) {
        return;
      }
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
  }

  // oneDNN: one matmul with the bias (and ReLU) applied as its epilogue, so
  // the output is written once; ReLU writes only a (see the contract).
  void DenseForward(const float* x, const float* w, const float* bias, std::int64_t rows,
                    std::int64_t in, std::int64_t out, Activation act, float* z,
                    float* a) override {
    if (gemm_ == GemmLibrary::kOneDnn) {
      const bool relu = a != nullptr && act == Activation::kRelu;
      using E = OneDnnMatmuls::Epilogue;
      if (matmuls_.Run(
              {false, true, rows, out, in, in, in, out, 1.0f, 0.0f, relu ? E::kBiasRelu : E::kBias},
              x, w, bias, relu ? a : z)) {
        if (!relu && a != nullptr) ActForward(act, z, a, static_cast<std::size_t>(rows * out));
        return;
      }
    }
    Backend::DenseForward(x, w, bias, rows, in, out, act, z, a);
  }

  void AddBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override {
    ForRows(rows, cols, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        float* __restrict row = y + r * cols;
        for (std::int64_t c = 0; c < cols; ++c) row[c] += bias[c];
      }
    });
  }

  void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    ForColumns(rows, cols, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict row = dy + r * cols + c0;
        float* __restrict acc = db + c0;
        for (std::int64_t c = 0; c < c1 - c0; ++c) acc[c] += row[c];
      }
    });
  }

  void ActForward(Activation act, const float* pre, float* out, std::size_t n) override {
    ParallelChunks(n, kGrain, [&](int, std::size_t b, std::size_t e) {
      switch (act) {
        case Activation::kRelu:
          return ForwardLoop<Activation::kRelu>(pre + b, out + b, e - b);
        case Activation::kTanh:
          return ForwardLoop<Activation::kTanh>(pre + b, out + b, e - b);
        case Activation::kGelu:
          return ForwardLoop<Activation::kGelu>(pre + b, out + b, e - b);
      }
    });
  }

  void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    ParallelChunks(n, kGrain, [&](int, std::size_t b, std::size_t e) {
      switch (act) {
        case Activation::kRelu:
          return BackwardLoop<Activation::kRelu>(pre + b, dout + b, dpre + b, e - b);
        case Activation::kTanh:
          return BackwardLoop<Activation::kTanh>(pre + b, dout + b, dpre + b, e - b);
        case Activation::kGelu:
          return BackwardLoop<Activation::kGelu>(pre + b, dout + b, dpre + b, e - b);
      }
    });
  }

  // One pass per row: bias, store z (the backward pass needs it), activation.
  void AddBiasAct(Activation act, float* z, const float* bias, float* out, std::int64_t rows,
                  std::int64_t cols) override {
    if (out == nullptr) return AddBias(z, bias, rows, cols);
    ForRows(rows, cols, [&](std::int64_t r0, std::int64_t r1) {
      float* zr = z + r0 * cols;
      float* o = out + r0 * cols;
      switch (act) {
        case Activation::kRelu:
          return BiasActRows<Activation::kRelu>(zr, bias, o, r1 - r0, cols);
        case Activation::kTanh:
          return BiasActRows<Activation::kTanh>(zr, bias, o, r1 - r0, cols);
        case Activation::kGelu:
          return BiasActRows<Activation::kGelu>(zr, bias, o, r1 - r0, cols);
      }
    });
  }

  // One pass per row: the activation derivative and the bias-gradient sum
  // (same summation order as BiasGrad, so the results are identical).
  void ActBackwardBiasGrad(Activation act, const float* pre, const float* dout, float* dpre,
                           std::int64_t rows, std::int64_t cols, float* db) override {
    ForColumns(rows, cols, [&](std::int64_t c0, std::int64_t c1) {
      const std::int64_t w = c1 - c0;
      switch (act) {
        case Activation::kRelu:
          return BackwardBiasRows<Activation::kRelu>(pre + c0, dout + c0, dpre + c0, rows, cols, w,
                                                     db + c0);
        case Activation::kTanh:
          return BackwardBiasRows<Activation::kTanh>(pre + c0, dout + c0, dpre + c0, rows, cols, w,
                                                     db + c0);
        case Activation::kGelu:
          return BackwardBiasRows<Activation::kGelu>(pre + c0, dout + c0, dpre + c0, rows, cols, w,
                                                     db + c0);
      }
    });
  }

  double LossAndGrad(LossKind loss, const float* logits, const float* targets, std::int64_t rows,
                     std::int64_t cols, float scale, float* dlogits,
                     const float* class_weight = nullptr) override {
    // Rows split across threads; per-chunk totals summed in chunk order.
    std::vector<double> part(static_cast<std::size_t>(std::max(1, omp_get_max_threads())), 0.0);
    const int chunks =
        ParallelChunks(static_cast<std::size_t>(rows),
                       std::max<std::size_t>(1, kGrain / static_cast<std::size_t>(cols)),
                       [&](int chunk, std::size_t r0, std::size_t r1) {
                         part[static_cast<std::size_t>(chunk)] =
                             loss == LossKind::kCrossEntropy
                                 ? CrossEntropyRows(logits, targets, static_cast<std::int64_t>(r0),
                                                    static_cast<std::int64_t>(r1), cols, scale,
                                                    dlogits, class_weight)
                                 : MseRows(logits, targets, static_cast<std::int64_t>(r0),
                                           static_cast<std::int64_t>(r1), cols, scale, dlogits);
                       });
    double total = 0.0;
    for (int c = 0; c < chunks; ++c) total += part[static_cast<std::size_t>(c)];
    return total;
  }

  void EmbedLookup(const float* table, std::int64_t dim, float* x, std::int64_t stride,
                   std::int64_t rows, float* codes) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* slot = x + r * stride;
      codes[r] = slot[0];
      const float* row = table + static_cast<std::int64_t>(slot[0]) * dim;
      std::copy(row, row + dim, slot);
    }
  }

  // Serial: rows sharing a code add into the same table row.
  void EmbedGrad(const float* dx, std::int64_t stride, const float* codes, std::int64_t rows,
                 std::int64_t dim, float* dtable) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* g = dx + r * stride;
      float* row = dtable + static_cast<std::int64_t>(codes[r]) * dim;
      for (std::int64_t c = 0; c < dim; ++c) row[c] += g[c];
    }
  }

  // Eight independent double accumulators per chunk: a sequential sum was
  // bound by the latency of one addition per element; lanes vectorise.
  double SumSquares(const float* x, std::size_t n) override {
    std::vector<double> part(static_cast<std::size_t>(std::max(1, omp_get_max_threads())), 0.0);
    const int chunks = ParallelChunks(n, kGrain, [&](int chunk, std::size_t b, std::size_t e) {
      part[static_cast<std::size_t>(chunk)] = SumSquaresSerial(x + b, e - b);
    });
    double s = 0.0;
    for (int c = 0; c < chunks; ++c) s += part[static_cast<std::size_t>(c)];
    return s;
  }

  void AdamW(float* param, const float* grad, float* m, float* v, std::size_t n,
             const AdamWStep& st) override {
    ParallelChunks(n, kGrain, [&](int, std::size_t b, std::size_t e) {
      AdamWSerial(param + b, grad + b, m + b, v + b, e - b, st);
    });
  }

  void Allreduce(float* x, std::size_t n, Group g) override {
    MPI_Comm c = Comm(g);
    if (c == MPI_COMM_NULL || n == 0) return;
    MPI_Allreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c);
  }

  void StartAllreduce(float* x, std::size_t n, Group g) override {
    MPI_Comm c = Comm(g);
    if (c == MPI_COMM_NULL || n == 0) return;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c, &req);
    reduces_.push_back(req);
  }

  void WaitAllreduces() override {
    if (reduces_.empty()) return;
    MPI_Waitall(static_cast<int>(reduces_.size()), reduces_.data(), MPI_STATUSES_IGNORE);
    reduces_.clear();
  }

  void AllreduceHost(double* x, std::size_t n, Group g) override {
    MPI_Comm c = Comm(g);
    if (c == MPI_COMM_NULL || n == 0) return;
    MPI_Allreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c);
  }

  void ReduceScatter(const float* x, float* shard, const std::vector<std::size_t>& counts,
                     Group g) override {
    MPI_Comm c = Comm(g);
    if (c == MPI_COMM_NULL) {
      Copy(shard, x, counts.empty() ? 0 : counts[0]);
      return;
    }
    std::vector<int> n(counts.begin(), counts.end());
    MPI_Reduce_scatter(x, shard, n.data(), MPI_FLOAT, MPI_SUM, c);
  }

  void AllGather(float* x, const std::vector<std::size_t>& counts, Group g) override {
    MPI_Comm c = Comm(g);
    if (c == MPI_COMM_NULL) return;
    std::vector<int> n(counts.begin(), counts.end()), displs(counts.size());
    int off = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      displs[i] = off;
      off += n[i];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, n.data(), displs.data(), MPI_FLOAT, c);
  }

  void Send(const float* x, std::size_t n, int peer_stage, int tag) override {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Isend(x, static_cast<int>(n), MPI_FLOAT, peer_stage, tag, Comm(Group::kPipeline), &req);
    // Large messages go by rendezvous. With a single-copy transport (CMA,
    // Open MPI's default on one node) the receiver pulls the data itself;
    // otherwise the sender must be inside MPI to push it, which Progress()
    // does between layers. No spin here: waiting for a receiver that is
    // still computing put the whole wait on this stage's critical path.
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) sends_.push_back(req);
  }

  void Recv(float* x, std::size_t n, int peer_stage, int tag) override {
    MPI_Recv(x, static_cast<int>(n), MPI_FLOAT, peer_stage, tag, Comm(Group::kPipeline),
             MPI_STATUS_IGNORE);
  }

  bool Arrived(int peer_stage, int tag) override {
    int flag = 0;
    MPI_Iprobe(peer_stage, tag, Comm(Group::kPipeline), &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  }

  // Open MPI moves a non-blocking all-reduce (libnbc) only inside MPI
  // calls: testing it here lets the data-parallel buckets advance while the
  // remaining layers compute.
  void Progress() override {
    for (std::vector<MPI_Request>* reqs : {&sends_, &reduces_}) {
      if (reqs->empty()) continue;
      int flag = 0;
      MPI_Testall(static_cast<int>(reqs->size()), reqs->data(), &flag, MPI_STATUSES_IGNORE);
      if (flag) reqs->clear();
    }
  }

  void WaitSends() override {
    if (sends_.empty()) return;
    MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE);
    sends_.clear();
  }

  void Synchronize() override {}

 private:
  // Rows [r0, r1) per thread, at least kGrain elements each.
  template <class F>
  static void ForRows(std::int64_t rows, std::int64_t cols, F&& fn) {
    ParallelChunks(static_cast<std::size_t>(rows),
                   std::max<std::size_t>(
                       1, kGrain / static_cast<std::size_t>(std::max<std::int64_t>(cols, 1))),
                   [&](int, std::size_t r0, std::size_t r1) {
                     fn(static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1));
                   });
  }

  // Columns [c0, c1) per thread over all rows (column sums keep their order).
  template <class F>
  static void ForColumns(std::int64_t rows, std::int64_t cols, F&& fn) {
    ParallelChunks(static_cast<std::size_t>(cols),
                   std::max<std::size_t>(
                       16, kGrain / static_cast<std::size_t>(std::max<std::int64_t>(rows, 1))),
                   [&](int, std::size_t c0, std::size_t c1) {
                     fn(static_cast<std::int64_t>(c0), static_cast<std::int64_t>(c1));
                   });
  }

  static double CrossEntropyRows(const float* logits, const float* targets, std::int64_t r0,
                                 std::int64_t r1, std::int64_t cols, float scale, float* dlogits,
                                 const float* class_weight) {
    double total = 0.0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* z = logits + r * cols;
      float* dz = dlogits + r * cols;
      const float label = targets[r];
      const auto t = static_cast<std::int64_t>(label);
      if (!(label >= 0.0f) || t >= cols) {  // data sources validate; never index out of range
        total = std::numeric_limits<double>::quiet_NaN();
        std::fill(dz, dz + cols, 0.0f);
        continue;
      }
      // One exponential per logit (float, kept in dz), summed in double:
      // softmax = e / sum, loss = log(sum) + max - z[t].
      const float mx = *std::max_element(z, z + cols);
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const float e = std::exp(z[c] - mx);
        dz[c] = e;
        sum += static_cast<double>(e);
      }
      const float w = class_weight != nullptr ? class_weight[t] : 1.0f;
      total += static_cast<double>(w) *
               (static_cast<double>(mx) + std::log(sum) - static_cast<double>(z[t]));
      const double inv = 1.0 / sum;
      const float ws = scale * w;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(dz[c]) * inv;
        dz[c] = ws * static_cast<float>(p - (c == t ? 1.0 : 0.0));
      }
    }
    return total;
  }

  static double MseRows(const float* logits, const float* targets, std::int64_t r0, std::int64_t r1,
                        std::int64_t cols, float scale, float* dlogits) {
    double total = 0.0;
    const float inv = 1.0f / static_cast<float>(cols);
    for (std::int64_t r = r0; r < r1; ++r) {
      double s = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = r * cols + c;
        float d = logits[i] - targets[i];
        s += static_cast<double>(d) * static_cast<double>(d);
        dlogits[i] = scale * 2.0f * d * inv;
      }
      total += s / static_cast<double>(cols);
    }
    return total;
  }

  HPCML_VECTOR_CLONES static double SumSquaresSerial(const float* x, std::size_t n) {
    constexpr std::size_t kLanes = 8;
    double acc[kLanes] = {};
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (std::size_t j = 0; j < kLanes; ++j) {
        const auto v = static_cast<double>(x[i + j]);
        acc[j] += v * v;
      }
    }
    for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    double s = 0.0;
    for (double a : acc) s += a;
    return s;
  }

  HPCML_VECTOR_CLONES static void AdamWSerial(float* param, const float* grad, float* m, float* v,
                                              std::size_t n, const AdamWStep& st) {
    const double bc1 = 1.0 - std::pow(static_cast<double>(st.beta1), static_cast<double>(st.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(st.beta2), static_cast<double>(st.step));
    // Constants in locals and restrict-qualified arrays: otherwise every
    // store might alias `st` and the loop neither vectorises nor hoists.
    const float step_size = static_cast<float>(static_cast<double>(st.lr) / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - st.lr * st.weight_decay;
    const float b1 = st.beta1, b2 = st.beta2, c1 = 1.0f - st.beta1, c2 = 1.0f - st.beta2;
    const float eps = st.eps, gs = st.grad_scale;
    float* __restrict pp = param;
    const float* __restrict gp = grad;
    float* __restrict mp = m;
    float* __restrict vp = v;
    for (std::size_t i = 0; i < n; ++i) {
      const float g = gp[i] * gs;
      const float mi = b1 * mp[i] + c1 * g;
      const float vi = b2 * vp[i] + c2 * g * g;
      mp[i] = mi;
      vp[i] = vi;
      const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
      pp[i] = pp[i] * decay - step_size * mi / denom;
    }
  }

  MPI_Comm Comm(Group g) const {
    if (grid_ == nullptr) return MPI_COMM_NULL;
    switch (g) {
      case Group::kTensor:
        return grid_->tp_comm();
      case Group::kPipeline:
        return grid_->pp_comm();
      case Group::kData:
        return grid_->dp_comm();
      case Group::kWorld:
        return grid_->world();
    }
    return MPI_COMM_NULL;
  }

  const ProcessGrid* grid_;
  GemmLibrary gemm_;
  OneDnnMatmuls matmuls_;
  std::vector<MPI_Request> reduces_;
  std::vector<MPI_Request> sends_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const ProcessGrid* grid, const CpuOptions& options) {
  return std::make_unique<CpuBackend>(grid, options);
}

}  // namespace hpcml::trainer
