#include "derive.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
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

// Standardising uses the present values and leaves missing cells missing;
// --impute fills them (with the mean: 0 once standardised) and records it;
// --drop-missing keeps exactly the complete rows (label included).
TEST(Derive, MissingCellsStandardisedImputedOrDropped) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 100, .features = 2, .nan_cells = {{3, 0}, {50, 0}, {7, 1}, {9, 2}}});
  DeriveOptions o;
  o.standardize = true;
  auto kept = Derive(path, o);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  auto stats = FeatureSet::Open(path)->Stats("v2");
  ASSERT_TRUE(stats.ok());
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(stats->columns[c].mean, 0.0, 1e-5);
    EXPECT_NEAR(stats->columns[c].std, 1.0, 1e-4);
  }
  EXPECT_EQ(stats->columns[0].missing, 2u);
  EXPECT_EQ(stats->columns[1].missing, 1u);

  o.impute = true;
  auto filled = Derive(path, o);
  ASSERT_TRUE(filled.ok()) << filled.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(filled->transform)["impute"],
            (nlohmann::json{{"f0", 0.0}, {"f1", 0.0}}));
  std::vector<float> x(200);
  ASSERT_TRUE(FeatureSet::Open(path)
                  ->OpenVersion("v3")
                  ->Read(0, 100, x.data(), nullptr, nullptr, nullptr)
                  .ok());
  EXPECT_EQ(x[3 * 2 + 0], 0.0f);
  EXPECT_EQ(x[7 * 2 + 1], 0.0f);
  o.impute = false;

  o.from = "v1";
  o.drop_missing = true;
  auto v = Derive(path, o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->rows, 96u);
  EXPECT_EQ(nlohmann::json::parse(v->transform)["drop_missing"], true);
  auto fs = FeatureSet::Open(path);
  auto st = fs->Stats("v4");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (const ColumnStats& c : st->columns) EXPECT_EQ(c.missing, 0u) << c.name;
  std::vector<int64_t> t(96);
  ASSERT_TRUE(fs->OpenVersion("v4")->Read(0, 96, nullptr, nullptr, nullptr, t.data()).ok());
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

// A typed version's kinds, dictionaries, class names and exact integers
// survive a derive; --impute fills an int column with its rounded mean and
// a category column with its most frequent category; naming a category
// column to standardise is refused.
TEST(Derive, KeepsKindsDictionariesAndExactInts) {
  TempDir dir;
  WriteText(dir / "in.csv",
            "id,ts,grade,cents,score,y\n1,0,A,16777217,1.5,good\n2,0,B,,2.5,bad\n"
            "3,0,B,16777219,NA,good\n4,0,NA,16777221,3.5,bad\n");
  IngestOptions io = CsvIngest(dir / "in.csv");
  std::string path = dir / "fs.h5";
  ASSERT_TRUE(Ingest(path, io).ok());
  DeriveOptions o;
  o.impute = true;
  auto v = Derive(path, o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"category", "int", "float"}));
  EXPECT_EQ(v->label_classes, (std::vector<std::string>{"bad", "good"}));
  auto r = FeatureSet::Open(path)->OpenVersion("v2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(VerifyVersion(*r).ok());
  EXPECT_EQ((*r->Categories())[0], (std::vector<std::string>{"A", "B"}));
  std::vector<int64_t> ints(4);
  ASSERT_TRUE(r->ReadInts(0, 4, ints.data()).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{16777217, 16777219, 16777219, 16777221}));
  std::vector<float> x(12);
  ASSERT_TRUE(r->Read(0, 4, x.data(), nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(x[3 * 3 + 0], 1.0f);  // grade NA -> B, the most frequent
  EXPECT_EQ(x[2 * 3 + 2], 2.5f);  // score NA -> the mean
  o = {};
  o.standardize_columns = {"grade"};
  auto refused = Derive(path, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("\"grade\": it is a category column"),
            std::string::npos);
  o.standardize_columns = {};
  o.standardize = true;
  auto std_all = Derive(path, o);
  ASSERT_TRUE(std_all.ok()) << std_all.status().ToString();
  EXPECT_EQ(std_all->feature_types, (std::vector<std::string>{"category", "float", "float"}));
}

// A validation split gets the training split's standardisation and fill
// values, not its own: the recorded scaling is identical (so the trainer
// accepts the pair), the values use the training means, a missing number
// becomes the training mean and a missing category the training's most
// frequent one, by name though the dictionaries differ.
TEST(Derive, TransformFromAnotherVersion) {
  TempDir dir;
  WriteText(dir / "train.csv", "id,ts,x,grade,y\n1,0,1,A,0\n2,0,3,B,1\n3,0,NA,B,0\n4,0,5,NA,1\n");
  WriteText(dir / "val.csv", "id,ts,x,grade,y\n5,0,7,A,0\n6,0,NA,NA,1\n7,0,2,C,0\n");
  std::string path = dir / "fs.h5";
  ASSERT_TRUE(Ingest(path, CsvIngest(dir / "train.csv")).ok());  // v1
  ASSERT_TRUE(Ingest(path, CsvIngest(dir / "val.csv")).ok());    // v2
  DeriveOptions o;
  o.from = "v1";
  o.standardize = true;
  o.impute = true;
  auto train = Derive(path, o);  // v3
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  o = {};
  o.from = "v2";
  o.transform_from = "v3";
  auto val = Derive(path, o);  // v4
  ASSERT_TRUE(val.ok()) << val.status().ToString();
  auto a = RecordedStandardization(*train), b = RecordedStandardization(*val);
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].column, "x");
  EXPECT_EQ((*b)[0].mean, (*a)[0].mean);  // exactly: 3
  EXPECT_EQ((*b)[0].scale, (*a)[0].scale);
  ASSERT_EQ(val->parents.size(), 2u);
  EXPECT_EQ(val->parents[1].version, "v3");
  auto r = FeatureSet::Open(path)->OpenVersion("v4");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(VerifyVersion(*r).ok());
  std::vector<float> x(6);
  ASSERT_TRUE(r->Read(0, 3, x.data(), nullptr, nullptr, nullptr).ok());
  const double mean = (*a)[0].mean, scale = (*a)[0].scale;
  EXPECT_FLOAT_EQ(x[0], static_cast<float>((7 - mean) / scale));
  EXPECT_EQ(x[2], 0.0f);  // missing x: the training mean, standardised
  const auto cats = (*r->Categories())[1];
  EXPECT_EQ(cats[static_cast<size_t>(x[3])], "B");  // missing grade: training's most frequent
  EXPECT_EQ(cats[static_cast<size_t>(x[1])], "A");
  EXPECT_EQ(cats[static_cast<size_t>(x[5])], "C");  // unseen in training, kept as it is
  o.standardize = true;
  EXPECT_NE(Derive(path, o).status().message().find("give no --select, --standardize or --impute"),
            std::string::npos);
  o = {};
  o.from = "v2";
  o.transform_from = "v1";
  EXPECT_NE(Derive(path, o).status().message().find("records no standardisation or fill"),
            std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
