#include "hpcml/featurecache/ingest.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/sha256.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

IngestOptions Opts(const std::string& csv) {
  return CsvIngest(csv);
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
// Pieces of the file parsed at once give the version one thread gives:
// the same rows, kinds, dictionaries (in order of first appearance), string
// entity keys, missing counts and digest; and a bad cell deep in the file is
// named by its line either way.
TEST(Ingest, OnThreadsAsOnOne) {
  TempDir dir;
  std::mt19937 rng(11);
  std::string csv = "id,ts,n,x,grade,ok,y\n";
  const char* grades[] = {"A", "B", "C", "D", "E", "NA"};
  for (int i = 0; i < 40000; ++i) {
    csv += fmt::format(
        "k{},{},{},{},{},{},{}\n", rng() % 3000, 1700000000 + rng() % 1000000,
        rng() % 10 == 0 ? "" : std::to_string(rng() % 100),
        rng() % 7 == 0 ? "nan" : std::to_string(static_cast<double>(rng() % 10000) / 7.0),
        // new categories keep appearing, so the pieces' codes differ
        rng() % 5 == 0 ? fmt::format("g{}", i) : grades[rng() % 6], rng() % 2 ? "true" : "false",
        rng() % 3 == 0 ? "yes" : "no");
  }
  WriteText(dir / "in.csv", csv);
  std::vector<VersionInfo> got;
  for (unsigned threads : {1u, 2u, 5u}) {
    IngestOptions o = Opts(dir / "in.csv");
    o.threads = threads;
    auto v = Ingest(dir / fmt::format("fs{}.h5", threads), o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    got.push_back(*v);
  }
  EXPECT_EQ(got[0].feature_types, (std::vector<std::string>{"int", "float", "category", "bool"}));
  for (size_t k = 1; k < got.size(); ++k) {
    EXPECT_EQ(got[k].data_sha256, got[0].data_sha256);
    EXPECT_EQ(got[k].transform, got[0].transform);  // missing counts included
    EXPECT_EQ(got[k].category_counts, got[0].category_counts);
    EXPECT_EQ(got[k].label_classes, got[0].label_classes);
  }
  csv += "k1,1700000000,12x,1,A,true,no\n";
  WriteText(dir / "bad.csv", csv);
  for (unsigned threads : {1u, 3u}) {
    IngestOptions o = Opts(dir / "bad.csv");
    o.threads = threads;
    o.column_kinds = {{"n", "int"}};
    auto v = Ingest(dir / "bad.h5", o);
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find("bad.csv: line 40002, column 3"), std::string::npos)
        << v.status().message();
  }
}

// An availability column is kept beside the timestamps (not a feature),
// digested and verified; every row needs one.
TEST(Ingest, AvailabilityTimesAreKept) {
  TempDir dir;
  WriteText(dir / "in.csv",
            "id,ts,recorded,a,y\n1,2024-01-01,2024-01-03,1,0\n2,2024-01-02,1704153600,2,1\n");
  IngestOptions o = Opts(dir / "in.csv");
  o.available_column = "recorded";
  auto v = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_names, (std::vector<std::string>{"a"}));
  EXPECT_EQ(v->available_name, "recorded");
  auto fs = FeatureSet::Open(dir / "fs.h5");
  auto r = fs->OpenVersion("v1");
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> at(2);
  ASSERT_TRUE(r->ReadAvailable(0, 2, at.data()).ok());
  EXPECT_EQ(at, (std::vector<int64_t>{1704240000000000, 1704153600000000}));
  EXPECT_TRUE(VerifyVersion(*r).ok());

  WriteText(dir / "gap.csv",
            "id,ts,recorded,a,y\n1,2024-01-01,2024-01-03,1,0\n2,2024-01-02,,2,1\n");
  o = Opts(dir / "gap.csv");
  o.available_column = "recorded";
  auto bad = Ingest(dir / "fs.h5", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gap.csv: line 3, column 3"), std::string::npos)
      << bad.status().message();
  o.available_column = "a";
  o.feature_columns = {"a"};
  EXPECT_NE(Ingest(dir / "fs.h5", o).status().message().find("cannot be both"), std::string::npos);
}

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

  // "NA" can be a real value: with no missing words, only empty cells are,
  // so column a holds text: a category, unless declared a number.
  o.na_values = *NaValues::Parse("");
  auto words = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_EQ(words->feature_types[0], "category");
  o.column_kinds = {{"a", "int"}};
  auto strict = Ingest(dir / "fs.h5", o);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find(
                "line 2, column 4: \"NA\" is not an integer (column \"a\" is int, as --types "
                "says)"),
            std::string::npos)
      << strict.status().message();
}

