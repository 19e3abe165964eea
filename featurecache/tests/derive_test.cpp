#include "derive.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(Derive, SelectStandardizeFilterAndRecord) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  VersionInfo parent = MakeVersion(path, {.rows = 1000, .features = 4});
  DeriveOptions o;
  o.select = {"f2", "f0"};
  o.standardize_columns = {"f2"};
  o.since = Time(100);
  o.until = Time(900);
  auto v = Derive(path, o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->name, "v2");
  EXPECT_EQ(v->rows, 800u);
  EXPECT_EQ(v->feature_names, (std::vector<std::string>{"f2", "f0"}));
  EXPECT_EQ(v->operation, "derive");
  ASSERT_EQ(v->parents.size(), 1u);
  EXPECT_EQ(v->parents[0].version, "v1");
  EXPECT_EQ(v->parents[0].sha256, parent.data_sha256);
  auto tr = nlohmann::json::parse(v->transform);
  EXPECT_EQ(tr["op"], "derive");
  EXPECT_EQ(tr["select"][0], "f2");
  EXPECT_EQ(tr["standardize"]["columns"][0], "f2");
  double mean = tr["standardize"]["mean"][0];
  EXPECT_NEAR(mean, Value(100, 2) + (Value(899, 2) - Value(100, 2)) / 2, 1e-9);
  auto scaling = RecordedStandardization(*v);
  ASSERT_TRUE(scaling.ok()) << scaling.status().ToString();
  ASSERT_EQ(scaling->size(), 1u);
  EXPECT_EQ((*scaling)[0].column, "f2");
  EXPECT_EQ((*scaling)[0].mean, mean);
  EXPECT_EQ((*scaling)[0].scale, tr["standardize"]["std"][0].get<double>());

  auto fs = FeatureSet::Open(path);
  auto r = fs->OpenVersion("v2");
  std::vector<float> x(800 * 2);
  std::vector<int64_t> t(800);
  ASSERT_TRUE(r->Read(0, 800, x.data(), nullptr, nullptr, t.data()).ok());
  double sum = 0, sq = 0;
  for (uint64_t i = 0; i < 800; ++i) {
    sum += x[2 * i];
    sq += x[2 * i] * x[2 * i];
    EXPECT_EQ(x[2 * i + 1], Value(100 + i, 0)) << "f0 is copied unchanged";
    EXPECT_EQ(t[i], Time(100 + i));
  }
  EXPECT_NEAR(sum / 800, 0.0, 1e-5);
  EXPECT_NEAR(sq / 800, 1.0, 1e-4);
  EXPECT_TRUE(VerifyVersion(*r).ok());
}

// What the inference engine reads back: nothing for a plain version, Corrupt
// naming the version for a malformed block.
TEST(Derive, RecordedStandardizationReadsBack) {
  VersionInfo v;
  v.name = "v7";
  v.transform = R"({"op":"ingest"})";
  auto none = RecordedStandardization(v);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  v.transform = R"({"op":"derive","standardize":{"columns":["a","b"],"mean":[1],"std":[2,3]}})";
  auto bad = RecordedStandardization(v);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.status().message().find("version v7"), std::string::npos);
  v.transform = R"({"op":"derive","standardize":{"columns":["a"],"mean":"x","std":[2]}})";
  EXPECT_FALSE(RecordedStandardization(v).ok());
}

TEST(Derive, ErrorsAreClear) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 100, .features = 2, .classification = "confidential"});
  DeriveOptions o;
  o.select = {"nope"};
  auto bad = Derive(path, o);
  EXPECT_NE(bad.status().message().find("no feature \"nope\" (features: f0, f1)"),
            std::string::npos);
  o = {};
  o.classification = "public";
  EXPECT_NE(Derive(path, o).status().message().find("below the parent's"), std::string::npos);
  o = {};
  o.since = Time(1000);
  EXPECT_NE(Derive(path, o).status().message().find("keeps none"), std::string::npos);
  o = {};
  o.from = "v9";
  EXPECT_EQ(Derive(path, o).status().code(), StatusCode::kNotFound);
  o = {};
  o.since = Time(5);
  o.until = Time(5);
  EXPECT_EQ(Derive(path, o).status().code(), StatusCode::kInvalidArgument);
  auto fs = FeatureSet::Open(path);
  EXPECT_EQ(fs->versions().size(), 1u);
}

TEST(Derive, ConstantColumnBecomesZero) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1, .features = 2});
  DeriveOptions o;
  o.standardize = true;
  auto v = Derive(path, o);
  ASSERT_TRUE(v.ok());
  auto r = FeatureSet::Open(path)->OpenVersion("v2");
  float x[2];
  ASSERT_TRUE(r->Read(0, 1, x, nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 0.0f);
}

TEST(ChildClassification, NeverLower) {
  EXPECT_EQ(*ChildClassification("internal", ""), "internal");
  EXPECT_EQ(*ChildClassification("internal", "restricted"), "restricted");
  EXPECT_FALSE(ChildClassification("restricted", "public").ok());
  EXPECT_FALSE(ChildClassification("internal", "bogus").ok());
}

}  // namespace
}  // namespace hpcml::featurecache
