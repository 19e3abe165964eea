#include "model_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

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
  ASSERT_TRUE(SaveModelHdf5(path, c, *full).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = LoadModelHdf5(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), full->size());
  for (size_t i = 0; i < full->size(); ++i) {
    EXPECT_EQ((*back)[i].name, (*full)[i].name);
    EXPECT_EQ((*back)[i].shape, (*full)[i].shape);
    EXPECT_EQ((*back)[i].data, (*full)[i].data);
  }
}

TEST_F(ModelIoTest, ErrorsNameThePath) {
  std::vector<FullTensor> none;
  ModelConfig c;
  Status s = SaveModelHdf5((dir_ / "missing" / "m.h5").string(), c, none);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing/m.h5"), std::string::npos) << s.message();
  auto r = LoadModelHdf5((dir_ / "nope.h5").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope.h5"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::trainer
