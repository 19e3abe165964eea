#include "hpcml/trainer/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {

Result<std::unique_ptr<Model>> Model::Create(const ModelConfig& config, const ModelPartition& plan,
                                             const Placement& where, Backend* backend) {
  if (where.stage < 0 || where.stage >= plan.num_stages()) {
    return InvalidArgument("stage {} outside the plan's {} stages", where.stage, plan.num_stages());
  }
  std::unique_ptr<Model> m(new Model(config, backend));
  m->where_ = where;
  m->first_ = plan.stage_begin[static_cast<size_t>(where.stage)];
  const int end = plan.stage_begin[static_cast<size_t>(where.stage) + 1];
  std::size_t offset = 0;
  if (where.stage == 0) {
    std::int64_t slot = config.input_dim - config.embedded_width();
    for (size_t j = 0; j < config.embeddings.size(); ++j) {
      const EmbeddingShape& e = config.embeddings[j];
      m->tables_.push_back({e, offset, slot});
      ParamInfo t;
      t.name = fmt::format("embed{}.weight", j);
      t.layer = -1;
      t.global_shape = {e.rows, e.dim};
      t.row_end = e.rows;
      t.col_end = e.dim;
      t.tp_replicated = true;
      t.offset = offset;
      t.size = static_cast<std::size_t>(e.rows * e.dim);
      m->params_.push_back(std::move(t));
      offset += static_cast<std::size_t>(e.rows * e.dim);
      slot += e.dim;
    }
  }
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
  m->pending_.assign(m->layers_.size(), {});
  m->wgrads_done_.assign(m->layers_.size(), 0);
  m->params_buf_ = backend->Alloc(offset);
  m->grads_buf_ = backend->Alloc(offset);

  // Counter-based init of the owned slices (see the header's contract).
  std::vector<float> host(offset, 0.0f);
  for (size_t j = 0; j < m->tables_.size(); ++j) {
    const Table& t = m->tables_[j];
    const std::uint64_t seed = DeriveSeed(config.seed, (std::uint64_t{1} << 32) + j);
    const std::int64_t n = (t.shape.rows - 1) * t.shape.dim;  // the unknown row stays 0
    for (std::int64_t i = 0; i < n; ++i) {
      host[t.off + static_cast<size_t>(i)] =
          static_cast<float>(GaussianAt(seed, static_cast<std::uint64_t>(i)));
    }
  }
  for (const Layer& L : m->layers_) {
    const ParamInfo& w =
        m->params_[m->tables_.size() + static_cast<size_t>(2 * (L.plan.index - m->first_))];
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
  z_all_.clear();
  a_all_.clear();
  dz_all_.clear();
  const auto all = static_cast<std::size_t>(microbatches) * static_cast<std::size_t>(rows);
  for (const Layer& L : layers_) {
    const auto n = all * static_cast<std::size_t>(L.out_l);
    z_all_.push_back(backend_->Alloc(n));
    a_all_.push_back(L.plan.activation ? backend_->Alloc(n) : Buffer());
    dz_all_.push_back(L.plan.activation ? backend_->Alloc(n) : Buffer());
  }
  for (std::size_t mb = 0; mb < states_.size(); ++mb) {
    MicroState& st = states_[mb];
    for (std::size_t k = 0; k < layers_.size(); ++k) {
      const std::size_t off = mb * static_cast<std::size_t>(rows * layers_[k].out_l);
      st.z.push_back(z_all_[k].data() + off);
      st.a.push_back(a_all_[k].data() ? a_all_[k].data() + off : nullptr);
      st.dz.push_back(dz_all_[k].data() ? dz_all_[k].data() + off : nullptr);
      st.gz.push_back(nullptr);
    }
    st.dinput = backend_->Alloc(static_cast<std::size_t>(rows * input_width()));
    st.codes = backend_->Alloc(tables_.size() * static_cast<std::size_t>(rows));
  }
  if (!tables_.empty()) {
    demb_ = backend_->Alloc(static_cast<std::size_t>(rows * config_.embedded_width()));
  }
  for (const Layer& L : layers_) widest = std::max({widest, L.plan.in, L.plan.out});
  dx_ = backend_->Alloc(static_cast<std::size_t>(rows * widest));
  StartWeightGrads();
}

void Model::ZeroGrad() {
  backend_->Fill(grads_buf_.data(), grads_buf_.size(), 0.0f);
  overwrite_embed_ = false;
  std::fill(overwrite_grad_.begin(), overwrite_grad_.end(), 0);
  std::fill(overwrite_wgrad_.begin(), overwrite_wgrad_.end(), 0);
  StartWeightGrads();
}

void Model::StartWeightGrads() {
  for (auto& p : pending_) p.clear();
  pending_count_ = 0;
  std::fill(wgrads_done_.begin(), wgrads_done_.end(), 0);
  next_done_ = num_local_layers() - 1;
}

void Model::ZeroGradOnNextBackward() {
  overwrite_embed_ = true;
  overwrite_grad_.assign(layers_.size(), 1);
  overwrite_wgrad_.assign(layers_.size(), 1);
  StartWeightGrads();
}

const float* Model::LayerOut(const MicroState& st, int i) const {
  const size_t k = static_cast<size_t>(i);
  return layers_[k].plan.activation ? st.a[k] : st.z[k];
}

void Model::Embed(int mb, float* input) {
  MicroState& st = states_[static_cast<size_t>(mb)];
  const float* p = params_buf_.data();
  for (size_t j = 0; j < tables_.size(); ++j) {
    const Table& t = tables_[j];
    backend_->EmbedLookup(p + t.off, t.shape.dim, input + t.slot, input_width(), rows_,
                          st.codes.data() + j * static_cast<size_t>(rows_));
  }
}

// The tables' gradients from the first layer's output gradient `gz`: the
// input gradient over the embedding columns only (they are the last ones),
// summed over the tensor group when the layer is column-split.
void Model::EmbeddingGrads(MicroState& st, const Layer& first, const float* gz) {
  const std::int64_t ew = config_.embedded_width(), e0 = first.in_l - ew;
  float* g = grads_buf_.data();
  backend_->Gemm(false, false, rows_, ew, first.out_l, 1.0f, gz, first.out_l,
                 params_buf_.data() + first.w_off + e0, first.in_l, 0.0f, demb_.data(), ew);
  if (first.plan.split == Split::kColumn && where_.tp > 1) {
    backend_->Allreduce(demb_.data(), static_cast<std::size_t>(rows_ * ew), Group::kTensor);
  }
  for (size_t j = 0; j < tables_.size(); ++j) {
    const Table& t = tables_[j];
    if (overwrite_embed_) {
      backend_->Fill(g + t.off, static_cast<std::size_t>(t.shape.rows * t.shape.dim), 0.0f);
    }
    backend_->EmbedGrad(demb_.data() + (t.slot - e0), ew,
                        st.codes.data() + j * static_cast<size_t>(rows_), rows_, t.shape.dim,
                        g + t.off);
  }
  overwrite_embed_ = false;
}

void Model::Forward(int mb, const float* input) {
  MicroState& st = states_[static_cast<size_t>(mb)];
  st.input = input;
  const float* x = input;
  const float* p = params_buf_.data();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    float* z = st.z[i];
    float* a = st.a[i];
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
      const float* pre = config_.activation == Activation::kRelu ? st.a[k] : st.z[k];
      backend_->ActBackwardBiasGrad(config_.activation, pre, grad_out, st.dz[k], rows_, L.out_l,
                                    g + L.b_off);
      gz = st.dz[k];
    } else {
      backend_->BiasGrad(gz, rows_, L.out_l, g + L.b_off);
    }
    st.gz[k] = gz;
    if (i == 0 && !tables_.empty()) EmbeddingGrads(st, L, gz);
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
  for (auto& layer : pending_) layer.push_back(mb);
  pending_count_ += pending_.size();
}

