#include "hpcml/inference/engine.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "hpcml/trainer/encoding.hpp"

namespace hpcml::inference {

std::string_view Name(Precision p) {
  return p == Precision::kInt8 ? "int8" : "fp32";
}
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

// Row-wise softmax in place; the max is subtracted first, so no exp overflows.
void Softmax(float* z, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = z + r * cols;
    const float mx = *std::max_element(row, row + cols);
    float sum = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) {
      row[c] = std::exp(row[c] - mx);
      sum += row[c];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t c = 0; c < cols; ++c) row[c] *= inv;
  }
}

dnnl::algorithm Eltwise(trainer::Activation a) {
  switch (a) {
    case trainer::Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case trainer::Activation::kGelu:
      return dnnl::algorithm::eltwise_gelu_tanh;  // the trainer's tanh form
    case trainer::Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh;
  }
  return dnnl::algorithm::eltwise_relu;
}

// One layer: its weights reordered once into the blocked layout oneDNN's
// matmul picks for them (the layout does not depend on the rows), so no
// call repacks them: the difference between a GEMM library and an
// inference engine (ONNX Runtime prepacks constant weights too). Measured
// on one core, 4096 x 4096: one row 1.36 ms packed against 2.76 ms from the
// row-major weights; 64 rows 230 against 200 GFLOP/s.
//
// int8 (Precision::kInt8): weights quantised per output channel (symmetric,
// scale = max |w| / 127, or / 63 without VNNI: WeightLevels), activations per call over the whole
// slice (scale s_x = max |x| / 127), s8 x s8 products accumulated in int32 by oneDNN's VNNI kernel
// on packed weights. That kernel takes only constant output scales (with run-time ones oneDNN 2.6
// falls back to a GEMM that repacks the weights on every call, slower than float32), so the matmul
// applies the weight scales and the bias divided by s_x (oneDNN scales the bias with the product),
// and a second pass multiplies by s_x and applies the activation (a oneDNN eltwise primitive, in
// place).
struct Layer {
  std::int64_t in = 0, out = 0;
  bool activation = false;
  bool int8 = false;
  dnnl::memory weights, bias;
  std::vector<float> model_bias, weight_scale;  // int8 only
};

// int8 pays only where the product dominates the per-call quantisation and
// the second pass: layers with fewer weights stay float32 (measured: the
// 32-64-64-2 model ran 2-12x slower in int8, the 256-4096x3-16 one 2-10x
// faster).
constexpr std::int64_t kInt8MinWeights = 256 * 256;

// The weights' int8 levels. Without VNNI (AVX2, AVX-512 before Cascade
// Lake) oneDNN multiplies s8 inputs shifted to u8 with vpmaddubsw, whose
// pairs of products saturate at 2^15 - 1: 255 x 127 x 2 does, 255 x 63 x 2
// does not. So weights get 7 bits there (measured on an AVX2-only EPYC:
// 127 levels gave errors up to 0.135 against float32 where VNNI machines
// stay under 0.03).
float WeightLevels() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return 127.0f;
    default:
      return 63.0f;
  }
}

// A product of fewer multiply-adds runs on one thread: spreading it over
// more costs more than it saves (measured: 32-64-64-2 at 64 rows, 12.3 M
// rows/s on one thread, 7.9 M on two).
constexpr std::int64_t kParallelMacs = 1 << 19;

// Symmetric int8: q = round(x / scale), scale = max |x| / levels (1 for all
// zeros). Returns the scale.
float Quantize(const float* x, std::size_t n, std::int8_t* q, float levels = 127.0f) {
  float mx = 0.0f;
  for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, std::abs(x[i]));
  const float scale = mx > 0.0f ? mx / levels : 1.0f, inv = 1.0f / scale;
  for (std::size_t i = 0; i < n; ++i) q[i] = static_cast<std::int8_t>(std::nearbyint(x[i] * inv));
  return scale;
}

// The primitives and memory handles of one row count, made on first use.
struct Pass {
  std::vector<int> threads;  // per layer: made and run with this many OpenMP threads
  std::vector<dnnl::matmul> prims;
  std::vector<dnnl::memory> src, dst;
  std::vector<std::optional<dnnl::eltwise_forward>> acts;   // int8: the activation pass
  std::vector<std::unordered_map<int, dnnl::memory>> args;  // per layer, over the handles
};

const trainer::InputEncoding* EncodingOf(const trainer::ModelFile& m) {
  return m.lineage && m.lineage->input.encoding ? &*m.lineage->input.encoding : nullptr;
}

