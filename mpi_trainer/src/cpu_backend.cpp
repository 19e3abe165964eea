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
      float* row = y + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void BiasGrad(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = dy + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) db[c] += row[c];
    }
  }

  void ActForward(Activation act, const float* pre, float* out, std::size_t n) override {
    switch (act) {
      case Activation::kRelu:
        for (std::size_t i = 0; i < n; ++i) out[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
        break;
      case Activation::kTanh:
        for (std::size_t i = 0; i < n; ++i) out[i] = std::tanh(pre[i]);
        break;
      case Activation::kGelu:
        for (std::size_t i = 0; i < n; ++i) {
          float x = pre[i];
          out[i] = 0.5f * x * (1.0f + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
        }
        break;
    }
  }

  void ActBackward(Activation act, const float* pre, const float* dout, float* dpre,
                   std::size_t n) override {
    switch (act) {
      case Activation::kRelu:
        for (std::size_t i = 0; i < n; ++i) dpre[i] = pre[i] > 0.0f ? dout[i] : 0.0f;
        break;
      case Activation::kTanh:
        for (std::size_t i = 0; i < n; ++i) {
          float t = std::tanh(pre[i]);
          dpre[i] = dout[i] * (1.0f - t * t);
        }
        break;
      case Activation::kGelu:
        for (std::size_t i = 0; i < n; ++i) {
          float x = pre[i];
          float t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
          float d = 0.5f * (1.0f + t) +
                    0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
          dpre[i] = dout[i] * d;
        }
        break;
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
        float mx = *std::max_element(z, z + cols);
        double sum = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(z[c] - mx));
        double lse = static_cast<double>(mx) + std::log(sum);
        total += lse - static_cast<double>(z[t]);
        for (std::int64_t c = 0; c < cols; ++c) {
          double p = std::exp(static_cast<double>(z[c]) - lse);
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

  double SumSquares(const float* x, std::size_t n) override {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return s;
  }

  void AdamW(float* param, const float* grad, float* m, float* v, std::size_t n,
             const AdamWStep& st) override {
    const double bc1 = 1.0 - std::pow(static_cast<double>(st.beta1), static_cast<double>(st.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(st.beta2), static_cast<double>(st.step));
    const float step_size = static_cast<float>(static_cast<double>(st.lr) / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - st.lr * st.weight_decay;
    for (std::size_t i = 0; i < n; ++i) {
      const float g = grad[i] * st.grad_scale;
      m[i] = st.beta1 * m[i] + (1.0f - st.beta1) * g;
      v[i] = st.beta2 * v[i] + (1.0f - st.beta2) * g * g;
      const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + st.eps;
      param[i] = param[i] * decay - step_size * m[i] / denom;
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

  void Send(const float* x, std::size_t n, int peer_stage, int tag) override {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Isend(x, static_cast<int>(n), MPI_FLOAT, peer_stage, tag, Comm(Group::kPipeline), &req);
    // Large messages go by rendezvous, which only moves while the sender is
    // inside MPI. The peer usually waits in its receive already, so progress
    // the send for a bounded moment instead of leaving it to the next MPI
    // call after our next compute (that would add a microbatch of bubble).
    int done = 0;
    const double until = MPI_Wtime() + 200e-6;
    while (!done && MPI_Wtime() < until) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) sends_.push_back(req);
  }

  void Recv(float* x, std::size_t n, int peer_stage, int tag) override {
    MPI_Recv(x, static_cast<int>(n), MPI_FLOAT, peer_stage, tag, Comm(Group::kPipeline),
             MPI_STATUS_IGNORE);
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
