#include "hpcml/featurecache/ingest.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "hpcml/common/sha256.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

IngestOptions Opts(const std::string& csv) {
  IngestOptions o;
  o.csv_path = csv;
  o.entity_column = "id";
  o.timestamp_column = "ts";
  o.label_column = "y";
  o.zone = "ae";
  o.classification = "internal";
  return o;
}

TEST(Ingest, StreamsACsvIntoAVersion) {
  TempDir dir;
  std::string csv =
      "id,ts,a,y,b\n1,2024-01-01T00:00:00Z,1,0,0.5\n2,2024-01-02,2,1,-1.25\n1,1704240000,3,1,nan\n";
  WriteText(dir / "in.csv", csv);
  auto v = Ingest(dir / "fs.h5", Opts(dir / "in.csv"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->name, "v1");
  EXPECT_EQ(v->rows, 3u);
  EXPECT_EQ(v->feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"int", "float"}));
  EXPECT_EQ(v->label_name, "y");
  EXPECT_EQ(v->operation, "ingest");
  ASSERT_EQ(v->sources.size(), 1u);
  EXPECT_EQ(v->sources[0].sha256, Sha256::Hex(csv));
  EXPECT_EQ(v->sources[0].uri.rfind("file:///", 0), 0u);
  auto fs = FeatureSet::Open(dir / "fs.h5");
  auto r = fs->OpenVersion("v1");
  std::vector<float> x(6), y(3);
  std::vector<int64_t> e(3), t(3);
  ASSERT_TRUE(r->Read(0, 3, x.data(), y.data(), e.data(), t.data()).ok());
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[3], -1.25f);
  EXPECT_TRUE(std::isnan(x[5]));
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(e, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(t[0], 1704067200000000);
  EXPECT_EQ(t[1], 1704153600000000);
  EXPECT_EQ(t[2], 1704240000000000);
  EXPECT_TRUE(VerifyVersion(*r).ok());
}

// A table as R's write.csv writes it (every string quoted, a row-name
// column, NA for missing) and as pandas' to_csv does (an empty cell, NaN):
// the missing cells are NaN, integer columns stay integral, and the counts
// are in the version's transform.
TEST(Ingest, MissingCellsAsRAndPandasWriteThem) {
  TempDir dir;
  WriteText(dir / "r.csv",
            "\"\",\"id\",\"ts\",\"a\",\"b\",\"y\"\n"
            "\"1\",1,\"2024-01-01\",NA,\"3.5\",1\n"
            "\"2\",2,\"2024-01-02\",4,,0\n"
            "\"3\",3,\"2024-01-03\",5,NaN,1\n");
  IngestOptions o = Opts(dir / "r.csv");  // every named column but id, ts, y: a, b
  auto v = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"int", "float"}));
  auto fs = FeatureSet::Open(dir / "fs.h5");
  auto r = fs->OpenVersion("v1");
  std::vector<float> x(6), y(3);
  std::vector<int64_t> e(3), t(3);
  ASSERT_TRUE(r->Read(0, 3, x.data(), y.data(), e.data(), t.data()).ok());
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_EQ(x[1], 3.5f);
  EXPECT_EQ(x[2], 4.0f);
  EXPECT_TRUE(std::isnan(x[3]));
  EXPECT_TRUE(std::isnan(x[5]));
  EXPECT_EQ(y, (std::vector<float>{1, 0, 1}));
  auto tr = nlohmann::json::parse(v->transform);
  EXPECT_EQ(tr["missing_cells"], (nlohmann::json{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(tr["na_values"].size(), NaValues::Default().words().size());

  // "NA" can be a real value: with no missing words, only empty cells are.
  o.na_values = *NaValues::Parse("");
  auto strict = Ingest(dir / "fs.h5", o);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(
      strict.status().message().find("line 2, column 4: \"NA\" is not a number (column \"a\")"),
      std::string::npos)
      << strict.status().message();
}

TEST(Ingest, FeatureSubsetAndNoLabel) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,a,b,c\n1,0,1,2,3\n");
  IngestOptions o = Opts(dir / "in.csv");
  o.label_column = "";
  o.feature_columns = {"c", "a"};
  auto v = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_names, (std::vector<std::string>{"c", "a"}));
  EXPECT_FALSE(v->has_labels());
}

