#include "onnx_graph.hpp"

#include <onnx/checker.h>

#include <exception>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"

namespace hpcml::inference {
namespace {

std::string SanitizeName(const std::string& feature) {
  std::string s;
  for (char ch : feature) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_';
    s += ok ? ch : '_';
  }
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s.insert(s.begin(), '_');
  return s;
}

}  // namespace

std::vector<OnnxInput> EncodedInputs(const trainer::InputEncoding& enc,
                                     std::set<std::string> taken) {
  std::vector<OnnxInput> out;
  OnnxInput numbers{"numbers", {}, false};
  for (const trainer::ColumnEncoding& c : enc.columns)
    if (!c.category()) numbers.features.push_back(c.name);
  if (!numbers.features.empty()) out.push_back(numbers);
  for (const trainer::ColumnEncoding& c : enc.columns) {
    if (!c.category()) continue;
    const std::string base = SanitizeName(c.name);
    std::string name = base;
    for (int k = 2; taken.count(name) != 0; ++k) name = base + "_" + std::to_string(k);
    taken.insert(name);
    out.push_back({name, {c.name}, true});
  }
  return out;
}

onnx::ModelProto NewOnnxModel(const std::string& doc, bool ml) {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.set_producer_name("hpcml");
  m.set_producer_version(std::string(Version()));
  m.set_model_version(1);
  m.set_doc_string(doc);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  if (ml) {
    onnx::OperatorSetIdProto* mlset = m.add_opset_import();
    mlset->set_domain(kOnnxMlDomain);
    mlset->set_version(kOnnxMlOpset);
  }
  return m;
}

void AddMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* e = m.add_metadata_props();
  e->set_key(key);
  e->set_value(value);
}

void AddInputsMetadata(onnx::ModelProto& m, const std::vector<OnnxInput>& inputs) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const OnnxInput& i : inputs)
    list.push_back(
        {{"name", i.name}, {"type", i.text ? "string" : "float"}, {"features", i.features}});
  AddMetadata(m, "hpcml.inputs", JsonText(list));
}

Status CheckAndWrite(const onnx::ModelProto& m, const std::string& path,
                     const std::string& context) {
  try {  // the checker throws; nothing else of ONNX's that is called could
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    return Internal("{}: the exported graph fails onnx::checker: {}", context, e.what());
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return Internal("{}: protobuf serialisation failed", context);
  Status st = WriteFileAtomic(path, bytes);
  if (!st.ok()) return std::move(st).WithContext(context).At();
  return Status::Ok();
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

namespace {
onnx::AttributeProto* NewAttr(onnx::NodeProto* n, const std::string& name,
                              onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
}  // namespace

void SetIntAttr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  NewAttr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void SetStringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  NewAttr(n, name, onnx::AttributeProto::STRING)->set_s(v);
}
void SetStringsAttr(onnx::NodeProto* n, const std::string& name,
                    const std::vector<std::string>& v) {
  onnx::AttributeProto* a = NewAttr(n, name, onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}
void SetIntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
  onnx::AttributeProto* a = NewAttr(n, name, onnx::AttributeProto::INTS);
  for (std::int64_t x : v) a->add_ints(x);
}
void SetFloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  NewAttr(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
void SetFloatsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  onnx::AttributeProto* a = NewAttr(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

void SetMatrixType(onnx::ValueInfoProto* v, const std::string& name, std::int64_t cols,
                   onnx::TensorProto::DataType type) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(cols);
}

}  // namespace hpcml::inference