// Raw values per row: one per feature for an encoded model, else the first
// layer's width.
std::int64_t RawInputs(const trainer::ModelFile& m) {
  const trainer::InputEncoding* enc = EncodingOf(m);
  return enc ? static_cast<std::int64_t>(enc->columns.size()) : m.config.input_dim;
}

class CpuEngine final : public Engine {
 public:
  CpuEngine(const trainer::ModelFile& m, const EngineOptions& o)
      : Engine(RawInputs(m), m.config.output_dim),
        config_(m.config),
        max_batch_(std::max<std::int64_t>(1, o.max_batch)),
        threads_(std::max(1, o.threads)),
        int8_(o.precision == Precision::kInt8) {
    if (m.lineage && m.lineage->input.any_standardized()) scaling_ = m.lineage->input;
    if (const trainer::InputEncoding* enc = EncodingOf(m)) {
      encoding_ = *enc;
      offsets_ = enc->embedding_offsets();
      const auto first = static_cast<size_t>(2 * config_.num_layers());
      for (size_t j = 0; j < offsets_.size(); ++j) tables_.push_back(m.tensors[first + j]);
      encoded_.resize(static_cast<size_t>(max_batch_ * config_.input_dim));
    }
    std::int64_t widest = config_.input_dim;
    for (int l = 0; l < config_.num_layers(); ++l) {
      widest = std::max(widest, config_.out_dim(l));
      layers_.push_back(Pack(l, m));
    }
    input_.resize(static_cast<size_t>(max_batch_ * inputs()));
    act_[0].resize(static_cast<size_t>(max_batch_ * widest));
    act_[1].resize(act_[0].size());
    for (const Layer& L : layers_) {
      if (L.int8) quantized_.resize(act_[0].size());
    }
  }

  int int8_layers() const override {
    return static_cast<int>(
        std::count_if(layers_.begin(), layers_.end(), [](const Layer& L) { return L.int8; }));
  }

  Status Score(const float* x, std::int64_t rows, float* out, Input input) override {
    if (rows < 0) return InvalidArgument("cannot score {} rows", rows);
    try {
      for (std::int64_t first = 0; first < rows; first += max_batch_) {
        const std::int64_t n = std::min(max_batch_, rows - first);
        Status st = ScoreSlice(x + first * inputs(), n, out + first * outputs(), input);
        if (!st.ok()) {
          return std::move(st)
              .WithContext(fmt::format("rows {} to {} (0-based)", first, first + n - 1))
              .At();
        }
      }
    } catch (const dnnl::error& e) {
      return Internal("oneDNN: {} (status {})", e.what(), static_cast<int>(e.status));
    }
    return Status::Ok();
  }

 private:
  // W [out, in] row-major is W^T [in, out] in oneDNN's "ba"; reordered into
  // the layout the matmul for max_batch_ rows asks for (s8 for int8).
  Layer Pack(int l, const trainer::ModelFile& m) {
    Layer L;
    L.in = config_.in_dim(l);
    L.out = config_.out_dim(l);
    L.activation = l + 1 < config_.num_layers();
    L.int8 = int8_ && L.in * L.out >= kInt8MinWeights;
    const auto& w = m.tensors[static_cast<size_t>(2 * l)].data;
    const auto& b = m.tensors[static_cast<size_t>(2 * l + 1)].data;
    const dt type = L.int8 ? dt::s8 : dt::f32;
    std::vector<std::int8_t> wq;
    void* plain_data = const_cast<float*>(w.data());
    if (L.int8) {
      wq.resize(w.size());
      for (std::int64_t o = 0; o < L.out; ++o) {
        const auto at = static_cast<size_t>(o * L.in);
        L.weight_scale.push_back(
            Quantize(w.data() + at, static_cast<size_t>(L.in), wq.data() + at, WeightLevels()));
      }
      plain_data = wq.data();
      L.model_bias = b;
    }
    const dnnl::memory::desc plain({L.in, L.out}, type, dnnl::memory::format_tag::ba);
    const auto pd = Describe(
        L, max_batch_, dnnl::memory::desc({L.in, L.out}, type, dnnl::memory::format_tag::any));
    dnnl::memory src(plain, engine_, plain_data);
    L.weights = dnnl::memory(pd.weights_desc(), engine_);
    dnnl::reorder(src, L.weights).execute(stream_, src, L.weights);
    L.bias = dnnl::memory({{1, L.out}, dt::f32, dnnl::memory::format_tag::ab}, engine_);
    std::copy(b.begin(), b.end(), static_cast<float*>(L.bias.get_data_handle()));
    stream_.wait();
    return L;
  }

