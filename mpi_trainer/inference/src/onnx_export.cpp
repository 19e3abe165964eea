#include "onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "onnx_graph.hpp"

namespace hpcml::inference {
namespace {

using trainer::Activation;
using trainer::FullTensor;
using trainer::LossKind;
using trainer::ModelFile;

// sqrt(2 / pi) and the cubic coefficient of the tanh GELU, as the CPU backend
// has them (mpi_trainer/trainer/src/cpu_backend.cpp).
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

Result<const FullTensor*> FindTensor(const ModelFile& model, const std::string& name,
                                     std::vector<std::int64_t> shape) {
  for (const FullTensor& t : model.tensors) {
    if (t.name != name) continue;
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    if (t.shape != shape || static_cast<std::int64_t>(t.data.size()) != count)
      return InvalidArgument("tensor {}: shape or size does not match the model's dims", name);
    return &t;
  }
  return InvalidArgument("tensor {} is missing", name);
}

const trainer::InputEncoding* EncodingOf(const ModelFile& m) {
  return m.lineage && m.lineage->input.encoding ? &*m.lineage->input.encoding : nullptr;
}

// Mean and scale per raw input column (every feature; an encoded model's
// number features only, in order): the lineage's where a column was
// standardised, identity elsewhere. Empty when no column was.
struct Standardization {
  std::vector<double> mean, scale;
};

Result<Standardization> ReadStandardization(const ModelFile& model) {
  Standardization s;
  if (!model.lineage || !model.lineage->input.any_standardized()) return s;
  const trainer::InputSchema& in = model.lineage->input;
  const trainer::InputEncoding* enc = EncodingOf(model);
  const auto n = enc ? enc->columns.size() : static_cast<size_t>(model.config.input_dim);
  if (in.standardized.size() != n || in.mean.size() != n || in.scale.size() != n)
    return InvalidArgument("lineage input: standardized, mean and scale need {} entries each", n);
  for (size_t j = 0; j < n; ++j) {
    if (enc && enc->columns[j].category()) {
      if (in.standardized[j]) {
        return InvalidArgument("lineage input: category feature \"{}\" has a standardisation",
                               enc->columns[j].name);
      }
      continue;
    }
    s.mean.push_back(0.0);
    s.scale.push_back(1.0);
    if (!in.standardized[j]) continue;
    if (!std::isfinite(in.mean[j]) || !std::isfinite(in.scale[j]) || in.scale[j] == 0.0)
      return InvalidArgument("lineage input: column {} has mean {} and scale {}", j, in.mean[j],
                             in.scale[j]);
    s.mean.back() = in.mean[j];
    s.scale.back() = in.scale[j];
  }
  return s;
}

// 0.5 x (1 + tanh(c (x + a x^3))): opset 17 has no GELU, and opset 20's
// would not be loadable by ONNX 1.12's checker. x^3 as x*x*x, not Pow, as
// the CPU backend computes it. Returns the output's name.
std::string AddGelu(onnx::GraphProto& g, const std::string& x, const std::string& p) {
  AddNode(g, "Mul", {x, x}, p + "x2");
  AddNode(g, "Mul", {p + "x2", x}, p + "x3");
  AddNode(g, "Mul", {p + "x3", "gelu_a"}, p + "ax3");
  AddNode(g, "Add", {x, p + "ax3"}, p + "inner");
  AddNode(g, "Mul", {p + "inner", "gelu_c"}, p + "scaled");
  AddNode(g, "Tanh", {p + "scaled"}, p + "tanh");
  AddNode(g, "Add", {p + "tanh", "one"}, p + "onept");
  AddNode(g, "Mul", {x, "half"}, p + "halfx");
  AddNode(g, "Mul", {p + "halfx", p + "onept"}, p + "gelu");
  return p + "gelu";
}

std::string AddActivation(onnx::GraphProto& g, Activation act, const std::string& x,
                          const std::string& prefix) {
  switch (act) {
    case Activation::kRelu:
      return AddNode(g, "Relu", {x}, prefix + "relu")->output(0);
    case Activation::kTanh:
      return AddNode(g, "Tanh", {x}, prefix + "tanh")->output(0);
    case Activation::kGelu:
      return AddGelu(g, x, prefix + "gelu_");
  }
  return x;
}

// (x - mean) / scale in double, rounded to float, as the training derive
// standardised: in float32 the error would grow with mean / scale (2^-24 of
// it). Returns the output's name.
std::string AddStandardization(onnx::GraphProto& g, const std::string& x,
                               const Standardization& s) {
  const auto n = static_cast<std::int64_t>(s.mean.size());
  AddInitializer(g, "input_mean", {n}, s.mean);
  AddInitializer(g, "input_scale", {n}, s.scale);
  SetIntAttr(AddNode(g, "Cast", {x}, "features_f64"), "to", onnx::TensorProto::DOUBLE);
  AddNode(g, "Sub", {"features_f64", "input_mean"}, "centered");
  AddNode(g, "Div", {"centered", "input_scale"}, "standardized_f64");
  SetIntAttr(AddNode(g, "Cast", {"standardized_f64"}, "standardized"), "to",
             onnx::TensorProto::FLOAT);
  return "standardized";
}

// The names this file gives values without a '.' in them: a category
// input's name (which never has one) must differ from each.
const std::set<std::string>& OwnNames() {
  static const std::set<std::string> names = {
      "features",     "numbers",    "features_f64",  "centered",   "standardized_f64",
      "standardized", "input_mean", "input_scale",   "gelu_a",     "gelu_c",
      "half",         "one",        "probabilities", "predictions"};
  return names;
}

// An encoded model's inputs and its first layer's input: numbers
// (standardised as the derive did, then as the encoding does, 0 where NaN),
// missing indicators, each category's embedding row (LabelEncoder to its
// code, Gather from its table), concatenated in the encoded row's order
// (encoding.hpp). Returns the encoded row's name.
Result<std::string> BuildEncoding(const ModelFile& model, const trainer::InputEncoding& enc,
                                  onnx::GraphProto& g) {
  HPCML_RETURN_IF_ERROR(enc.Validate("the input encoding"));
  if (enc.width() != model.config.input_dim) {
    return InvalidArgument("the input encoding is {} wide, the first layer takes {}", enc.width(),
                           model.config.input_dim);
  }
  std::vector<std::string> parts;
  const std::int64_t n = enc.numbers();
  if (n > 0) {
    SetMatrixType(g.add_input(), "numbers", n);
    std::string x = "numbers";
    HPCML_ASSIGN_OR_RETURN(Standardization s, ReadStandardization(model));
    if (!s.mean.empty()) x = AddStandardization(g, x, s);
    std::vector<double> center, scale;
    std::vector<std::int64_t> indicator_columns;
    for (const trainer::ColumnEncoding& c : enc.columns) {
      if (c.category()) continue;
      if (c.indicator) indicator_columns.push_back(static_cast<std::int64_t>(center.size()));
      center.push_back(c.center);
      scale.push_back(c.scale);
    }
    // float((x - center) / scale) in double, as Encode computes it; then 0
    // (the mean) where x is missing.
    AddInitializer(g, "encode.center", {n}, center);
    AddInitializer(g, "encode.scale", {n}, scale);
    AddScalar(g, "encode.zero", 0.0f);
    AddNode(g, "IsNaN", {x}, "encode.missing");
    SetIntAttr(AddNode(g, "Cast", {x}, "encode.f64"), "to", onnx::TensorProto::DOUBLE);
    AddNode(g, "Sub", {"encode.f64", "encode.center"}, "encode.centered");
    AddNode(g, "Div", {"encode.centered", "encode.scale"}, "encode.scaled_f64");
    SetIntAttr(AddNode(g, "Cast", {"encode.scaled_f64"}, "encode.scaled"), "to",
               onnx::TensorProto::FLOAT);
    AddNode(g, "Where", {"encode.missing", "encode.zero", "encode.scaled"}, "encode.numbers");
    parts.push_back("encode.numbers");
    if (!indicator_columns.empty()) {
      const auto k = static_cast<std::int64_t>(indicator_columns.size());
      AddInitializer(g, "encode.indicator_columns", {k}, indicator_columns);
      SetIntAttr(AddNode(g, "Cast", {"encode.missing"}, "encode.missing_f32"), "to",
                 onnx::TensorProto::FLOAT);
      SetIntAttr(AddNode(g, "Gather", {"encode.missing_f32", "encode.indicator_columns"},
                         "encode.indicators"),
                 "axis", 1);
      parts.push_back("encode.indicators");
    }
  }
  const std::vector<OnnxInput> inputs = OnnxInputs(model);
  const auto first_table = static_cast<size_t>(2 * model.config.num_layers());
  size_t j = 0;  // category features so far
  for (const trainer::ColumnEncoding& c : enc.columns) {
    if (!c.category()) continue;
    const std::string name = "embed" + std::to_string(j);
    const auto input = std::find_if(inputs.begin(), inputs.end(), [&](const OnnxInput& i) {
      return i.text && i.features.front() == c.name;
    });
    SetMatrixType(g.add_input(), input->name, 1, onnx::TensorProto::STRING);
    HPCML_ASSIGN_OR_RETURN(const FullTensor* table,
                           FindTensor(model, name + ".weight", {c.unknown() + 1, c.embed_dim}));
    if (table != &model.tensors[first_table + j]) {
      return InvalidArgument("tensor {} is not the model's table {}", table->name, j);
    }
    AddInitializer(g, table->name, table->shape, table->data);
    // Kept values to their codes, anything else (unseen, rare, missing)
    // to the unknown code. LabelEncoder needs a key: an empty vocabulary
    // maps "" to the unknown code too.
    std::vector<std::string> keys = c.vocabulary;
    std::vector<std::int64_t> codes;
    for (size_t i = 0; i < keys.size(); ++i) codes.push_back(static_cast<std::int64_t>(i));
    if (keys.empty()) {
      keys.push_back("");
      codes.push_back(c.unknown());
    }
    onnx::NodeProto* lookup = AddNode(g, "LabelEncoder", {input->name}, name + ".code");
    lookup->set_domain(kOnnxMlDomain);
    SetStringsAttr(lookup, "keys_strings", keys);
    SetIntsAttr(lookup, "values_int64s", codes);
    SetIntAttr(lookup, "default_int64", c.unknown());
    SetIntAttr(AddNode(g, "Gather", {table->name, name + ".code"}, name + ".rows"), "axis", 0);
    if (j == 0) AddInitializer(g, "encode.axis1", {1}, std::vector<std::int64_t>{1});
    AddNode(g, "Squeeze", {name + ".rows", "encode.axis1"}, name + ".vector");
    parts.push_back(name + ".vector");
    ++j;
  }
  if (parts.size() == 1) return parts.front();
  onnx::NodeProto* concat = g.add_node();
  concat->set_op_type("Concat");
  concat->set_name("encode.row");
  for (const std::string& p : parts) concat->add_input(p);
  concat->add_output("encode.row");
  SetIntAttr(concat, "axis", 1);
  return std::string("encode.row");
}

// Input, standardisation (and an encoded model's encoding), layers, output
// head. Returns the graph's last value.
Result<std::string> BuildGraph(const ModelFile& model, onnx::GraphProto& g) {
  const trainer::ModelConfig& c = model.config;
  std::string cur = "features";
  if (const trainer::InputEncoding* enc = EncodingOf(model)) {
    HPCML_ASSIGN_OR_RETURN(cur, BuildEncoding(model, *enc, g));
  } else {
    SetMatrixType(g.add_input(), "features", c.input_dim);
    HPCML_ASSIGN_OR_RETURN(Standardization s, ReadStandardization(model));
    if (!s.mean.empty()) cur = AddStandardization(g, cur, s);
  }
  if (c.activation == Activation::kGelu && c.num_layers() > 1) {
    AddScalar(g, "gelu_a", kGeluA);
    AddScalar(g, "gelu_c", kGeluC);
    AddScalar(g, "half", 0.5f);
    AddScalar(g, "one", 1.0f);
  }
  for (int i = 0; i < c.num_layers(); ++i) {
    const std::string p = "layer" + std::to_string(i);
    const std::int64_t in = c.in_dim(i), out = c.out_dim(i);
    HPCML_ASSIGN_OR_RETURN(const FullTensor* w, FindTensor(model, p + ".weight", {out, in}));
    HPCML_ASSIGN_OR_RETURN(const FullTensor* b, FindTensor(model, p + ".bias", {out}));
    AddInitializer(g, w->name, w->shape, w->data);
    AddInitializer(g, b->name, b->shape, b->data);
    // An MSE model's last layer is its output.
    const bool last = i + 1 == c.num_layers();
    const std::string z = last && c.loss == LossKind::kMse ? "predictions" : p + ".z";
    onnx::NodeProto* gemm = AddNode(g, "Gemm", {cur, w->name, b->name}, z);
    SetIntAttr(gemm, "transB", 1);
    cur = gemm->output(0);
    if (!last) cur = AddActivation(g, c.activation, cur, p + ".");
  }
  if (c.loss == LossKind::kCrossEntropy) {
    SetIntAttr(AddNode(g, "Softmax", {cur}, "probabilities"), "axis", -1);
    cur = "probabilities";
  }
  SetMatrixType(g.add_output(), cur, c.output_dim);
  return cur;
}

Result<onnx::ModelProto> BuildModel(const ModelFile& model) {
  HPCML_RETURN_IF_ERROR(model.config.Validate());
  const trainer::InputEncoding* enc = EncodingOf(model);
  onnx::ModelProto m =
      NewOnnxModel("hpcml MLP exported from " + model.path + " (sha256 " + model.sha256 + ")",
                   enc && !enc->embeddings().empty());  // LabelEncoder
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("hpcml_mlp");
  HPCML_RETURN_IF_ERROR(BuildGraph(model, *g).status());
  AddMetadata(m, "hpcml.source_model", model.path);
  AddMetadata(m, "hpcml.model_sha256", model.sha256);
  AddMetadata(m, "hpcml.format", model.format);
  AddMetadata(m, "hpcml.activation", std::string(Name(model.config.activation)));
  AddMetadata(m, "hpcml.loss", std::string(Name(model.config.loss)));
  if (model.lineage) AddMetadata(m, "hpcml.lineage", trainer::LineageJson(*model.lineage));
  AddInputsMetadata(m, OnnxInputs(model));
  return m;
}

}  // namespace

std::vector<OnnxInput> OnnxInputs(const ModelFile& model) {
  const trainer::InputEncoding* enc = EncodingOf(model);
  if (enc == nullptr) {
    OnnxInput all{"features", {}, false};
    if (model.lineage) all.features = model.lineage->input.feature_names;
    return {all};
  }
  return EncodedInputs(*enc, OwnNames());
}

Status ExportOnnx(const ModelFile& model, const std::string& path) {
  const std::string context = "ONNX export of " + model.path + " to " + path;
  auto built = BuildModel(model);
  if (!built.ok()) return std::move(built).status().WithContext(context).At();
  return CheckAndWrite(*built, path, context);
}

}  // namespace hpcml::inference
