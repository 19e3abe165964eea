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
#include <nlohmann/json.hpp>
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

const onnx::NodeProto* Node(const onnx::GraphProto& g, const std::string& output) {
  for (const onnx::NodeProto& n : g.node())
    if (n.output(0) == output) return &n;
  return nullptr;
}

const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// An encoded model's nodes before its first Gemm.
std::vector<std::string> EncodingOps(const TestCase& tc) {
  const trainer::InputEncoding& enc = *tc.encoding;
  std::vector<std::string> ops;
  if (enc.numbers() > 0) {
    if (!tc.standardized.empty()) ops = {"Cast", "Sub", "Div", "Cast"};
    for (const char* op : {"IsNaN", "Cast", "Sub", "Div", "Cast", "Where"}) ops.push_back(op);
    if (enc.indicators() > 0) ops.insert(ops.end(), {"Cast", "Gather"});
  }
  for (size_t j = 0; j < enc.embeddings().size(); ++j)
    ops.insert(ops.end(), {"LabelEncoder", "Gather", "Squeeze"});
  const size_t parts = (enc.numbers() > 0) + (enc.indicators() > 0) + enc.embeddings().size();
  if (parts > 1) ops.push_back("Concat");
  return ops;
}

// The op types the model's graph must have, in order.
std::vector<std::string> ExpectedOps(const TestCase& tc) {
  std::vector<std::string> ops;
  if (tc.encoding) {
    ops = EncodingOps(tc);
  } else if (!tc.standardized.empty()) {
    ops = {"Cast", "Sub", "Div", "Cast"};
  }
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
    const bool ml = tc.encoding && !tc.encoding->embeddings().empty();
    ASSERT_EQ(m.opset_import_size(), ml ? 2 : 1);
    EXPECT_EQ(m.opset_import(0).domain(), "");
    EXPECT_EQ(m.opset_import(0).version(), 17);
    if (ml) {
      EXPECT_EQ(m.opset_import(1).domain(), "ai.onnx.ml");
      EXPECT_EQ(m.opset_import(1).version(), 3);
    }
    const onnx::GraphProto& g = m.graph();
    const std::vector<OnnxInput> inputs = OnnxInputs(model);
    ASSERT_EQ(g.input_size(), static_cast<int>(inputs.size()));
    ASSERT_EQ(g.output_size(), 1);
    if (!tc.encoding) ExpectMatrixType(g.input(0), "features", tc.config.input_dim);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& t = g.input(static_cast<int>(i)).type().tensor_type();
      EXPECT_EQ(g.input(static_cast<int>(i)).name(), inputs[i].name);
      EXPECT_EQ(t.elem_type(),
                inputs[i].text ? onnx::TensorProto::STRING : onnx::TensorProto::FLOAT);
      ASSERT_EQ(t.shape().dim_size(), 2);
      EXPECT_EQ(t.shape().dim(1).dim_value(),
                inputs[i].text ? 1
                               : static_cast<std::int64_t>(tc.encoding ? tc.encoding->numbers()
                                                                       : tc.config.input_dim));
    }
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

// The encoded model's raw inputs: its numbers, then one string input per
// category feature, named after it (metadata lists them).
TEST_F(OnnxExportTest, EncodedInputsAreNamedAfterTheFeatures) {
  const trainer::ModelFile model = MakeModel(testing::EncodedCase());
  const onnx::ModelProto m = ExportAndRead(model);
  std::vector<std::string> names;
  for (const auto& i : m.graph().input()) names.push_back(i.name());
  EXPECT_EQ(names, (std::vector<std::string>{"numbers", "colour", "plan_name"}));
  const std::vector<OnnxInput> inputs = OnnxInputs(model);
  EXPECT_EQ(inputs[0].features, (std::vector<std::string>{"age", "spend", "calls", "active"}));
  EXPECT_EQ(inputs[2].features, (std::vector<std::string>{"plan name"}));
  const auto meta = nlohmann::json::parse(Metadata(m, "hpcml.inputs").value_or("null"));
  ASSERT_TRUE(meta.is_array());
  ASSERT_EQ(meta.size(), 3u);
  EXPECT_EQ(meta[2]["name"], "plan_name");
  EXPECT_EQ(meta[2]["type"], "string");
  EXPECT_EQ(meta[2]["features"], nlohmann::json::array({"plan name"}));
  EXPECT_EQ(meta[0]["type"], "float");

  // "one" is the GELU graph's constant; "2nd level" starts with a digit.
  TestCase cats;
  for (const TestCase& tc : Cases())
    if (tc.name == "encoded_gelu_mse_cats") cats = tc;
  names.clear();
  for (const OnnxInput& i : OnnxInputs(MakeModel(cats))) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"one_2", "_2nd_level"}));
}