struct BadCase {
  std::string csv;
  std::string expect;
};

TEST(Ingest, BadInputNamesLineAndColumn) {
  TempDir dir;
  std::vector<BadCase> cases = {
      {"id,ts,a,y\n1,0,1,0\n2,0,abc,0\n",
       "line 3, column 3: \"abc\" is not a number (column \"a\")"},
      {"id,ts,a,y\n1,0,1,\n", "line 2, column 4: missing label \"\" (every row needs its label)"},
      {"id,ts,a,y\n1,0,1,NA\n", "line 2, column 4: missing label \"NA\""},
      {"id,ts,a,y\n1,0,1,0\n1.5,0,1,0\n", "line 3, column 1: \"1.5\" is not an integer"},
      {"id,ts,a,y\n1,yesterday,1,0\n", "line 2, column 2: \"yesterday\" is not a time"},
      {"id,ts,a,y\n1,0,1\n", "line 2: expected 4 fields as in the header, found 3"},
      {"id,ts,a,y\n1,0,1,x\n", "line 2, column 4: \"x\" is not a number (label column \"y\")"},
      {"id,ts,a,a,y\n", "line 1, column 4: column \"a\" appears twice"},
      {"id,ts,,y\n1,0,1,0\n", "line 1, column 3: empty column name"},
      {"id,a,y\n1,2,3\n", "line 1: no timestamp column named \"ts\" (columns: id, a, y)"},
      {"id,ts,a,y\n", "no data rows"},
      {"", "empty file"},
      {"id,ts,y\n1,0,0\n", "no feature columns"},
  };
  int i = 0;
  for (const auto& c : cases) {
    std::string csv = dir / ("bad" + std::to_string(i++) + ".csv");
    WriteText(csv, c.csv);
    auto v = Ingest(dir / "fs.h5", Opts(csv));
    ASSERT_FALSE(v.ok()) << c.csv;
    EXPECT_NE(v.status().message().find(c.expect), std::string::npos) << v.status().message();
    EXPECT_EQ(v.status().message().rfind(csv, 0), 0u)
        << "message starts with the file: " << v.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "fs.h5")) << "no half-made feature set";
}

TEST(Ingest, FailureLeavesEarlierVersionsAlone) {
  TempDir dir;
  WriteText(dir / "good.csv", "id,ts,a,y\n1,0,1,0\n");
  ASSERT_TRUE(Ingest(dir / "fs.h5", Opts(dir / "good.csv")).ok());
  std::string before = ReadText(dir / "fs.h5");
  std::string big = "id,ts,a,y\n";
  for (int r = 0; r < 100000; ++r) big += "1,0,1,0\n";
  big += "1,0,oops,0\n";
  WriteText(dir / "bad.csv", big);
  auto v = Ingest(dir / "fs.h5", Opts(dir / "bad.csv"));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("line 100002, column 3"), std::string::npos)
      << v.status().message();
  EXPECT_EQ(ReadText(dir / "fs.h5"), before);
}

TEST(Ingest, RequiresClassificationAndColumns) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,a\n1,0,1\n");
  IngestOptions o = Opts(dir / "in.csv");
  o.classification = "";
  EXPECT_FALSE(Ingest(dir / "fs.h5", o).ok());
  o = Opts(dir / "in.csv");
  o.entity_column = "";
  EXPECT_FALSE(Ingest(dir / "fs.h5", o).ok());
  o = Opts(dir / "missing.csv");
  EXPECT_EQ(Ingest(dir / "fs.h5", o).status().code(), StatusCode::kNotFound);
}

TEST(Ingest, WarnsAboutLargeIntegers) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,big,y\n1,0,16777217,0\n");
  std::vector<std::string> warnings;
  auto v = Ingest(dir / "fs.h5", Opts(dir / "in.csv"), &warnings);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("\"big\""), std::string::npos);
}

TEST(Ingest, GuardedJobMustBeAllowedToReadTheCsv) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,a,y\n1,0,1,0\n");
  std::string h5 = *CanonicalPath(dir / "fs.h5", false);
  ScopedEnv z("HPCML_ZONE", "ae");
  ScopedEnv d("HPCML_DATASETS", h5);
  auto v = Ingest(dir / "fs.h5", Opts(dir / "in.csv"));
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.status().message().find("read CSV"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