// A credit table as R's write.csv writes it: row names, every string and
// factor quoted (numeric factors too), NA for missing, a string label; a
// string first appearing on the last line makes its column a category.
TEST(Ingest, TypedColumnsAsRWritesThem) {
  TempDir dir;
  std::string csv =
      "\"\",\"id\",\"ts\",\"term\",\"grade\",\"cents\",\"owner\",\"rate\",\"zip\","
      "\"y\"\n";
  const int rows = 3000;
  for (int r = 1; r <= rows; ++r) {
    const char* term = r % 2 ? "term_36" : "term_60";
    const char* grade = r % 7 == 0 ? "NA" : (r % 3 ? "\"B\"" : "\"A\"");
    const std::string cents = r == 5 ? "" : std::to_string(12345678901LL + r);
    const char* owner = r % 4 ? "TRUE" : "FALSE";
    const std::string zip = r == rows ? "\"unknown\"" : fmt::format("\"{}\"", 10000 + r % 50);
    csv += fmt::format("\"{}\",{},\"2024-01-01\",\"{}\",{},{},{},\"{}.5\",{},\"{}\"\n", r, r, term,
                       grade, cents, owner, r % 10, zip, r % 3 ? "good" : "bad");
  }
  WriteText(dir / "credit.csv", csv);
  auto v = Ingest(dir / "fs.h5", Opts(dir / "credit.csv"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->typed);
  EXPECT_EQ(v->feature_names,
            (std::vector<std::string>{"term", "grade", "cents", "owner", "rate", "zip"}));
  EXPECT_EQ(v->feature_types,
            (std::vector<std::string>{"category", "category", "int", "bool", "float", "category"}));
  EXPECT_EQ(v->label_classes, (std::vector<std::string>{"bad", "good"}));
  auto fs = FeatureSet::Open(dir / "fs.h5");
  auto r = fs->OpenVersion("v1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(VerifyVersion(*r).ok());
  auto cats = r->Categories();
  ASSERT_TRUE(cats.ok());
  EXPECT_EQ((*cats)[0], (std::vector<std::string>{"term_36", "term_60"}));  // first appearance
  EXPECT_EQ((*cats)[1], (std::vector<std::string>{"B", "A"}));
  EXPECT_EQ((*cats)[5].size(), 51u);  // 50 zips and "unknown"
  EXPECT_EQ((*cats)[5].back(), "unknown");
  std::vector<float> x(rows * 6), y(rows);
  std::vector<int64_t> ints(rows);
  ASSERT_TRUE(r->Read(0, rows, x.data(), y.data(), nullptr, nullptr).ok());
  ASSERT_TRUE(r->ReadInts(0, rows, ints.data()).ok());
  EXPECT_EQ(x[0 * 6 + 0], 0.0f);          // row 1: term_36
  EXPECT_EQ(x[1 * 6 + 0], 1.0f);          // row 2: term_60
  EXPECT_TRUE(std::isnan(x[6 * 6 + 1]));  // row 7: grade NA
  EXPECT_EQ(ints[0], 12345678902);        // exact, beyond float32's 2^24
  EXPECT_EQ(ints[4], kIntMissing);        // row 5: empty
  EXPECT_TRUE(std::isnan(x[4 * 6 + 2]));
  EXPECT_EQ(x[0 * 6 + 3], 1.0f);  // TRUE
  EXPECT_EQ(x[3 * 6 + 3], 0.0f);  // FALSE
  EXPECT_EQ(x[0 * 6 + 4], 1.5f);  // a quoted number is a number
  EXPECT_EQ(y[0], 1.0f);          // good
  EXPECT_EQ(y[2], 0.0f);          // bad
  auto tr = nlohmann::json::parse(v->transform);
  EXPECT_EQ(tr["missing_cells"], (nlohmann::json{{"grade", rows / 7}, {"cents", 1}}));
  auto stats = fs->Stats("v1");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->columns[0].frequencies, (std::vector<uint64_t>{rows / 2, rows / 2}));
  EXPECT_EQ(stats->columns[6].frequencies, (std::vector<uint64_t>{rows / 3, rows - rows / 3}));
}

TEST(Ingest, DeclaredKindsAreKeptAndBrokenCellsNamed) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,flag,code,n,y\n1,0,1,7,1,0\n2,0,0,8,2.5,1\n");
  IngestOptions o = Opts(dir / "in.csv");
  o.column_kinds = {{"flag", "bool"}, {"code", "category"}, {"y", "category"}};
  auto v = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"bool", "category", "float"}));
  EXPECT_EQ(v->label_classes, (std::vector<std::string>{"0", "1"}));
  o.column_kinds = {{"n", "int"}};
  auto bad = Ingest(dir / "fs.h5", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "in.csv: line 3, column 5: \"2.5\" is not an integer (column \"n\" is int, as "
                "--types says)"),
            std::string::npos)
      << bad.status().message();
  o.column_kinds = {{"nope", "int"}};
  EXPECT_NE(Ingest(dir / "fs.h5", o).status().message().find("no typed column named \"nope\""),
            std::string::npos);
  o.column_kinds = {{"id", "category"}};
  EXPECT_NE(Ingest(dir / "fs.h5", o).status().message().find("\"id\" is the entity column"),
            std::string::npos);
  o.column_kinds = {{"n", "text"}};
  EXPECT_NE(Ingest(dir / "fs.h5", o).status().message().find("unknown column kind \"text\""),
            std::string::npos);
}

