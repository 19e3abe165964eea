// The exported graph read back with ONNX's protobuf messages: inputs,
// outputs, nodes in order, initialisers equal to the model's tensors,
// metadata; and the export's errors. The numbers the graph computes are
// checked in ONNX Runtime by onnx_ort_check.py.
#include "onnx_export.hpp"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

using testing::Cases;
using testing::MakeModel;
using testing::TestCase;
using trainer::Activation;
using trainer::LossKind;

class OnnxExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpcml_onnx_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Exports `model` and parses the file back.
  onnx::ModelProto ExportAndRead(const trainer::ModelFile& model) {
    const std::string path = dir_ + "/model.onnx";
    Status st = ExportOnnx(model, path);
    EXPECT_TRUE(st.ok()) << st.Debug();
    Result<std::string> bytes = ReadFile(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status().Debug();
    onnx::ModelProto m;
    EXPECT_TRUE(bytes.ok() && m.ParseFromString(*bytes)) << path << " does not parse";
    return m;
  }

  std::string dir_;
};

std::vector<std::string> OpTypes(const onnx::GraphProto& g) {
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : g.node()) ops.push_back(n.op_type());
  return ops;
}

const onnx::TensorProto* Initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const onnx::TensorProto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

template <typename T = float>
std::vector<T> Values(const onnx::TensorProto& t) {
  std::vector<T> v(t.raw_data().size() / sizeof(T));
  std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(T));
  return v;
}

std::optional<std::string> Metadata(const onnx::ModelProto& m, const std::string& key) {
  for (const auto& e : m.metadata_props())
    if (e.key() == key) return e.value();
  return std::nullopt;
}

