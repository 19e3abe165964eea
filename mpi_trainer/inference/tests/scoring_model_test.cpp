// hpcml-infer's model of either kind: a GBDT file is told from an MLP one,
// described for the scoring pieces (the schema, a CSV's cells, the output
// names), and given its own engine.
#include "scoring_model.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>

#include "gbdt_models.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/sha256.hpp"
#include "inputs.hpp"
#include "outputs.hpp"
#include "schema.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

using Names = std::vector<std::string>;
using testing::GbdtKind;

class ScoringModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("HPCML_ZONE");
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpcml_scoring_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A GBDT model of `kind` written and loaded as hpcml-infer loads one.
  ScoringModel Gbdt(GbdtKind kind) {
    const std::string path = dir_ + "/" + testing::Name(kind) + ".h5";
    auto c = testing::TrainGbdtCase(kind, 200, path);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    auto m = LoadScoringModel(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  std::string dir_;
};

TEST_F(ScoringModelTest, GbdtFileIsDescribed) {
  const ScoringModel m = Gbdt(GbdtKind::kBinary);
  ASSERT_TRUE(m.gbdt.has_value());
  EXPECT_EQ(m.file.format, "hpcml-gbdt-1");
  EXPECT_EQ(m.file.path, m.gbdt->path);
  EXPECT_EQ(m.file.sha256, m.gbdt->sha256);
  ASSERT_TRUE(Sha256File(m.file.path).ok());
  EXPECT_EQ(m.file.sha256, *Sha256File(m.file.path));
  EXPECT_EQ(m.file.config.input_dim, testing::kGbdtFeatures);
  EXPECT_EQ(m.file.config.output_dim, 2);
  EXPECT_EQ(m.file.config.loss, trainer::LossKind::kCrossEntropy);
  EXPECT_TRUE(m.file.tensors.empty());
  ASSERT_TRUE(m.file.lineage.has_value());
  EXPECT_EQ(m.file.lineage->input.feature_names, (Names{"age", "colour", "spend", "visits"}));
}

TEST_F(ScoringModelTest, OutputNamesByObjective) {
  EXPECT_EQ(OutputNames(Gbdt(GbdtKind::kBinary).file), (Names{"p_stay", "p_churn", "class"}));
  EXPECT_EQ(OutputNames(Gbdt(GbdtKind::kMulti).file), (Names{"p_low", "p_mid", "p_high", "class"}));
  const ScoringModel reg = Gbdt(GbdtKind::kRegression);
  EXPECT_EQ(reg.file.config.loss, trainer::LossKind::kMse);
  EXPECT_EQ(OutputNames(reg.file), (Names{"amount_pred"}));
}

TEST_F(ScoringModelTest, FeatureNamesFromTheEncodingWhenTheLineageHasNone) {
  ScoringModel m = Gbdt(GbdtKind::kBinary);
  m.gbdt->lineage.input.feature_names.clear();
  EXPECT_EQ(DescribeGbdt(*m.gbdt).lineage->input.feature_names,
            (Names{"age", "colour", "spend", "visits"}));
}

TEST_F(ScoringModelTest, EachKindGetsItsEngine) {
  const ScoringModel g = Gbdt(GbdtKind::kMulti);
  auto e = MakeEngine(g, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->inputs(), 4);
  EXPECT_EQ((*e)->outputs(), 3);
  // The description has no layers: the MLP engine says what it is.
  auto mlp = Engine::Create(g.file, {});
  ASSERT_FALSE(mlp.ok());
  EXPECT_NE(mlp.status().message().find("a GBDT model"), std::string::npos)
      << mlp.status().message();

  const std::string path = dir_ + "/mlp.h5";
  ASSERT_TRUE(testing::WriteModel(testing::EncodedCase(), path).ok());
  auto m = LoadScoringModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->gbdt.has_value());
  EXPECT_EQ(m->file.format, trainer::kEncodedModelFormat);
  EXPECT_TRUE(MakeEngine(*m, {}).ok());
}

TEST_F(ScoringModelTest, MissingFile) {
  auto m = LoadScoringModel(dir_ + "/nope.h5");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nope.h5: cannot open"), std::string::npos)
      << m.status().message();
}

// A CSV's cells in the GBDT model's code space (inputs.hpp): columns by
// name, a colour by its vocabulary, an unseen one the unknown code (4),
// empty and NA cells missing.
TEST_F(ScoringModelTest, CsvCellsAndSchema) {
  const ScoringModel m = Gbdt(GbdtKind::kBinary);
  const std::string csv = dir_ + "/in.csv";
  ASSERT_TRUE(WriteFileAtomic(csv,
                              "id,visits,colour,spend,age\n"
                              "a,3,blue,100.5,40\n"
                              "b,,purple,NA,31\n"
                              "c,7,,12,\n")
                  .ok());
  auto in = OpenCsvInput(csv, m.file, {"id"});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  auto mode =
      MatchSchema(m.file, (*in)->what(), (*in)->features(), (*in)->kinds(), (*in)->scaling());
  ASSERT_TRUE(mode.ok()) << mode.status().ToString();
  EXPECT_EQ(*mode, Input::kRaw);
  std::vector<float> x(3 * 4);
  ASSERT_TRUE((*in)->Read(0, 3, x.data()).ok());
  const float want[] = {40, 2, 100.5f, 3, 31, 4, NAN, NAN, NAN, NAN, 12, 7};
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(x[i])) << "cell " << i;
    } else {
      EXPECT_EQ(x[i], want[i]) << "cell " << i;
    }
  }
  auto wrong = MatchSchema(m.file, "in.csv", {"age", "spend", "colour", "visits"}, {}, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(R"(feature 2 is "spend", but the model)"),
            std::string::npos)
      << wrong.status().message();
  // A version whose colour column holds numbers: the kinds differ.
  auto kinds = MatchSchema(m.file, "x.h5 v1", m.file.lineage->input.feature_names,
                           {"float", "float", "float", "int"}, {});
  ASSERT_FALSE(kinds.ok());
  EXPECT_NE(kinds.status().message().find(R"(feature "colour" is a float column)"),
            std::string::npos)
      << kinds.status().message();
}

}  // namespace
}  // namespace hpcml::inference
