#include "model_io.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

namespace hpcml::trainer {
namespace {

class ModelIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hpcml_model_io_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ModelIoTest, GatherSaveLoadRoundTrip) {
  ModelConfig c;
  c.input_dim = 3;
  c.hidden = {4};
  c.output_dim = 2;
  auto plan = PartitionModel(c, GridShape{});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  auto m = Model::Create(c, *plan, Placement{}, be.get());
  ASSERT_TRUE(m.ok());
  // Mark the biases so they are not all zero.
  for (const ParamInfo& p : (*m)->params()) {
    if (p.is_bias) be->Fill((*m)->param_data() + p.offset, p.size, 0.25f);
  }
  auto full = GatherModel(**m, nullptr, *be, WhichTensor::kParams);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ(full->size(), 4u);
  EXPECT_EQ((*full)[0].name, "layer0.weight");
  EXPECT_EQ((*full)[0].shape, (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ((*full)[0].data[5], (*m)->param_data()[5]);
  EXPECT_EQ((*full)[3].data, std::vector<float>(2, 0.25f));

  const std::string path = (dir_ / "model.h5").string();
  ModelLineage lin;
  lin.data = {"/data/ae/churn.h5", "v2", std::string(64, 'a'), "ae", "internal", 1000, {}};
  lin.input.feature_names = {"age", "tenure", "spend"};
  lin.input.label_name = "churned";
  lin.input.standardized = {true, false, true};
  lin.input.mean = {40.5, 0, 12.25};
  lin.input.scale = {9.75, 1, 3.5};
  lin.input.standardized_by = "v2";
  lin.input.stats =
      InputSchema::Stats{{0.0, 5.5, NAN}, {1, 2, NAN}, {-3, 0, NAN}, {3, 9, NAN}, {0, 0.25, 1}};
  lin.job_id = "42";
  lin.attempt = "1";
  lin.settings = R"({"lr":0.003,"steps":10})";
  lin.steps = 10;
  lin.first_loss = 0.75;
  lin.final_loss = 0.5;
  lin.validation =
      ValidationRecord{{"/data/ae/churn.h5", "v3", std::string(64, 'b'), "", "", 300, {}},
                       300,
                       8,
                       "best",
                       "log_loss",
                       R"({"log_loss":0.25,"accuracy":0.9,"auc":0.95})"};
  ASSERT_TRUE(SaveModelFile(path, c, *full, lin).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = LoadModelFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->format, kModelFormat);
  EXPECT_EQ(back->config.hidden, c.hidden);
  EXPECT_EQ(back->config.activation, c.activation);
  EXPECT_EQ(back->sha256.size(), 64u);
  ASSERT_EQ(back->tensors.size(), full->size());
  for (size_t i = 0; i < full->size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, (*full)[i].name);
    EXPECT_EQ(back->tensors[i].shape, (*full)[i].shape);
    EXPECT_EQ(back->tensors[i].data, (*full)[i].data);
  }
  ASSERT_TRUE(back->lineage.has_value());
  EXPECT_EQ(LineageJson(*back->lineage), LineageJson(lin));
  EXPECT_EQ(back->lineage->input.scale[2], 3.5);
  ASSERT_TRUE(back->lineage->validation.has_value());
  EXPECT_EQ(back->lineage->validation->step, 8);
  EXPECT_EQ(back->lineage->validation->selected, "best");
  EXPECT_EQ(back->lineage->validation->data.version, "v3");
  ASSERT_TRUE(back->lineage->input.stats.has_value());
  EXPECT_EQ(back->lineage->input.stats->max[1], 9);
  EXPECT_TRUE(std::isnan(back->lineage->input.stats->mean[2])) << "NaN is written as null";
}

// A model with an input encoding: format 3, its tables after the layers,
// the encoding, class names and class rows read back as written; a file
// whose first layer does not take the encoding's width is refused.
TEST_F(ModelIoTest, EncodedModelRoundTrip) {
  InputEncoding enc;
  enc.columns = {{"income", "float", 50.0, 10.0, true, {}, 0},
                 {"state", "category", 0, 1, false, {"NY", "CA"}, 2}};
  ModelConfig c;
  c.embeddings = enc.embeddings();
  c.input_dim = enc.width();
  c.hidden = {4};
  c.output_dim = 2;
  auto plan = PartitionModel(c, GridShape{});
  ASSERT_TRUE(plan.ok());
  auto be = MakeCpuBackend(nullptr);
  auto m = Model::Create(c, *plan, Placement{}, be.get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto full = GatherModel(**m, nullptr, *be, WhichTensor::kParams);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ(full->size(), 5u);
  EXPECT_EQ(full->back().name, "embed0.weight");
  EXPECT_EQ(full->back().shape, (std::vector<std::int64_t>{3, 2}));

  ModelLineage lin;
  lin.data.class_rows = {90, 10};
  lin.input.feature_names = {"income", "state"};
  lin.input.label_name = "churned";
  lin.input.label_classes = {"no", "yes"};
  lin.input.encoding = enc;
  const std::string path = (dir_ / "encoded.h5").string();
  ASSERT_TRUE(SaveModelFile(path, c, *full, lin).ok());
  auto back = LoadModelFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->format, kEncodedModelFormat);
  EXPECT_EQ(back->config.embeddings, c.embeddings);
  ASSERT_EQ(back->tensors.size(), full->size());
  EXPECT_EQ(back->tensors.back().data, full->back().data);
  EXPECT_EQ(back->lineage->input.label_classes, lin.input.label_classes);
  EXPECT_EQ(back->lineage->data.class_rows, lin.data.class_rows);
  ASSERT_TRUE(back->lineage->input.encoding.has_value());
  EXPECT_EQ(EncodingJson(*back->lineage->input.encoding), EncodingJson(enc));
  EXPECT_NE(LineageJson(*back->lineage).find(enc.columns[1].vocabulary_sha256()),
            std::string::npos);

  // Another embedding width: the first layer no longer takes the encoding's.
  lin.input.encoding->columns[1].embed_dim = 3;
  ASSERT_TRUE(SaveModelFile(path, c, *full, lin).ok());
  auto bad = LoadModelFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the input encoding is 5 wide, the first layer takes 4"),
            std::string::npos)
      << bad.status().message();
}

// A model file whose dims disagree with a tensor, or whose lineage names a
// different number of features, is refused with the file and the cause.
TEST_F(ModelIoTest, InconsistentFilesAreCorrupt) {
  ModelConfig c;
  c.input_dim = 2;
  c.output_dim = 1;
  c.loss = LossKind::kMse;
  std::vector<FullTensor> t{{"layer0.weight", {1, 3}, std::vector<float>(3, 1.0f)},
                            {"layer0.bias", {1}, {0.0f}}};
  const std::string path = (dir_ / "bad.h5").string();
  ASSERT_TRUE(SaveModelFile(path, c, t, ModelLineage{}).ok());
  auto r = LoadModelFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("/layer0/weight has shape [1, 3]"), std::string::npos)
      << r.status().message();

