// CPU backend: float32 math with OpenBLAS, communication with MPI.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "hpcml/trainer/backend.hpp"

namespace hpcml::trainer {

void Buffer::reset() noexcept {
  if (p_ != nullptr && b_ != nullptr) b_->Free(p_);
  p_ = nullptr;
  n_ = 0;
}

namespace {

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
void ForwardLoop(const float* __restrict pre, float* __restrict out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = Act<A>(pre[i]);
}

template <Activation A>
void BackwardLoop(const float* __restrict pre, const float* __restrict dout, float* __restrict dpre,
                  std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dpre[i] = ActGrad<A>(pre[i], dout[i]);
}

template <Activation A>
void BiasActRows(float* z, const float* bias, float* out, std::int64_t rows, std::int64_t cols) {
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

template <Activation A>
void BackwardBiasRows(const float* pre, const float* dout, float* dpre, std::int64_t rows,
                      std::int64_t cols, float* db) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* __restrict p = pre + r * cols;
    const float* __restrict g = dout + r * cols;
    float* __restrict d = dpre + r * cols;
    float* __restrict acc = db;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = ActGrad<A>(p[c], g[c]);
      d[c] = v;
      acc[c] += v;
    }
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const ProcessGrid* grid) : grid_(grid) {}
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

  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
  }

  void AddBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* __restrict row = y + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* __restrict row = dy + r * cols;
      float* __restrict acc = db;
      for (std::int64_t c = 0; c < cols; ++c) acc[c] += row[c];
    }
  }

  void ActForward(Activation act, const float* pre, float* out, std::size_t n) override {
    switch (act) {
      case Activation::kRelu:
        ForwardLoop<Activation::kRelu>(pre, out, n);
        break;
      case Activation::kTanh:
        ForwardLoop<Activation::kTanh>(pre, out, n);
        break;
      case Activation::kGelu:
        ForwardLoop<Activation::kGelu>(pre, out, n);
        break;
    }
  }

  void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    switch (act) {
      case Activation::kRelu:
        BackwardLoop<Activation::kRelu>(pre, dout, dpre, n);
        break;
      case Activation::kTanh:
        BackwardLoop<Activation::kTanh>(pre, dout, dpre, n);
        break;
      case Activation::kGelu:
        BackwardLoop<Activation::kGelu>(pre, dout, dpre, n);
        break;
    }
  }

  // One pass per row: bias, store z (the backward pass needs it), activation.
  void AddBiasAct(Activation act, float* z, const float* bias, float* out, std::int64_t rows,
                  std::int64_t cols) override {
    if (out == nullptr) return AddBias(z, bias, rows, cols);
    switch (act) {
      case Activation::kRelu:
        return BiasActRows<Activation::kRelu>(z, bias, out, rows, cols);
      case Activation::kTanh:
        return BiasActRows<Activation::kTanh>(z, bias, out, rows, cols);
      case Activation::kGelu:
        return BiasActRows<Activation::kGelu>(z, bias, out, rows, cols);
    }
  }

  // One pass per row: the activation derivative and the bias-gradient sum
  // (same summation order as BiasGrad, so the results are identical).
  void ActBackwardBiasGrad(Activation act, const float* pre, const float* dout, float* dpre,
                           std::int64_t rows, std::int64_t cols, float* db) override {
    switch (act) {
      case Activation::kRelu:
        return BackwardBiasRows<Activation::kRelu>(pre, dout, dpre, rows, cols, db);
      case Activation::kTanh:
        return BackwardBiasRows<Activation::kTanh>(pre, dout, dpre, rows, cols, db);
      case Activation::kGelu:
        return BackwardBiasRows<Activation::kGelu>(pre, dout, dpre, rows, cols, db);
    }
  }

  double LossAndGrad(LossKind loss, const float* logits, const float* targets, std::int64_t rows,
                     std::int64_t cols, float scale, float* dlogits) override {
    double total = 0.0;
    if (loss == LossKind::kCrossEntropy) {
      for (std::int64_t r = 0; r < rows; ++r) {
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
        total += static_cast<double>(mx) + std::log(sum) - static_cast<double>(z[t]);
        const double inv = 1.0 / sum;
        for (std::int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(dz[c]) * inv;
          dz[c] = scale * static_cast<float>(p - (c == t ? 1.0 : 0.0));
        }
      }
    } else {
      const float inv = 1.0f / static_cast<float>(cols);
      for (std::int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::int64_t i = r * cols + c;
          float d = logits[i] - targets[i];
          s += static_cast<double>(d) * static_cast<double>(d);
          dlogits[i] = scale * 2.0f * d * inv;
        }
        total += s / static_cast<double>(cols);
      }
    }
    return total;
  }

  // Eight independent double accumulators: the sequential sum was bound by
  // the latency of one addition per element; lanes vectorise.
  double SumSquares(const float* x, std::size_t n) override {
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

  void AdamW(float* param, const float* grad, float* m, float* v, std::size_t n,
             const AdamWStep& st) override {
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

  void Progress() override {
    if (sends_.empty()) return;
    int flag = 0;
    MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &flag, MPI_STATUSES_IGNORE);
    if (flag) sends_.clear();
  }

  void WaitSends() override {
    if (sends_.empty()) return;
    MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE);
    sends_.clear();
  }

  void Synchronize() override {}

 private:
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
  std::vector<MPI_Request> reduces_;
  std::vector<MPI_Request> sends_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const ProcessGrid* grid) {
  return std::make_unique<CpuBackend>(grid);
}

}  // namespace hpcml::trainer