  dnnl::matmul::primitive_desc Describe(const Layer& L, std::int64_t rows,
                                        const dnnl::memory::desc& weights) {
    const dnnl::memory::desc src({rows, L.in}, L.int8 ? dt::s8 : dt::f32,
                                 dnnl::memory::format_tag::ab);
    const dnnl::memory::desc bias({1, L.out}, dt::f32, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc dst({rows, L.out}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::primitive_attr attr;
    if (L.int8) attr.set_output_scales(1 << 1, L.weight_scale);  // per output channel
    if (L.activation && !L.int8) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, Eltwise(config_.activation), 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, bias, dst), attr, engine_);
  }

  Pass& PassFor(std::int64_t rows) {
    auto it = passes_.find(rows);
    if (it != passes_.end()) return it->second;
    Pass p;
    for (const Layer& L : layers_) {
      // oneDNN sizes its work split by the thread count at creation; the
      // primitive runs with the same count.
      p.threads.push_back(rows * L.in * L.out >= kParallelMacs ? threads_ : 1);
      omp_set_num_threads(p.threads.back());
      const auto pd = Describe(L, rows, L.weights.get_desc());
      p.prims.emplace_back(pd);
      p.src.push_back(dnnl::memory(pd.src_desc(), engine_, DNNL_MEMORY_NONE));
      p.dst.push_back(dnnl::memory(pd.dst_desc(), engine_, DNNL_MEMORY_NONE));
      p.args.push_back({{DNNL_ARG_SRC, p.src.back()},
                        {DNNL_ARG_WEIGHTS, L.weights},
                        {DNNL_ARG_BIAS, L.bias},
                        {DNNL_ARG_DST, p.dst.back()}});
      p.acts.emplace_back();
      if (L.int8 && L.activation) {
        const dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference,
                                            Eltwise(config_.activation), pd.dst_desc(), 0.0f, 0.0f);
        p.acts.back().emplace(dnnl::eltwise_forward::primitive_desc(d, engine_));
      }
    }
    return passes_.emplace(rows, std::move(p)).first->second;
  }

  // The model's standardisation, as the derive computed it: in double,
  // rounded to float.
  const float* Standardize(const float* x, std::int64_t rows) {
    const std::int64_t f = inputs();
    float* dst = input_.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < f; ++j) {
        const auto k = static_cast<size_t>(j);
        const float v = x[r * f + j];
        dst[r * f + j] = scaling_.standardized[k]
                             ? static_cast<float>((v - scaling_.mean[k]) / scaling_.scale[k])
                             : v;
      }
    }
    return dst;
  }

  // Each category's slot, holding its code after Encode, becomes the row of
  // its embedding table for that code (Encode checked the code's range).
  void Embed(float* y, std::int64_t rows) {
    const std::int64_t width = config_.input_dim;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = y + r * width;
      for (size_t j = 0; j < offsets_.size(); ++j) {
        const std::int64_t dim = tables_[j].shape[1];
        const auto code = static_cast<std::int64_t>(row[offsets_[j]]);
        std::copy_n(tables_[j].data.data() + code * dim, dim, row + offsets_[j]);
      }
    }
  }

  // The derive's standardisation (raw input), then the encoding and the
  // embeddings (an encoded model), then the layers.
  Status ScoreSlice(const float* x, std::int64_t rows, float* out, Input input) {
    const float* cur =
        input == Input::kRaw && scaling_.any_standardized() ? Standardize(x, rows) : x;
    if (encoding_) {
      HPCML_RETURN_IF_ERROR(trainer::Encode(*encoding_, cur, rows, encoded_.data()));
      Embed(encoded_.data(), rows);
      cur = encoded_.data();
    }
    Pass& p = PassFor(rows);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      // The last layer writes the caller's buffer directly.
      float* next = l + 1 == layers_.size() ? out : act_[l % 2].data();
      const float sx = L.int8 ? QuantizeInput(L, cur, rows) : 1.0f;
      p.src[l].set_data_handle(L.int8 ? static_cast<void*>(quantized_.data())
                                      : const_cast<float*>(cur));
      p.dst[l].set_data_handle(next);
      omp_set_num_threads(p.threads[l]);
      p.prims[l].execute(stream_, p.args[l]);
      if (L.int8) {
        stream_.wait();
        const std::int64_t n = rows * L.out;
        for (std::int64_t i = 0; i < n; ++i) next[i] *= sx;
        if (p.acts[l]) {
          p.acts[l]->execute(stream_, {{DNNL_ARG_SRC, p.dst[l]}, {DNNL_ARG_DST, p.dst[l]}});
        }
      }
      cur = next;
    }
    stream_.wait();
    if (config_.loss == trainer::LossKind::kCrossEntropy) Softmax(out, rows, outputs());
    return Status::Ok();
  }

  // int8: the layer's input into quantized_ and the bias the matmul needs
  // (bias / (s_x * w_scale), as oneDNN multiplies it by w_scale and the
  // second pass by s_x). Returns s_x.
  float QuantizeInput(const Layer& L, const float* x, std::int64_t rows) {
    const float sx = Quantize(x, static_cast<size_t>(rows * L.in), quantized_.data());
    auto* bias = static_cast<float*>(L.bias.get_data_handle());
    for (size_t o = 0; o < static_cast<size_t>(L.out); ++o) {
      bias[o] = L.model_bias[o] / (sx * L.weight_scale[o]);
    }
    return sx;
  }

  trainer::ModelConfig config_;
  std::int64_t max_batch_;
  int threads_;
  bool int8_;
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  trainer::InputSchema scaling_;
  std::optional<trainer::InputEncoding> encoding_;
  std::vector<std::int64_t> offsets_;        // per category feature: its slot
  std::vector<trainer::FullTensor> tables_;  // per category feature: its embedding
  std::vector<Layer> layers_;
  std::map<std::int64_t, Pass> passes_;
  std::vector<float> input_, encoded_, act_[2];  // input_: standardised raw rows
  std::vector<std::int8_t> quantized_;           // int8: the current layer's input
};