  t[0] = {"layer0.weight", {1, 2}, {1.0f, 2.0f}};
  ModelLineage lin;
  lin.input.feature_names = {"only_one"};
  ASSERT_TRUE(SaveModelFile(path, c, t, lin).ok());
  r = LoadModelFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lineage names 1 input features, the model has 2"),
            std::string::npos)
      << r.status().message();

  lin.input.feature_names = {"a", "b"};
  lin.input.standardized = {false, true};
  lin.input.mean = {0, 3};
  lin.input.scale = {1, 0};
  ASSERT_TRUE(SaveModelFile(path, c, t, lin).ok());
  r = LoadModelFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("feature 2 has mean 3 and scale 0"), std::string::npos)
      << r.status().message();
}

TEST_F(ModelIoTest, ErrorsNameThePath) {
  std::vector<FullTensor> none;
  ModelConfig c;
  Status s = SaveModelFile((dir_ / "missing" / "m.h5").string(), c, none, ModelLineage{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing/m.h5"), std::string::npos) << s.message();
  auto r = LoadModelFile((dir_ / "nope.h5").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope.h5"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::trainer

namespace hpcml::trainer {
namespace {

// A model with a NaN or an infinity is never written, and a file holding one
// (written by anything else) is never loaded for scoring or export.
TEST_F(ModelIoTest, NonFiniteModelsAreNeitherWrittenNorUsed) {
  ModelConfig c;
  c.input_dim = 2;
  c.output_dim = 2;
  std::vector<FullTensor> t{{"layer0.weight", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}},
                            {"layer0.bias", {2}, {0.0f, NAN}}};
  const std::string path = (dir_ / "m.h5").string();
  Status s = SaveModelFile(path, c, t, ModelLineage{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("m.h5: not written: layer0.bias holds 1 non-finite values of 2"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  t[1].data[1] = 0.5f;
  ASSERT_TRUE(SaveModelFile(path, c, t, ModelLineage{}).ok());
  ASSERT_TRUE(LoadModelFile(path).ok());
  {  // Another writer puts an infinity into the weights.
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, "/layer0/weight", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const float w[4] = {1.0f, INFINITY, 3.0f, 4.0f};
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
  auto r = LoadModelFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a model with non-finite weights is not used: layer0.weight "
                                      "holds 1 non-finite values of 4 (the first, at index 1, is "
                                      "inf)"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace hpcml::trainer
