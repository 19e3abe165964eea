#include "hpcml/trainer/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {

Result<std::unique_ptr<Model>> Model::Create(const ModelConfig& config, const ModelPlan& plan,
                                             const Placement& where, Backend* backend) {
  if (where.stage < 0 || where.stage >= plan.num_stages()) {
    return InvalidArgument("stage {} outside the plan's {} stages", where.stage, plan.num_stages());
  }
  std::unique_ptr<Model> m(new Model(config, backend));
  m->where_ = where;
  m->first_ = plan.stage_begin[static_cast<size_t>(where.stage)];
  const int end = plan.stage_begin[static_cast<size_t>(where.stage) + 1];
  std::size_t offset = 0;
  for (int l = m->first_; l < end; ++l) {
    Layer L;
    L.plan = plan.layers[static_cast<size_t>(l)];
    L.in_l = L.plan.in;
    L.out_l = L.plan.out;
    std::int64_t r0 = 0, r1 = L.plan.out, c0 = 0, c1 = L.plan.in;
    if (L.plan.split == Split::kColumn) {
      L.out_l = L.plan.out / where.tp;
      r0 = L.out_l * where.tp_idx;
      r1 = r0 + L.out_l;
    } else if (L.plan.split == Split::kRow) {
      L.in_l = L.plan.in / where.tp;
      c0 = L.in_l * where.tp_idx;
      c1 = c0 + L.in_l;
    }
    L.w_off = offset;
    offset += static_cast<std::size_t>(L.out_l * L.in_l);
    L.b_off = offset;
    offset += static_cast<std::size_t>(L.out_l);

    ParamInfo w;
    w.name = fmt::format("layer{}.weight", l);
    w.layer = l;
    w.global_shape = {L.plan.out, L.plan.in};
    w.row_begin = r0;
    w.row_end = r1;
    w.col_begin = c0;
    w.col_end = c1;
    w.tp_replicated = L.plan.split == Split::kReplicated;
    w.offset = L.w_off;
    w.size = static_cast<std::size_t>(L.out_l * L.in_l);
    ParamInfo b;
    b.name = fmt::format("layer{}.bias", l);
    b.layer = l;
    b.is_bias = true;
    b.global_shape = {L.plan.out};
    b.row_begin = r0;
    b.row_end = r1;
    b.tp_replicated = L.plan.split != Split::kColumn;
    b.offset = L.b_off;
    b.size = static_cast<std::size_t>(L.out_l);
    m->params_.push_back(std::move(w));
    m->params_.push_back(std::move(b));
    m->layers_.push_back(L);
  }
  m->overwrite_grad_.assign(m->layers_.size(), 0);
  m->overwrite_wgrad_.assign(m->layers_.size(), 0);
  m->params_buf_ = backend->Alloc(offset);
  m->grads_buf_ = backend->Alloc(offset);

  // Counter-based init of the owned slices (see the header's contract).
  std::vector<float> host(offset, 0.0f);
  for (const Layer& L : m->layers_) {
    const ParamInfo& w = m->params_[static_cast<size_t>(2 * (L.plan.index - m->first_))];
    const std::uint64_t seed = DeriveSeed(config.seed, static_cast<std::uint64_t>(L.plan.index));
    const double scale = 1.0 / std::sqrt(static_cast<double>(L.plan.in));
    float* dst = host.data() + L.w_off;
    for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
      for (std::int64_t c = w.col_begin; c < w.col_end; ++c) {
        const auto counter = static_cast<std::uint64_t>(r * L.plan.in + c);
        *dst++ = static_cast<float>(GaussianAt(seed, counter) * scale);
      }
    }
  }
  backend->ToDevice(m->params_buf_.data(), host.data(), offset);
  return m;
}

std::size_t Model::layer_size(int i) const {
  const Layer& L = layers_[static_cast<size_t>(i)];
  return static_cast<std::size_t>(L.out_l * L.in_l + L.out_l);
}

std::int64_t Model::input_width() const {
  return layers_.front().plan.in;
}
std::int64_t Model::output_width() const {
  return layers_.back().plan.out;
}

void Model::Reserve(int microbatches, std::int64_t rows) {
  if (rows == rows_ && static_cast<int>(states_.size()) == microbatches) return;
  rows_ = rows;
  states_.clear();
  states_.resize(static_cast<size_t>(microbatches));
  std::int64_t widest = input_width();
  for (MicroState& st : states_) {
    for (const Layer& L : layers_) {
      st.z.push_back(backend_->Alloc(static_cast<std::size_t>(rows * L.out_l)));
      st.a.push_back(L.plan.activation ? backend_->Alloc(static_cast<std::size_t>(rows * L.out_l))
                                       : Buffer());
      st.dz.push_back(L.plan.activation ? backend_->Alloc(static_cast<std::size_t>(rows * L.out_l))
                                        : Buffer());
      st.gz.push_back(nullptr);
    }
    st.dinput = backend_->Alloc(static_cast<std::size_t>(rows * input_width()));
  }
  for (const Layer& L : layers_) widest = std::max({widest, L.plan.in, L.plan.out});
  dx_ = backend_->Alloc(static_cast<std::size_t>(rows * widest));
  pending_.clear();
}

void Model::ZeroGrad() {
  backend_->Fill(grads_buf_.data(), grads_buf_.size(), 0.0f);
  std::fill(overwrite_grad_.begin(), overwrite_grad_.end(), 0);
  std::fill(overwrite_wgrad_.begin(), overwrite_wgrad_.end(), 0);
}

