#include "hpcml/featurecache/report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hpcml::featurecache {
namespace {

VersionInfo V(const std::string& name, std::vector<ParentRef> parents,
              std::vector<SourceRef> sources) {
  VersionInfo v;
  v.name = name;
  v.number = std::stoi(name.substr(1));
  v.rows = 10 * v.number;
  v.feature_names = {"a", "b"};
  v.feature_types = {"int", "float"};
  v.label_name = "y";
  v.entity_name = "id";
  v.timestamp_name = "ts";
  v.created_at = "2024-01-01T00:00:00Z";
  v.created_by = "alice@node";
  v.operation = parents.empty() ? "ingest" : "derive";
  v.transform = R"({"op":"x"})";
  v.parents = std::move(parents);
  v.sources = std::move(sources);
  v.zone = "ae";
  v.classification = "internal";
  v.data_sha256 = std::string(64, static_cast<char>('0' + v.number));
  v.chunk_rows = 16;
  return v;
}

std::vector<VersionInfo> Chain() {
  VersionInfo v1 = V("v1", {}, {{"file:///data/in.csv", std::string(64, 'c')}});
  VersionInfo v2 = V("v2", {{"v1", v1.data_sha256}}, {});
  VersionInfo v3 = V("v3", {{"v2", "stale"}}, {{"file:///data/req.csv", std::string(64, 'd')}});
  return {v1, v2, v3};
}

TEST(Report, VersionListMarksLatest) {
  auto all = Chain();
  std::string s = FormatVersionList(all, "v3");
  EXPECT_NE(s.find("* v3"), std::string::npos);
  EXPECT_NE(s.find("  v1"), std::string::npos);
  EXPECT_NE(s.find("VERSION"), std::string::npos);
}

TEST(Report, InfoTextAndJson) {
  auto all = Chain();
  std::string t = FormatInfo("/x.h5", all[0]);
  EXPECT_NE(t.find("rows:            10"), std::string::npos);
  EXPECT_NE(t.find("source:          file:///data/in.csv"), std::string::npos);
  auto j = nlohmann::json::parse(FormatInfoJson("/x.h5", all[1]));
  EXPECT_EQ(j["version"], "v2");
  EXPECT_EQ(j["parents"][0]["version"], "v1");
  EXPECT_EQ(j["transform"]["op"], "x");  // embedded as JSON, not a string
  EXPECT_EQ(j["feature_types"][1], "float");
}

TEST(Report, LineageTextWalksToSourcesAndFlagsStaleDigests) {
  auto all = Chain();
  std::string t = FormatLineageText(all, "v3");
  EXPECT_EQ(t.rfind("v3  derive", 0), 0u) << t;
  EXPECT_NE(t.find("├─ source file:///data/req.csv"), std::string::npos) << t;
  EXPECT_NE(t.find("└─ v2  derive"), std::string::npos) << t;
  EXPECT_NE(t.find("!! digest differs"), std::string::npos) << t;
  EXPECT_NE(t.find("   └─ v1  ingest"), std::string::npos) << t;
  EXPECT_NE(t.find("source file:///data/in.csv"), std::string::npos) << t;
  auto missing = Chain();
  missing.erase(missing.begin());  // v1 gone
  EXPECT_NE(FormatLineageText(missing, "v2").find("v1  (missing from this file"),
            std::string::npos);
}

TEST(Report, LineageDot) {
  auto all = Chain();
  std::string d = FormatLineageDot(all, "v2");
  EXPECT_EQ(d.rfind("digraph lineage {", 0), 0u);
  EXPECT_NE(d.find("\"v1\" -> \"v2\" [label=\"derive\"]"), std::string::npos) << d;
  EXPECT_NE(d.find("shape=note"), std::string::npos);
  EXPECT_EQ(d.find("\"v3\""), std::string::npos) << "only v2's ancestry";
  std::string everything = FormatLineageDot(all, "");
  EXPECT_NE(everything.find("\"v2\" -> \"v3\""), std::string::npos);
  EXPECT_EQ(everything.back(), '\n');
}

TEST(Report, Diff) {
  auto all = Chain();
  VersionInfo a = all[0], b = all[1];
  b.feature_names = {"b", "c"};
  b.feature_types = {"int", "float"};
  b.label_name = "";
  DiffReport d = DiffVersions(a, b);
  EXPECT_FALSE(d.same_schema);
  EXPECT_FALSE(d.same_data);
  EXPECT_NE(d.text.find("- feature a (int)"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("+ feature c (float)"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("~ feature b: type float -> int"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("~ label: y -> (none)"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("~ rows: 10 -> 20 (+10)"), std::string::npos) << d.text;
  DiffReport same = DiffVersions(a, a);
  EXPECT_TRUE(same.same_schema);
  EXPECT_TRUE(same.same_data);
  VersionInfo c = a;
  std::swap(c.feature_names[0], c.feature_names[1]);
  std::swap(c.feature_types[0], c.feature_types[1]);
  EXPECT_NE(DiffVersions(a, c).text.find("feature order differs"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