void Model::WeightGrads(const std::function<void(int)>& layer_done, int max_layers) {
  float* g = grads_buf_.data();
  for (int done = 0; done < max_layers && pending_count_ > 0; ++done) {
    std::size_t k = 0;
    for (std::size_t c = 1; c < layers_.size(); ++c) {
      if (pending_[c].size() >= pending_[k].size()) k = c;
    }
    const int i = static_cast<int>(k);
    const Layer& L = layers_[k];
    std::vector<int>& mbs = pending_[k];
    // One GEMM per run of microbatches whose rows lie back to back (inputs
    // and output gradients): a deeper product, and one pass over dW.
    for (std::size_t j = 0; j < mbs.size();) {
      const MicroState& st = states_[static_cast<size_t>(mbs[j])];
      const float* x = i == 0 ? st.input : LayerOut(st, i - 1);
      const float* gz = st.gz[k];
      std::size_t run = 1;
      while (j + run < mbs.size()) {
        const MicroState& nx = states_[static_cast<size_t>(mbs[j + run])];
        const auto step = static_cast<std::ptrdiff_t>(run) * rows_;
        if ((i == 0 ? nx.input : LayerOut(nx, i - 1)) != x + step * L.in_l ||
            nx.gz[k] != gz + step * L.out_l) {
          break;
        }
        ++run;
      }
      // dW (+)= gz^T x; the first after ZeroGradOnNextBackward overwrites.
      const float beta = overwrite_wgrad_[k] ? 0.0f : 1.0f;
      overwrite_wgrad_[k] = 0;
      backend_->Gemm(true, false, L.out_l, L.in_l, rows_ * static_cast<std::int64_t>(run), 1.0f, gz,
                     L.out_l, x, L.in_l, beta, g + L.w_off, L.in_l);
      j += run;
    }
    wgrads_done_[k] += static_cast<int>(mbs.size());
    pending_count_ -= mbs.size();
    mbs.clear();
    // Reported last layer first, as the data-parallel buckets expect,
    // whatever order the layers completed in.
    while (next_done_ >= 0 &&
           wgrads_done_[static_cast<size_t>(next_done_)] == static_cast<int>(states_.size())) {
      if (layer_done) layer_done(next_done_);
      --next_done_;
    }
    backend_->Progress();
  }
}

const float* Model::InputGrad(int mb) const {
  return states_[static_cast<size_t>(mb)].dinput.data();
}

}  // namespace hpcml::trainer
