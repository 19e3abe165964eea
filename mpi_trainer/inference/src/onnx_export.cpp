#include "onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"

namespace hpcml::inference {
namespace {

using trainer::Activation;
using trainer::FullTensor;
using trainer::LossKind;
using trainer::ModelFile;

// The ONNX release the graph is checked against (Debian's libonnx 1.12).
constexpr std::int64_t kIrVersion = onnx::IR_VERSION;
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

// Mean and scale per input column: the lineage's where a column was
// standardised, identity elsewhere. Empty when no column was.
struct Standardization {
  std::vector<double> mean, scale;
};

Result<Standardization> ReadStandardization(const ModelFile& model) {
  Standardization s;
  if (!model.lineage || !model.lineage->input.any_standardized()) return s;
  const trainer::InputSchema& in = model.lineage->input;
  const auto n = static_cast<size_t>(model.config.input_dim);
  if (in.standardized.size() != n || in.mean.size() != n || in.scale.size() != n)
    return InvalidArgument("lineage input: standardized, mean and scale need {} entries each", n);
  s.mean.assign(n, 0.0);
  s.scale.assign(n, 1.0);
  for (size_t j = 0; j < n; ++j) {
    if (!in.standardized[j]) continue;
    if (!std::isfinite(in.mean[j]) || !std::isfinite(in.scale[j]) || in.scale[j] == 0.0)
      return InvalidArgument("lineage input: column {} has mean {} and scale {}", j, in.mean[j],
                             in.scale[j]);
    s.mean[j] = in.mean[j];
    s.scale[j] = in.scale[j];
  }
  return s;
}

// raw_data is little-endian by the ONNX spec; so is every host hpcml builds
// for (x86-64).
template <typename T>
void AddInitializer(onnx::GraphProto& g, const std::string& name,
                    const std::vector<std::int64_t>& dims, const std::vector<T>& data) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(std::is_same_v<T, float> ? onnx::TensorProto::FLOAT : onnx::TensorProto::DOUBLE);
  for (std::int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data.data(), data.size() * sizeof(T));
}

void AddScalar(onnx::GraphProto& g, const std::string& name, float value) {
  AddInitializer(g, name, {}, std::vector<float>{value});
}

onnx::NodeProto* AddNode(onnx::GraphProto& g, const std::string& op,
                         std::initializer_list<std::string> inputs, const std::string& output) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(output);
  for (const std::string& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

void SetIntAttr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
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

void SetFloatMatrixType(onnx::ValueInfoProto* v, const std::string& name, std::int64_t cols) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(cols);
}

// Input, standardisation, layers, output head. Returns the graph's last value.
Result<std::string> BuildGraph(const ModelFile& model, onnx::GraphProto& g) {
  const trainer::ModelConfig& c = model.config;
  SetFloatMatrixType(g.add_input(), "features", c.input_dim);
  std::string cur = "features";
  HPCML_ASSIGN_OR_RETURN(Standardization s, ReadStandardization(model));
  if (!s.mean.empty()) {
    // In double, rounded to float, as the training derive standardised: in
    // float32 the error would grow with mean / scale (2^-24 of it).
    AddInitializer(g, "input_mean", {c.input_dim}, s.mean);
    AddInitializer(g, "input_scale", {c.input_dim}, s.scale);
    SetIntAttr(AddNode(g, "Cast", {cur}, "features_f64"), "to", onnx::TensorProto::DOUBLE);
    AddNode(g, "Sub", {"features_f64", "input_mean"}, "centered");
    AddNode(g, "Div", {"centered", "input_scale"}, "standardized_f64");
    SetIntAttr(AddNode(g, "Cast", {"standardized_f64"}, "standardized"), "to",
               onnx::TensorProto::FLOAT);
    cur = "standardized";
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
  SetFloatMatrixType(g.add_output(), cur, c.output_dim);
  return cur;
}

void AddMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* e = m.add_metadata_props();
  e->set_key(key);
  e->set_value(value);
}

Result<onnx::ModelProto> BuildModel(const ModelFile& model) {
  HPCML_RETURN_IF_ERROR(model.config.Validate());
  onnx::ModelProto m;
  m.set_ir_version(kIrVersion);
  m.set_producer_name("hpcml");
  m.set_producer_version(std::string(Version()));
  m.set_model_version(1);
  m.set_doc_string("hpcml MLP exported from " + model.path + " (sha256 " + model.sha256 + ")");
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("hpcml_mlp");
  HPCML_RETURN_IF_ERROR(BuildGraph(model, *g).status());
  AddMetadata(m, "hpcml.source_model", model.path);
  AddMetadata(m, "hpcml.model_sha256", model.sha256);
  AddMetadata(m, "hpcml.format", model.format);
  AddMetadata(m, "hpcml.activation", std::string(Name(model.config.activation)));
  AddMetadata(m, "hpcml.loss", std::string(Name(model.config.loss)));
  if (model.lineage) AddMetadata(m, "hpcml.lineage", trainer::LineageJson(*model.lineage));
  return m;
}

// The checker throws; nothing else of ONNX's is called that could.
Status CheckModel(const onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    return Internal("the exported graph fails onnx::checker: {}", e.what());
  }
  return Status::Ok();
}

}  // namespace

Status ExportOnnx(const ModelFile& model, const std::string& path) {
  const std::string context = "ONNX export of " + model.path + " to " + path;
  auto built = BuildModel(model);
  if (!built.ok()) return std::move(built).status().WithContext(context).At();
  Status st = CheckModel(*built);
  if (!st.ok()) return std::move(st).WithContext(context).At();
  std::string bytes;
  if (!built->SerializeToString(&bytes))
    return Internal("{}: protobuf serialisation failed", context);
  st = WriteFileAtomic(path, bytes);
  if (!st.ok()) return std::move(st).WithContext(context).At();
  return Status::Ok();
}

}  // namespace hpcml::inference
