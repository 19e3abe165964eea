#include "derive.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

namespace hpcml::featurecache {
namespace {

using namespace testing;

// Standardising over missing cells is refused with how many, where and what
// to do; --drop-missing keeps exactly the complete rows (label included).
TEST(Derive, MissingCellsRefusedOrDropped) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 100, .features = 2, .nan_cells = {{3, 0}, {50, 0}, {7, 1}, {9, 2}}});
  DeriveOptions o;
  o.standardize = true;
  auto refused = Derive(path, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(
                "fs.h5 v1: standardising needs every cell; missing (NaN) cells: 3 (f0 2, f1 1)"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--drop-missing"), std::string::npos);

  o.drop_missing = true;
  auto v = Derive(path, o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->rows, 96u);
  EXPECT_EQ(nlohmann::json::parse(v->transform)["drop_missing"], true);
  auto fs = FeatureSet::Open(path);
  auto st = fs->Stats("v2");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (const ColumnStats& c : st->columns) EXPECT_EQ(c.missing, 0u) << c.name;
  std::vector<int64_t> t(96);
  ASSERT_TRUE(fs->OpenVersion("v2")->Read(0, 96, nullptr, nullptr, nullptr, t.data()).ok());
  for (int64_t gone : {3, 7, 9, 50}) {
    EXPECT_EQ(std::count(t.begin(), t.end(), Time(static_cast<uint64_t>(gone))), 0) << gone;
  }
}

// A time split of a standardised version is recorded as standardised with
// the parent's scaling, and standardising again composes the two, so
// (raw - mean) / scale from the child's record gives the child's values.
TEST(Derive, StandardisationIsInheritedAndComposed) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1000, .features = 2});
  DeriveOptions o;
  o.standardize_columns = {"f1"};
  ASSERT_TRUE(Derive(path, o).ok());  // v2: f1 standardised
  o = {};
  o.from = "v2";
  o.until = Time(500);
  ASSERT_TRUE(Derive(path, o).ok());  // v3: a time split of v2
  o.until.reset();
  o.from = "v3";
  o.standardize = true;
  ASSERT_TRUE(Derive(path, o).ok());  // v4: v3 standardised again
  auto fs = FeatureSet::Open(path);
  auto v2 = RecordedStandardization(*fs->Info("v2"));
  auto v3 = RecordedStandardization(*fs->Info("v3"));
  auto v4 = RecordedStandardization(*fs->Info("v4"));
  ASSERT_TRUE(v2.ok() && v3.ok() && v4.ok());
  ASSERT_EQ(v3->size(), 1u);
  EXPECT_EQ((*v3)[0].column, "f1");
  EXPECT_EQ((*v3)[0].mean, (*v2)[0].mean);
  EXPECT_EQ((*v3)[0].scale, (*v2)[0].scale);
  ASSERT_EQ(v4->size(), 2u);  // f0 by v4 alone, f1 by v2 then v4
  std::vector<float> x(500 * 2);
  ASSERT_TRUE(fs->OpenVersion("v4")->Read(0, 500, x.data(), nullptr, nullptr, nullptr).ok());
  for (uint64_t r = 0; r < 500; r += 37) {
    for (const ColumnScaling& c : *v4) {
      const uint64_t j = c.column == "f0" ? 0 : 1;
      EXPECT_NEAR(x[2 * r + j], (Value(r, j) - c.mean) / c.scale, 1e-5) << c.column << " row " << r;
    }
  }
}

}  // namespace
}  // namespace hpcml::featurecache