void Model::ZeroGradOnNextBackward() {
  overwrite_grad_.assign(layers_.size(), 1);
  overwrite_wgrad_.assign(layers_.size(), 1);
  pending_.clear();
  wgrads_done_ = 0;
}

const float* Model::LayerOut(const MicroState& st, int i) const {
  const size_t k = static_cast<size_t>(i);
  return layers_[k].plan.activation ? st.a[k].data() : st.z[k].data();
}

void Model::Forward(int mb, const float* input) {
  MicroState& st = states_[static_cast<size_t>(mb)];
  st.input = input;
  const float* x = input;
  const float* p = params_buf_.data();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    float* z = st.z[i].data();
    float* a = L.plan.activation ? st.a[i].data() : nullptr;
    // z = x W^T + b, a = act(z); W is [out_l, in_l].
    if (L.plan.split == Split::kRow && where_.tp > 1) {
      // Row-parallel: the partial products of the tensor group add up to the
      // full pre-activation (the one forward all-reduce of a Megatron pair),
      // so the bias comes after the sum.
      backend_->Gemm(false, true, rows_, L.out_l, L.in_l, 1.0f, x, L.in_l, p + L.w_off, L.in_l,
                     0.0f, z, L.out_l);
      backend_->Allreduce(z, static_cast<std::size_t>(rows_ * L.out_l), Group::kTensor);
      backend_->AddBiasAct(config_.activation, z, p + L.b_off, a, rows_, L.out_l);
    } else {
      backend_->DenseForward(x, p + L.w_off, p + L.b_off, rows_, L.in_l, L.out_l,
                             config_.activation, z, a);
    }
    x = LayerOut(st, static_cast<int>(i));
    backend_->Progress();
  }
}

const float* Model::Output(int mb) const {
  return LayerOut(states_[static_cast<size_t>(mb)], num_local_layers() - 1);
}

void Model::Backward(int mb, const float* dout, bool need_dinput) {
  MicroState& st = states_[static_cast<size_t>(mb)];
  const float* p = params_buf_.data();
  float* g = grads_buf_.data();
  const float* grad_out = dout;
  for (int i = num_local_layers() - 1; i >= 0; --i) {
    const auto k = static_cast<size_t>(i);
    const Layer& L = layers_[k];
    // The first backward after ZeroGradOnNextBackward overwrites the bias
    // gradient (a fill of out_l floats, not of the whole buffer).
    char& fresh = overwrite_grad_[k];
    if (fresh) backend_->Fill(g + L.b_off, static_cast<std::size_t>(L.out_l), 0.0f);
    fresh = 0;
    // gz = dLoss/dz, kept for WeightGrads; db += its column sums (fused
    // with the activation derivative).
    const float* gz = grad_out;
    if (L.plan.activation) {
      // ReLU's derivative reads the output: DenseForward may not write z.
      const float* pre =
          config_.activation == Activation::kRelu ? st.a[k].data() : st.z[k].data();
      backend_->ActBackwardBiasGrad(config_.activation, pre, grad_out, st.dz[k].data(), rows_,
                                    L.out_l, g + L.b_off);
      gz = st.dz[k].data();
    } else {
      backend_->BiasGrad(gz, rows_, L.out_l, g + L.b_off);
    }
    st.gz[k] = gz;
    if (i > 0 || need_dinput) {
      float* dx = i == 0 ? st.dinput.data() : dx_.data();
      backend_->Gemm(false, false, rows_, L.in_l, L.out_l, 1.0f, gz, L.out_l, p + L.w_off, L.in_l,
                     0.0f, dx, L.in_l);
      // Column-parallel: each shard saw part of the outputs; the input
      // gradient is their sum (the one backward all-reduce of a pair).
      if (L.plan.split == Split::kColumn && where_.tp > 1) {
        backend_->Allreduce(dx, static_cast<std::size_t>(rows_ * L.in_l), Group::kTensor);
      }
      grad_out = dx;
    }
    backend_->Progress();
  }
  pending_.push_back(mb);
}

void Model::WeightGrads(const std::function<void(int)>& layer_done, int max_microbatches) {
  const auto count = std::min(pending_.size(), static_cast<std::size_t>(std::max(0, max_microbatches)));
  if (count == 0) return;
  const bool completes =
      wgrads_done_ + static_cast<int>(count) == static_cast<int>(states_.size());
  float* g = grads_buf_.data();
  for (int i = num_local_layers() - 1; i >= 0; --i) {
    const auto k = static_cast<size_t>(i);
    const Layer& L = layers_[k];
    for (std::size_t j = 0; j < count; ++j) {
      const MicroState& st = states_[static_cast<size_t>(pending_[j])];
      const float* x = i == 0 ? st.input : LayerOut(st, i - 1);
      // dW (+)= gz^T x; the first after ZeroGradOnNextBackward overwrites.
      const float beta = overwrite_wgrad_[k] ? 0.0f : 1.0f;
      overwrite_wgrad_[k] = 0;
      backend_->Gemm(true, false, L.out_l, L.in_l, rows_, 1.0f, st.gz[k], L.out_l, x, L.in_l, beta,
                     g + L.w_off, L.in_l);
    }
    if (completes && layer_done) layer_done(i);
    backend_->Progress();
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
  wgrads_done_ += static_cast<int>(count);
}

const float* Model::InputGrad(int mb) const {
  return states_[static_cast<size_t>(mb)].dinput.data();
}

}  // namespace hpcml::trainer