// An encoded model: its width, its tables' shapes, and the derive's
// standardisation only on number features (a category cell is a code).
Status CheckEncoding(const trainer::ModelFile& m, const trainer::InputEncoding& enc,
                     const std::vector<trainer::EmbeddingShape>& tables) {
  HPCML_RETURN_IF_ERROR(enc.Validate(m.path + ": the input encoding"));
  if (enc.width() != m.config.input_dim) {
    return InvalidArgument("{}: the input encoding is {} wide, the first layer takes {}", m.path,
                           enc.width(), m.config.input_dim);
  }
  const auto first = static_cast<size_t>(2 * m.config.num_layers());
  for (size_t j = 0; j < tables.size(); ++j) {
    const trainer::FullTensor& t = m.tensors[first + j];
    const std::vector<std::int64_t> want{tables[j].rows, tables[j].dim};
    if (t.shape != want || t.data.size() != static_cast<size_t>(want[0] * want[1])) {
      return InvalidArgument("{}: {} does not have the shape [{}, {}]", m.path, t.name, want[0],
                             want[1]);
    }
  }
  const trainer::InputSchema& in = m.lineage->input;
  for (size_t j = 0; j < in.standardized.size() && j < enc.columns.size(); ++j) {
    if (in.standardized[j] && enc.columns[j].category()) {
      return InvalidArgument("{}: category feature \"{}\" has a recorded standardisation", m.path,
                             enc.columns[j].name);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const trainer::ModelFile& model,
                                               const EngineOptions& options) {
  if (model.format == trees::kGbdtModelFormat) {
    return InvalidArgument("{}: a GBDT model; its engine is made from trees::GbdtModelFile",
                           model.path);
  }
  const trainer::ModelConfig& c = model.config;
  const trainer::InputEncoding* enc = EncodingOf(model);
  const std::vector<trainer::EmbeddingShape> tables =
      enc ? enc->embeddings() : std::vector<trainer::EmbeddingShape>{};
  if (model.tensors.size() != static_cast<size_t>(2 * c.num_layers()) + tables.size()) {
    return InvalidArgument("{}: {} tensors for {} layers and {} embeddings", model.path,
                           model.tensors.size(), c.num_layers(), tables.size());
  }
  if (enc) HPCML_RETURN_IF_ERROR(CheckEncoding(model, *enc, tables));
  for (int l = 0; l < c.num_layers(); ++l) {
    const auto& w = model.tensors[static_cast<size_t>(2 * l)];
    const auto& b = model.tensors[static_cast<size_t>(2 * l + 1)];
    if (w.data.size() != static_cast<size_t>(c.in_dim(l) * c.out_dim(l)) ||
        b.data.size() != static_cast<size_t>(c.out_dim(l))) {
      return InvalidArgument("{}: layer {} does not have the shape [{}, {}]", model.path, l,
                             c.out_dim(l), c.in_dim(l));
    }
  }
  if (options.threads < 1) return InvalidArgument("threads must be at least 1");
  try {
    omp_set_num_threads(options.threads);
    return std::unique_ptr<Engine>(std::make_unique<CpuEngine>(model, options));
  } catch (const dnnl::error& e) {
    return Internal("{}: oneDNN cannot run this model: {}", model.path, e.what());
  }
}

}  // namespace hpcml::inference