TEST_F(OnnxExportTest, EncodedNumbersAndIndicators) {
  const TestCase tc = testing::EncodedCase();
  const trainer::ModelFile model = MakeModel(tc);
  const onnx::ModelProto m = ExportAndRead(model);
  const onnx::GraphProto& g = m.graph();
  // The derive's standardisation first, on the number features only
  // (spend, the second of age, spend, calls, active).
  const onnx::TensorProto* mean = Initializer(g, "input_mean");
  ASSERT_NE(mean, nullptr);
  const std::vector<double> mv = Values<double>(*mean);
  ASSERT_EQ(mv.size(), 4u);
  EXPECT_EQ(mv[1], model.lineage->input.mean[2]);
  EXPECT_EQ(mv[0], 0.0);
  EXPECT_EQ(g.node(0).input(0), "numbers");
  // Then the encoding's, in double, from the standardised values.
  const onnx::NodeProto* isnan = Node(g, "encode.missing");
  ASSERT_NE(isnan, nullptr);
  EXPECT_EQ(isnan->input(0), "standardized");
  const std::vector<double> center = Values<double>(*Initializer(g, "encode.center"));
  const std::vector<double> scale = Values<double>(*Initializer(g, "encode.scale"));
  EXPECT_EQ(center, (std::vector<double>{41.5, 0.1, 4.5, 0.6}));
  EXPECT_EQ(scale, (std::vector<double>{12.25, 1.2, 2.75, 0.49}));
  EXPECT_EQ(Values<std::int64_t>(*Initializer(g, "encode.indicator_columns")),
            (std::vector<std::int64_t>{0, 2}));  // age and calls
  const onnx::NodeProto* where = Node(g, "encode.numbers");
  ASSERT_NE(where, nullptr);
  EXPECT_EQ(where->op_type(), "Where");
  EXPECT_EQ(where->input(0), "encode.missing");
  const onnx::NodeProto* concat = Node(g, "encode.row");
  ASSERT_NE(concat, nullptr);
  EXPECT_EQ(std::vector<std::string>(concat->input().begin(), concat->input().end()),
            (std::vector<std::string>{"encode.numbers", "encode.indicators", "embed0.vector",
                                      "embed1.vector"}));
  EXPECT_EQ(Node(g, "layer0.z")->input(0), "encode.row");
}

// Each category: LabelEncoder from its vocabulary to codes, the unknown
// code by default; Gather from its table, the model's tensor.
TEST_F(OnnxExportTest, EncodedCategoriesLookUpTheirTables) {
  const trainer::ModelFile model = MakeModel(testing::EncodedCase());
  const onnx::ModelProto m = ExportAndRead(model);
  const onnx::GraphProto& g = m.graph();
  const onnx::NodeProto* code = Node(g, "embed0.code");
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->op_type(), "LabelEncoder");
  EXPECT_EQ(code->domain(), "ai.onnx.ml");
  EXPECT_EQ(code->input(0), "colour");
  const onnx::AttributeProto* keys = Attr(*code, "keys_strings");
  ASSERT_NE(keys, nullptr);
  EXPECT_EQ(std::vector<std::string>(keys->strings().begin(), keys->strings().end()),
            (std::vector<std::string>{"red", "green", "light blue", "NA"}));
  const onnx::AttributeProto* values = Attr(*code, "values_int64s");
  EXPECT_EQ(std::vector<std::int64_t>(values->ints().begin(), values->ints().end()),
            (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Attr(*code, "default_int64")->i(), 4);
  const onnx::NodeProto* rows = Node(g, "embed0.rows");
  EXPECT_EQ(rows->input(0), "embed0.weight");
  EXPECT_EQ(Attr(*rows, "axis")->i(), 0);
  for (size_t j = 0; j < 2; ++j) {
    const trainer::FullTensor& t = model.tensors[model.tensors.size() - 2 + j];
    const onnx::TensorProto* init = Initializer(g, t.name);
    ASSERT_NE(init, nullptr) << t.name;
    EXPECT_EQ(std::vector<std::int64_t>(init->dims().begin(), init->dims().end()), t.shape);
    EXPECT_EQ(Values(*init), t.data);
  }

  // An empty vocabulary: every value is the unknown code 0.
  TestCase cats;
  for (const TestCase& tc : Cases())
    if (tc.name == "encoded_gelu_mse_cats") cats = tc;
  const onnx::ModelProto m2 = ExportAndRead(MakeModel(cats));
  const onnx::GraphProto& g2 = m2.graph();
  const onnx::NodeProto* empty = Node(g2, "embed1.code");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(Attr(*empty, "keys_strings")->strings_size(), 1);
  EXPECT_EQ(Attr(*empty, "values_int64s")->ints(0), 0);
  EXPECT_EQ(Attr(*empty, "default_int64")->i(), 0);
}

TEST_F(OnnxExportTest, EncodedModelWithAStandardisedCategoryIsRefused) {
  trainer::ModelFile model = MakeModel(testing::EncodedCase());
  model.lineage->input.standardized[1] = true;  // colour
  Status st = ExportOnnx(model, dir_ + "/a.onnx");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("category feature \"colour\""), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hpcml::inference