// "batch" x cols, float.
void ExpectMatrixType(const onnx::ValueInfoProto& v, const std::string& name, std::int64_t cols) {
  EXPECT_EQ(v.name(), name);
  const auto& t = v.type().tensor_type();
  EXPECT_EQ(t.elem_type(), onnx::TensorProto::FLOAT);
  ASSERT_EQ(t.shape().dim_size(), 2);
  EXPECT_EQ(t.shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(t.shape().dim(1).dim_value(), cols);
}

// The op types the model's graph must have, in order.
std::vector<std::string> ExpectedOps(const TestCase& tc) {
  std::vector<std::string> ops;
  if (!tc.standardized.empty()) ops = {"Cast", "Sub", "Div", "Cast"};
  const std::vector<std::string> gelu = {"Mul",  "Mul", "Mul", "Add", "Mul",
                                         "Tanh", "Add", "Mul", "Mul"};
  for (int i = 0; i < tc.config.num_layers(); ++i) {
    ops.push_back("Gemm");
    if (i + 1 == tc.config.num_layers()) break;
    switch (tc.config.activation) {
      case Activation::kRelu:
        ops.push_back("Relu");
        break;
      case Activation::kTanh:
        ops.push_back("Tanh");
        break;
      case Activation::kGelu:
        ops.insert(ops.end(), gelu.begin(), gelu.end());
        break;
    }
  }
  if (tc.config.loss == LossKind::kCrossEntropy) ops.push_back("Softmax");
  return ops;
}

TEST_F(OnnxExportTest, GraphOfEveryCase) {
  for (const TestCase& tc : Cases()) {
    SCOPED_TRACE(tc.name);
    const trainer::ModelFile model = MakeModel(tc);
    const onnx::ModelProto m = ExportAndRead(model);
    EXPECT_EQ(m.ir_version(), 8);
    ASSERT_EQ(m.opset_import_size(), 1);
    EXPECT_EQ(m.opset_import(0).domain(), "");
    EXPECT_EQ(m.opset_import(0).version(), 17);
    const onnx::GraphProto& g = m.graph();
    ASSERT_EQ(g.input_size(), 1);
    ASSERT_EQ(g.output_size(), 1);
    ExpectMatrixType(g.input(0), "features", tc.config.input_dim);
    const bool ce = tc.config.loss == LossKind::kCrossEntropy;
    ExpectMatrixType(g.output(0), ce ? "probabilities" : "predictions", tc.config.output_dim);
    EXPECT_EQ(OpTypes(g), ExpectedOps(tc));
    EXPECT_EQ(g.node(g.node_size() - 1).output(0), g.output(0).name());
  }
}

TEST_F(OnnxExportTest, GemmsHoldTheModelsTensors) {
  const TestCase tc = Cases()[0];
  const trainer::ModelFile model = MakeModel(tc);
  const onnx::ModelProto m = ExportAndRead(model);
  for (const trainer::FullTensor& t : model.tensors) {
    SCOPED_TRACE(t.name);
    const onnx::TensorProto* init = Initializer(m.graph(), t.name);
    ASSERT_NE(init, nullptr);
    EXPECT_EQ(init->data_type(), onnx::TensorProto::FLOAT);
    EXPECT_EQ(std::vector<std::int64_t>(init->dims().begin(), init->dims().end()), t.shape);
    EXPECT_EQ(Values(*init), t.data);
  }
  int gemms = 0;
  for (const onnx::NodeProto& n : m.graph().node()) {
    if (n.op_type() != "Gemm") continue;
    const std::string p = "layer" + std::to_string(gemms++);
    ASSERT_EQ(n.input_size(), 3);
    EXPECT_EQ(n.input(1), p + ".weight");
    EXPECT_EQ(n.input(2), p + ".bias");
    ASSERT_EQ(n.attribute_size(), 1);
    EXPECT_EQ(n.attribute(0).name(), "transB");
    EXPECT_EQ(n.attribute(0).i(), 1);
  }
  EXPECT_EQ(gemms, tc.config.num_layers());
}

TEST_F(OnnxExportTest, StandardisationIsIdentityOnPlainColumns) {
  const TestCase tc = Cases()[0];  // columns 0, 2, 3, 6 of 7 standardised
  const trainer::ModelFile model = MakeModel(tc);
  const onnx::ModelProto m = ExportAndRead(model);
  const onnx::GraphProto& g = m.graph();
  // In double, rounded to float: the derive's arithmetic.
  EXPECT_EQ(g.node(0).input(0), "features");
  EXPECT_EQ(g.node(0).attribute(0).i(), onnx::TensorProto::DOUBLE);
  EXPECT_EQ(g.node(1).input(1), "input_mean");
  EXPECT_EQ(g.node(2).input(1), "input_scale");
  EXPECT_EQ(g.node(3).attribute(0).i(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(g.node(4).input(0), g.node(3).output(0));
  const onnx::TensorProto* mean = Initializer(g, "input_mean");
  const onnx::TensorProto* scale = Initializer(g, "input_scale");
  ASSERT_NE(mean, nullptr);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(mean->data_type(), onnx::TensorProto::DOUBLE);
  const trainer::InputSchema& in = model.lineage->input;
  const std::vector<double> mv = Values<double>(*mean), sv = Values<double>(*scale);
  ASSERT_EQ(mv.size(), 7u);
  ASSERT_EQ(sv.size(), 7u);
  for (size_t j = 0; j < 7; ++j) {
    SCOPED_TRACE(j);
    EXPECT_EQ(mv[j], in.standardized[j] ? in.mean[j] : 0.0);
    EXPECT_EQ(sv[j], in.standardized[j] ? in.scale[j] : 1.0);
    if (in.standardized[j]) {
      EXPECT_NE(mv[j], 0.0);
    }
  }
}

TEST_F(OnnxExportTest, SoftmaxOverTheLastAxis) {
  const onnx::ModelProto m = ExportAndRead(MakeModel(Cases()[0]));
  const onnx::NodeProto& last = m.graph().node(m.graph().node_size() - 1);
  ASSERT_EQ(last.op_type(), "Softmax");
  ASSERT_EQ(last.attribute_size(), 1);
  EXPECT_EQ(last.attribute(0).name(), "axis");
  EXPECT_EQ(last.attribute(0).i(), -1);
}

TEST_F(OnnxExportTest, MetadataNamesTheSourceModel) {
  const trainer::ModelFile model = MakeModel(Cases()[0]);
  const onnx::ModelProto m = ExportAndRead(model);
  EXPECT_EQ(Metadata(m, "hpcml.model_sha256"), model.sha256);
  EXPECT_EQ(Metadata(m, "hpcml.source_model"), model.path);
  EXPECT_EQ(Metadata(m, "hpcml.lineage"), trainer::LineageJson(*model.lineage));
  EXPECT_EQ(Metadata(m, "hpcml.activation"), "relu");
  EXPECT_EQ(Metadata(m, "hpcml.loss"), "ce");
  EXPECT_NE(m.doc_string().find(model.path), std::string::npos) << m.doc_string();
  EXPECT_NE(m.doc_string().find(model.sha256), std::string::npos) << m.doc_string();
}

TEST_F(OnnxExportTest, Format1ModelHasNoLineageNorStandardisation) {
  TestCase tc = Cases()[4];
  ASSERT_FALSE(tc.lineage);
  const onnx::ModelProto m = ExportAndRead(MakeModel(tc));
  EXPECT_EQ(Metadata(m, "hpcml.lineage"), std::nullopt);
  EXPECT_EQ(Metadata(m, "hpcml.format"), "hpcml-mlp-1");
  EXPECT_EQ(Initializer(m.graph(), "input_mean"), nullptr);
  EXPECT_EQ(m.graph().node(0).op_type(), "Gemm");
}

TEST_F(OnnxExportTest, OverwritesAnExistingFile) {
  const std::string path = dir_ + "/model.onnx";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  ASSERT_TRUE(ExportOnnx(MakeModel(Cases()[1]), path).ok());
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(*ReadFile(path)));
  const std::filesystem::directory_iterator files(dir_);
  EXPECT_EQ(std::distance(begin(files), end(files)), 1) << "a temporary file was left";
}

TEST_F(OnnxExportTest, UnwritablePathIsNamed) {
  const trainer::ModelFile model = MakeModel(Cases()[1]);
  const std::string missing_dir = dir_ + "/no/such/dir/model.onnx";
  Status st = ExportOnnx(model, missing_dir);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(missing_dir), std::string::npos) << st.message();
  // A regular file as the parent directory: refused even for root.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/file", "x").ok());
  st = ExportOnnx(model, dir_ + "/file/model.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir_ + "/file/model.onnx"), std::string::npos) << st.message();
  // A directory where the file should go.
  st = ExportOnnx(model, dir_);
  EXPECT_FALSE(st.ok());
}

TEST_F(OnnxExportTest, TensorsNotMatchingTheConfigAreRefused) {
  trainer::ModelFile model = MakeModel(Cases()[0]);
  model.tensors[2].shape = {8, 15};  // layer1.weight should be [8, 16]
  Status st = ExportOnnx(model, dir_ + "/a.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("layer1.weight"), std::string::npos) << st.message();

  model = MakeModel(Cases()[0]);
  model.tensors.pop_back();
  st = ExportOnnx(model, dir_ + "/a.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer2.bias is missing"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/a.onnx"));
}

TEST_F(OnnxExportTest, BadStandardisationIsRefused) {
  trainer::ModelFile model = MakeModel(Cases()[0]);
  model.lineage->input.scale[0] = 0.0;
  Status st = ExportOnnx(model, dir_ + "/a.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("column 0"), std::string::npos) << st.message();

  model = MakeModel(Cases()[0]);
  model.lineage->input.mean.pop_back();
  st = ExportOnnx(model, dir_ + "/a.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hpcml::inference
