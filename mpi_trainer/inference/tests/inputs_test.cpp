// What hpcml-infer reads: a CSV by the model's feature names and kinds, and
// a feature-set version whose category codes become the model's (an encoded
// model's raw rows, engine.hpp); the errors name the column.
#include "inputs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "hpcml/featurecache/writer.hpp"
#include "schema.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

namespace fc = hpcml::featurecache;

// NaN compares equal to NaN here.
void ExpectRows(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "cell " << i << ": " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << "cell " << i;
    }
  }
}

class InputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("HPCML_ZONE");
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpcml_inputs_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Csv(const std::string& text) {
    const std::string path = dir_ + "/in.csv";
    EXPECT_TRUE(WriteFileAtomic(path, text).ok());
    return path;
  }

  std::string Error(const std::string& text, const trainer::ModelFile& model) {
    auto in = OpenCsvInput(Csv(text), model, {"id"});
    return in.ok() ? "ok" : in.status().message();
  }

  std::string dir_;
  // age, colour {red, green, light blue, NA}, spend, plan name {basic, pro,
  // "family, plus"}, calls (int), active (bool).
  const trainer::ModelFile model_ = testing::MakeModel(testing::EncodedCase());
};

constexpr float kNaN = NAN;

TEST_F(InputsTest, CsvCellsOfAnEncodedModel) {
  auto in = OpenCsvInput(Csv("id,plan name,colour,calls,active,spend,age\n"
                             "a, pro ,red,3,true,100.5,40\n"
                             "b,family plus,NA,,false,NA,\n"
                             "c,\"family, plus\",purple,NA,1,,31.5\n"
                             "d,,,7,,  ,22\n"),
                         model_, {"id"});
  ASSERT_TRUE(in.ok()) << in.status().Debug();
  EXPECT_EQ((*in)->features(), model_.lineage->input.feature_names);
  EXPECT_TRUE((*in)->kinds().empty());
  ASSERT_EQ((*in)->rows(), 4u);
  std::vector<float> x(4 * 6);
  ASSERT_TRUE((*in)->Read(0, 4, x.data()).ok());
  // age, colour, spend, plan name, calls, active: a kept value is its code
  // ("NA" is one), an unseen one the unknown code (4, 3), a missing cell NaN.
  ExpectRows(
      x, {40,   0, 100.5f, 1, 3,    1,  //
          kNaN, 3, kNaN,   3, kNaN, 0, 31.5f, 4, kNaN, 2, kNaN, 1, 22, kNaN, kNaN, kNaN, 7, kNaN});
  std::vector<std::string> ids;
  ASSERT_TRUE((*in)->Ids(0, 4, &ids).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(MatchSchema(model_, "in.csv", (*in)->features(), (*in)->kinds(), {}).ok());
}

TEST_F(InputsTest, CsvErrorsNameTheColumn) {
  std::string e = Error("id,colour,calls,active,spend,age\nx,red,1,true,2,3\n", model_);
  EXPECT_NE(e.find("line 1: the header has no column \"plan name\" (a feature of the model)"),
            std::string::npos)
      << e;
  e = Error("id,plan name,colour,calls,active,spend,age\nx,pro,red,many,true,2,3\n", model_);
  EXPECT_NE(e.find("line 2, column 4: \"many\" is not a number"), std::string::npos) << e;
  e = Error("id,plan name,colour,calls,active,spend,age\nx,pro,red,1,maybe,2,3\n", model_);
  EXPECT_NE(e.find("line 2, column 5: \"maybe\" is not a boolean"), std::string::npos) << e;
  e = Error("id,plan name,colour,calls,active,spend,age\nx,pro,red,1,true,inf,3\n", model_);
  EXPECT_NE(e.find("line 2, column 6"), std::string::npos) << e;
}

// A model without an encoding keeps its rule: every cell a finite number.
TEST_F(InputsTest, CsvOfAPlainModelNeedsEveryCell) {
  const trainer::ModelFile plain = testing::MakeModel(testing::Cases()[6]);  // linear_ce: f0..f2
  EXPECT_EQ(Error("id,f0,f1,f2\nx,1,2,3\n", plain), "ok");
  std::string e = Error("id,f0,f1,f2\nx,1,,3\n", plain);
  EXPECT_NE(e.find("line 2, column 3: \"\" is not a finite number"), std::string::npos) << e;
  e = Error("id,f0,f1,f2\nx,1,NA,3\n", plain);
  EXPECT_NE(e.find("\"NA\" is not a finite number"), std::string::npos) << e;
}

struct Column {
  std::string name, kind;
  std::vector<std::string> categories;
};

// A version of `columns` with `x` (rows x columns, codes for categories).
void WriteVersion(const std::string& path, const std::vector<Column>& columns,
                  const std::vector<float>& x) {
  auto w = fc::FeatureSetWriter::Begin(path, {"ae"});
  ASSERT_TRUE(w.ok()) << w.status().Debug();
  fc::NewVersion s;
  for (const Column& c : columns) {
    s.feature_names.push_back(c.name);
    s.feature_types.push_back(c.kind);
    s.categories.push_back(c.categories);
  }
  s.operation = "ingest";
  s.transform = "{}";
  s.classification = "internal";
  ASSERT_TRUE(w->StartVersion(s).ok());
  const size_t rows = x.size() / columns.size();
  std::vector<std::int64_t> e(rows), t(rows);
  for (size_t r = 0; r < rows; ++r) e[r] = t[r] = static_cast<std::int64_t>(r);
  ASSERT_TRUE(w->Append(x.data(), nullptr, e.data(), t.data(), rows).ok());
  auto committed = w->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().Debug();
}

// The version's own dictionaries, in its order, mapped to the model's codes.
TEST_F(InputsTest, VersionCodesBecomeTheModelsCodes) {
  const std::string path = dir_ + "/set.h5";
  const std::vector<Column> columns = {
      {"age", "float", {}},   {"colour", "category", {"green", "purple", "red", "NA"}},
      {"spend", "float", {}}, {"plan name", "category", {"family, plus", "basic"}},
      {"calls", "float", {}}, {"active", "bool", {}}};
  WriteVersion(path, columns, {40,   0, 1.5f, 0, 3,    1,  //
                               kNaN, 1, kNaN, 1, kNaN, 0, 22, kNaN, 2, kNaN, 7, kNaN,
                               30,   2, 0,    1, 1,    1, 31, 3,    0, 0,    1, 0});
  auto in = OpenVersionInput(path, "v1", model_);
  ASSERT_TRUE(in.ok()) << in.status().Debug();
  EXPECT_EQ((*in)->kinds(),
            (std::vector<std::string>{"float", "category", "float", "category", "float", "bool"}));
  auto mode = MatchSchema(model_, (*in)->what(), (*in)->features(), (*in)->kinds(), {});
  ASSERT_TRUE(mode.ok()) << mode.status().Debug();
  std::vector<float> x(5 * 6);
  ASSERT_TRUE((*in)->Read(0, 5, x.data()).ok());
  // colour: green 1, purple (not kept) 4, red 0, NA 3; plan name:
  // "family, plus" 2, basic 0; NaN stays NaN for the encoding.
  ExpectRows(x, {40,   1, 1.5f, 2, 3,    1,  //
                 kNaN, 4, kNaN, 0, kNaN, 0, 22, kNaN, 2, kNaN, 7, kNaN,
                 30,   0, 0,    0, 1,    1, 31, 3,    0, 2,    1, 0});
  std::vector<float> one(6);
  ASSERT_TRUE((*in)->Read(3, 1, one.data()).ok());
  ExpectRows(one, {30, 0, 0, 0, 1, 1});
}

TEST_F(InputsTest, VersionKindsMustMatchTheModels) {
  const std::string path = dir_ + "/set.h5";
  // colour as a number column, age as a category.
  WriteVersion(path,
               {{"age", "category", {"young", "old"}},
                {"colour", "float", {}},
                {"spend", "float", {}},
                {"plan name", "category", {"basic"}},
                {"calls", "float", {}},
                {"active", "bool", {}}},
               {0, 1, 2, 0, 3, 1});
  auto in = OpenVersionInput(path, "v1", model_);
  ASSERT_TRUE(in.ok()) << in.status().Debug();
  auto mode = MatchSchema(model_, (*in)->what(), (*in)->features(), (*in)->kinds(), {});
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("set.h5 v1: feature \"age\" is a category column, but "
                                         "the model " +
                                         model_.path + " takes it as a number (float)"),
            std::string::npos)
      << mode.status().message();
}

}  // namespace
}  // namespace hpcml::inference
