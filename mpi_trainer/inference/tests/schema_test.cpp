#include "schema.hpp"

#include <gtest/gtest.h>

namespace hpcml::inference {
namespace {

using featurecache::ColumnScaling;

trainer::ModelFile Model(bool standardized) {
  trainer::ModelFile m;
  m.path = "m.h5";
  m.config.input_dim = 3;
  trainer::ModelLineage l;
  l.input.feature_names = {"age", "spend", "calls"};
  if (standardized) {
    l.input.standardized = {true, true, false};
    l.input.mean = {40, 100, 0};
    l.input.scale = {10, 50, 1};
    l.input.standardized_by = "v2";
  }
  m.lineage = l;
  return m;
}

std::string Error(const Result<Input>& r) {
  return r.ok() ? "ok" : r.status().message();
}

TEST(MatchSchema, RawOrStandardisedExactlyAsTrained) {
  const std::vector<std::string> names{"age", "spend", "calls"};
  EXPECT_EQ(*MatchSchema(Model(true), "in", names, {}, {}), Input::kRaw);
  EXPECT_EQ(*MatchSchema(Model(true), "in", names, {}, {{"age", 40, 10}, {"spend", 100, 50}}),
            Input::kStandardized);
  EXPECT_EQ(*MatchSchema(Model(false), "in", names, {}, {}), Input::kRaw);
}

TEST(MatchSchema, ErrorsNameTheFeature) {
  const std::vector<std::string> names{"age", "spend", "calls"};
  std::string e = Error(MatchSchema(Model(true), "x.h5 v3", {"age", "calls", "spend"}, {}, {}));
  EXPECT_NE(
      e.find("x.h5 v3: feature 2 is \"calls\", but the model m.h5 was trained with \"spend\""),
      std::string::npos)
      << e;
  e = Error(MatchSchema(Model(true), "in", {"age", "spend"}, {}, {}));
  EXPECT_NE(e.find("feature 3 is missing"), std::string::npos) << e;
  // Standardised with other parameters (a derive of new data).
  e = Error(MatchSchema(Model(true), "in", names, {}, {{"age", 41, 10}, {"spend", 100, 50}}));
  EXPECT_NE(e.find("feature \"age\" was standardised with mean 41"), std::string::npos) << e;
  EXPECT_NE(e.find("trained with mean 40 and scale 10 (from v2)"), std::string::npos) << e;
  // Standardised where the model saw raw values.
  e = Error(MatchSchema(Model(true), "in", names, {},
                        {{"age", 40, 10}, {"spend", 100, 50}, {"calls", 1, 2}}));
  EXPECT_NE(e.find("\"calls\" was standardised"), std::string::npos) << e;
  EXPECT_NE(e.find("trained on its raw values"), std::string::npos) << e;
  // Half raw, half standardised.
  e = Error(MatchSchema(Model(true), "in", names, {}, {{"spend", 100, 50}}));
  EXPECT_NE(e.find("feature \"spend\" is standardised while an earlier one is raw"),
            std::string::npos)
      << e;
}

// An encoded model reads a category's cells as codes and a number's as
// values: a version must agree on each feature's kind; a CSV has none.
TEST(MatchSchema, EncodedModelsCheckTheKinds) {
  trainer::ModelFile m = Model(false);
  trainer::InputEncoding enc;
  for (const char* kind : {"float", "int", "category"}) {
    trainer::ColumnEncoding c;
    c.name = m.lineage->input.feature_names[enc.columns.size()];
    c.kind = kind;
    c.embed_dim = 2;
    enc.columns.push_back(c);
  }
  m.lineage->input.encoding = enc;
  const std::vector<std::string> names{"age", "spend", "calls"};
  EXPECT_TRUE(MatchSchema(m, "in", names, {}, {}).ok());
  EXPECT_TRUE(MatchSchema(m, "in", names, {"float", "float", "category"}, {}).ok());
  EXPECT_TRUE(MatchSchema(m, "in", names, {"int", "bool", "category"}, {}).ok());
  std::string e = Error(MatchSchema(m, "x.h5 v2", names, {"float", "float", "float"}, {}));
  EXPECT_NE(e.find("x.h5 v2: feature \"calls\" is a float column, but the model m.h5 takes it as a "
                   "category"),
            std::string::npos)
      << e;
  e = Error(MatchSchema(m, "x.h5 v2", names, {"float", "category", "category"}, {}));
  EXPECT_NE(e.find("feature \"spend\" is a category column, but the model m.h5 takes it as a "
                   "number (int)"),
            std::string::npos)
      << e;
  // Names first.
  e = Error(MatchSchema(m, "in", {"age", "calls", "spend"}, {"float", "category", "float"}, {}));
  EXPECT_NE(e.find("feature 2 is \"calls\""), std::string::npos) << e;
}

TEST(MatchSchema, ModelsWithoutNamesCheckTheWidth) {
  trainer::ModelFile m = Model(false);
  m.lineage.reset();
  EXPECT_TRUE(MatchSchema(m, "in", {"a", "b", "c"}, {}, {}).ok());
  EXPECT_NE(Error(MatchSchema(m, "in", {"a", "b"}, {}, {}))
                .find("in has 2 features, the model m.h5 takes 3"),
            std::string::npos);
}

}  // namespace
}  // namespace hpcml::inference
