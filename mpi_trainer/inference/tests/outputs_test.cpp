// The output's columns (class names when the model has them) and a CSV
// output's rows: the class by name, quoted where CSV needs it.
#include "outputs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

using Names = std::vector<std::string>;

TEST(OutputNames, ClassNamesWhenTheModelHasThem) {
  trainer::ModelFile m = testing::MakeModel(testing::EncodedCase());  // stay, churn, up,grade
  EXPECT_EQ(OutputNames(m), (Names{"p_stay", "p_churn", "p_up,grade", "class"}));
  m.lineage->input.label_classes.clear();
  EXPECT_EQ(OutputNames(m), (Names{"p_0", "p_1", "p_2", "class"}));
  m.lineage->input.label_classes = {"a", "b"};  // not one per output: not used
  EXPECT_EQ(OutputNames(m), (Names{"p_0", "p_1", "p_2", "class"}));
  m.lineage.reset();
  EXPECT_EQ(OutputNames(m), (Names{"p_0", "p_1", "p_2", "class"}));
}

TEST(OutputNames, RegressionModels) {
  const trainer::ModelFile one = testing::MakeModel(testing::Cases()[5]);  // linear_mse_std
  EXPECT_EQ(OutputNames(one), (Names{"y_pred"}));
  const trainer::ModelFile two = testing::MakeModel(testing::Cases()[1]);  // gelu_mse
  EXPECT_EQ(OutputNames(two), (Names{"pred_0", "pred_1"}));
}

TEST(CsvOutput, GivesTheClassByName) {
  ::unsetenv("HPCML_ZONE");
  std::string dir = (std::filesystem::temp_directory_path() / "hpcml_outputs_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const trainer::ModelFile m = testing::MakeModel(testing::EncodedCase());
  ASSERT_TRUE(WriteFileAtomic(dir + "/in.csv",
                              "id,age,colour,spend,plan name,calls,active\n"
                              "\"a,1\",1,red,2,pro,3,true\nb,1,red,2,pro,3,true\n")
                  .ok());
  auto in = OpenCsvInput(dir + "/in.csv", m, {"id"});
  ASSERT_TRUE(in.ok()) << in.status().Debug();
  auto out = OpenOutput(dir + "/out.csv", **in, m, {});
  ASSERT_TRUE(out.ok()) << out.status().Debug();
  const std::vector<float> p = {0.25f, 0.25f, 0.5f, 0.5f, 0.125f, 0.375f};
  ASSERT_TRUE((*out)->Append(0, 2, p.data()).ok());
  ASSERT_TRUE((*out)->Finish().ok());
  auto text = ReadFile(dir + "/out.csv");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "id,p_stay,p_churn,\"p_up,grade\",class\n"
            "\"a,1\",0.25,0.25,0.5,\"up,grade\"\n"
            "b,0.5,0.125,0.375,stay\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpcml::inference