// "NA" is a real category in one column (North America) and missing in
// the others.
TEST(Ingest, MissingWordsPerColumn) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,region,x,y\n1,0,NA,NA,0\n2,0,EU,2,1\n3,0,,3,1\n");
  IngestOptions o = Opts(dir / "in.csv");
  o.column_na_values.emplace("region", *NaValues::Parse(""));
  auto v = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"category", "int"}));
  auto r = FeatureSet::Open(dir / "fs.h5")->OpenVersion("v1");
  EXPECT_EQ((*r->Categories())[0], (std::vector<std::string>{"NA", "EU"}));
  auto tr = nlohmann::json::parse(v->transform);
  EXPECT_EQ(tr["missing_cells"], (nlohmann::json{{"region", 1}, {"x", 1}}));
}

TEST(Ingest, ColumnKindsFromListsAndFiles) {
  auto kinds = ParseColumnKinds("a=int, b = category");
  ASSERT_TRUE(kinds.ok());
  EXPECT_EQ(*kinds, (std::map<std::string, std::string>{{"a", "int"}, {"b", "category"}}));
  EXPECT_FALSE(ParseColumnKinds("a").ok());
  EXPECT_FALSE(ParseColumnKinds("a=int,a=float").ok());
  TempDir dir;
  WriteText(dir / "types.toml", "[columns]\nterm = \"category\"\nowner = \"bool\"\n");
  kinds = LoadColumnKinds(dir / "types.toml");
  ASSERT_TRUE(kinds.ok()) << kinds.status().ToString();
  EXPECT_EQ(kinds->at("owner"), "bool");
  WriteText(dir / "bad.toml", "term = \"category\"\nowner = \"boolean\"\n");
  kinds = LoadColumnKinds(dir / "bad.toml");
  ASSERT_FALSE(kinds.ok());
  EXPECT_NE(kinds.status().message().find("bad.toml:2: column \"owner\""), std::string::npos)
      << kinds.status().message();
  auto na = ParseColumnNaValues("region=");
  ASSERT_TRUE(na.ok());
  EXPECT_TRUE(na->second.words().empty());
  EXPECT_FALSE(ParseColumnNaValues("=NA").ok());
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
      {"id,ts,a,y\n1,0,1,\n", "line 2, column 4: missing label \"\" (every row needs its label)"},
      {"id,ts,a,y\n1,0,1,NA\n", "line 2, column 4: missing label \"NA\""},
      {"id,ts,a,y\n1,0,1,0\n1.5,0,1,0\n", "line 3, column 1: \"1.5\" is not an integer"},
      {"id,ts,a,y\n1,yesterday,1,0\n", "line 2, column 2: \"yesterday\" is not a time"},
      {"id,ts,a,y\n1,0,1\n", "line 2: expected 4 fields as in the header, found 3"},
      {"id,ts,a,y\n1,0,1e39,0\n", "line 2, column 3: \"1e39\" is outside the range of float32"},
      {"id,ts,a,y\n1,0,inf,0\n", "line 2, column 3: \"inf\": infinite values are not allowed"},
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
  IngestOptions o = Opts(dir / "bad.csv");
  o.column_kinds = {{"a", "float"}};
  auto v = Ingest(dir / "fs.h5", o);
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

// Integers float32 cannot hold read back exactly; a column with no value
// at all is noted.
TEST(Ingest, IntegersStayExact) {
  TempDir dir;
  WriteText(dir / "in.csv",
            "id,ts,big,none,y\n1,0,16777217,,0\n2,0,123456789,NA,0\n3,0,9223372036854775807,,1\n");
  std::vector<std::string> warnings;
  auto v = Ingest(dir / "fs.h5", Opts(dir / "in.csv"), &warnings);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"int", "float"}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("\"none\" has no value"), std::string::npos);
  auto r = FeatureSet::Open(dir / "fs.h5")->OpenVersion("v1");
  std::vector<int64_t> ints(3);
  ASSERT_TRUE(r->ReadInts(0, 3, ints.data()).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{16777217, 123456789, INT64_MAX}));
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
