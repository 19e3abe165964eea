// hpcml-fcache end to end: every command, its output and exit status, and
// the error messages users see. Runs the real binary (HPCML_FCACHE_BIN).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

const std::string kBin = HPCML_FCACHE_BIN;

CommandResult Fc(const std::string& args, const std::string& env = "") {
  return RunCommand(env + (env.empty() ? "" : " ") + kBin + " " + args);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h5 = dir / "fs.h5";
    WriteText(dir / "in.csv",
              "id,ts,y,age,score\n"
              "1,2024-01-01T00:00:00Z,1,30,0.5\n"
              "2,2024-01-02T00:00:00Z,0,40,1.5\n"
              "1,2024-01-03T00:00:00Z,1,31,0.25\n"
              "3,2024-01-04T00:00:00Z,0,50,-2\n");
    auto r = Fc("ingest " + h5 + " --csv " + (dir / "in.csv") +
                " --entity id --timestamp ts --label y --zone ae --classification internal");
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_NE(r.output.find("added v1 (4 rows, 2 features, ae/internal"), std::string::npos)
        << r.output;
  }
  TempDir dir;
  std::string h5;
};

TEST_F(CliTest, ListInfoLineageVerify) {
  auto ls = Fc("ls " + h5);
  EXPECT_EQ(ls.status, 0);
  EXPECT_NE(ls.output.find("zone ae, classification internal, 1 version(s), latest v1"),
            std::string::npos);
  EXPECT_NE(ls.output.find("* v1"), std::string::npos);
  auto info = Fc("info " + h5 + " --json");
  ASSERT_EQ(info.status, 0);
  auto j = nlohmann::json::parse(info.output);
  EXPECT_EQ(j["rows"], 4);
  EXPECT_EQ(j["feature_names"], nlohmann::json({"age", "score"}));
  EXPECT_EQ(j["feature_types"], nlohmann::json({"int", "float"}));
  EXPECT_EQ(j["sources"][0]["uri"].get<std::string>().rfind("file:///", 0), 0u);
  EXPECT_EQ(Fc("info " + h5 + " v1").status, 0);
  auto verify = Fc("verify " + h5);
  EXPECT_EQ(verify.status, 0);
  EXPECT_NE(verify.output.find("v1: ok (4 rows"), std::string::npos);
  auto lineage = Fc("lineage " + h5);
  EXPECT_EQ(lineage.status, 0);
  EXPECT_NE(lineage.output.find("source file://"), std::string::npos);
  auto dot = Fc("lineage " + h5 + " --dot");
  EXPECT_EQ(dot.status, 0);
  EXPECT_EQ(dot.output.rfind("digraph lineage {", 0), 0u);
  EXPECT_NE(Fc("--version").output.find("hpcml-fcache "), std::string::npos);
}

TEST_F(CliTest, DeriveAsofDiffExport) {
  auto d = Fc("derive " + h5 + " --select score --standardize --since 2024-01-02");
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("added v2 from v1 (3 rows, 1 features"), std::string::npos) << d.output;
  auto diff = Fc("diff " + h5 + " v1 v2");
  EXPECT_EQ(diff.status, 0);
  EXPECT_NE(diff.output.find("- feature age (int)"), std::string::npos) << diff.output;
  EXPECT_EQ(Fc("diff " + h5 + " v1 v2 --exit-code").status, 3);
  EXPECT_EQ(Fc("diff " + h5 + " v1 v1 --exit-code").status, 0);

  WriteText(dir / "req.csv",
            "who,when,target\n1,2024-01-02T12:00:00Z,7\n1,2023-12-31,8\n3,2024-01-04,9\n");
  auto a = Fc("asof " + h5 + " --from v1 --requests " + (dir / "req.csv") +
              " --entity who --time when --label target --missing drop");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("3 requests, 2 matched, 1 without a row"), std::string::npos) << a.output;
  auto exp = Fc("export " + h5 + " v3");
  ASSERT_EQ(exp.status, 0);
  EXPECT_EQ(exp.output,
            "id,ts,target,age,score\n"
            "1,2024-01-02T12:00:00Z,7,30,0.5\n"
            "3,2024-01-04T00:00:00Z,9,50,-2\n");
  EXPECT_EQ(Fc("export " + h5 + " v1 -o " + (dir / "out.csv")).status, 0);
  EXPECT_EQ(ReadText(dir / "out.csv").substr(0, 18), "id,ts,y,age,score\n");
  auto lineage = Fc("lineage " + h5 + " v3");
  EXPECT_NE(lineage.output.find("└─ v1  ingest"), std::string::npos) << lineage.output;
}

TEST_F(CliTest, BadInputGivesClearErrorsAndNonZeroExit) {
  WriteText(dir / "bad.csv",
            "id,ts,y,age,score\n1,2024-01-01,1,30,0.5\n2,2024-01-02,0,forty,1.5\n");
  auto bad = Fc("ingest " + h5 + " --csv " + (dir / "bad.csv") +
                " --entity id --timestamp ts --classification public --types age=int");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("hpcml-fcache: " + (dir / "bad.csv") +
                            ": line 3, column 4: \"forty\" is not an integer (column \"age\" is "
                            "int, as --types says)"),
            std::string::npos)
      << bad.output;
  auto kind = Fc("ingest " + h5 + " --csv " + (dir / "bad.csv") +
                 " --entity id --timestamp ts --classification public --types age=number");
  EXPECT_EQ(kind.status, 2);
  EXPECT_NE(kind.output.find("--types: \"age=number\": unknown column kind \"number\""),
            std::string::npos)
      << kind.output;
  auto missing = Fc("ls " + (dir / "nope.h5"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(
      missing.output.find("hpcml-fcache: " + (dir / "nope.h5") + ": No such file or directory"),
      std::string::npos)
      << missing.output;
  auto version = Fc("info " + h5 + " v9");
  EXPECT_EQ(version.status, 1);
  EXPECT_NE(version.output.find("version v9 not found (have v1)"), std::string::npos);
  EXPECT_EQ(Fc("ingest " + h5).status, 2) << "usage error";
  EXPECT_EQ(Fc("frobnicate").status, 2);
  auto zone = Fc("ingest " + h5 + " --csv " + (dir / "in.csv") +
                 " --entity id --timestamp ts --zone eu --classification public");
  EXPECT_EQ(zone.status, 1);
  EXPECT_NE(zone.output.find("cannot change zone"), std::string::npos);

  std::string bytes = ReadText(h5);
  WriteText(dir / "trunc.h5", bytes.substr(0, bytes.size() / 3));
  auto trunc = Fc("verify " + (dir / "trunc.h5"));
  EXPECT_EQ(trunc.status, 1);
  EXPECT_NE(trunc.output.find("truncated"), std::string::npos) << trunc.output;
}

TEST_F(CliTest, InvalidUtf8InputIsRefusedWithoutAnAbort) {
  // A Latin-1 column name: a clear error naming file, line and column, exit 1
  // (it used to abort with an uncaught JSON exception).
  WriteText(dir / "latin1.csv", "id,ts,caf\xE9\n1,2024-01-01,1\n");
  auto ing = Fc("ingest " + h5 + " --csv " + (dir / "latin1.csv") +
                " --entity id --timestamp ts --classification internal");
  EXPECT_EQ(ing.status, 1) << ing.output;
  EXPECT_NE(ing.output.find("hpcml-fcache: " + (dir / "latin1.csv") +
                            ": line 1, column 3: not valid UTF-8"),
            std::string::npos)
      << ing.output;
  EXPECT_NE(ing.output.find("fields counted from 1"), std::string::npos) << ing.output;

  // The same in the requests of a point-in-time join.
  WriteText(dir / "req.csv", "id,t\n1,2024-01-05\n2,2024-01-0\xE9\n");
  auto asof = Fc("asof " + h5 + " --requests " + (dir / "req.csv") + " --entity id --time t");
  EXPECT_EQ(asof.status, 1) << asof.output;
  EXPECT_NE(asof.output.find((dir / "req.csv") + ": line 3, column 2: not valid UTF-8"),
            std::string::npos)
      << asof.output;

  // A file name that is not UTF-8 is recorded (its bad byte replaced in the
  // JSON), not a crash.
  const std::string odd = dir / "in\xE9.csv";
  WriteText(odd, ReadText(dir / "in.csv"));
  auto named = Fc("ingest " + h5 + " --csv '" + odd +
                  "' --entity id --timestamp ts --label y --classification internal");
  EXPECT_EQ(named.status, 0) << named.output;
  auto info = Fc("info " + h5 + " --json");
  EXPECT_EQ(info.status, 0) << info.output;
  EXPECT_TRUE(nlohmann::json::accept(info.output)) << info.output;
}

TEST_F(CliTest, VerifyCatchesADigestMismatch) {
  // Flip the stored digest of the labels: verify must say so and fail with
  // 3, a check that found a problem (a file it cannot open is 1, above).
  {
    h5::SilenceErrorPrinting();
    h5::File f(H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5::Dataset d(H5Dopen2(f.get(), "/versions/v1/labels", H5P_DEFAULT));
    ASSERT_TRUE(h5::WriteAttr(d.get(), "sha256", std::string(64, '0')).ok());
  }
  auto r = Fc("verify " + h5);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.output.find("dataset labels: SHA-256 mismatch"), std::string::npos) << r.output;
}

TEST_F(CliTest, GuardedJobIsCheckedWithNoWayAround) {
  std::string canonical = *CanonicalPath(h5, true);
  auto denied = Fc("ls " + h5, "HPCML_ZONE=ae HPCML_DATASETS=/data/other");
  EXPECT_EQ(denied.status, 1);
  EXPECT_NE(denied.output.find("access denied"), std::string::npos) << denied.output;
  auto zone = Fc("ls " + h5, "HPCML_ZONE=eu HPCML_DATASETS=" + canonical);
  EXPECT_EQ(zone.status, 1);
  EXPECT_NE(zone.output.find("zone 'ae' but this job runs in zone 'eu'"), std::string::npos);
  EXPECT_EQ(Fc("ls " + h5, "HPCML_ZONE=ae HPCML_DATASETS=" + canonical).status, 0);
  auto stdout_export = Fc("export " + h5, "HPCML_ZONE=ae HPCML_DATASETS=" + canonical);
  EXPECT_EQ(stdout_export.status, 1);
  EXPECT_NE(stdout_export.output.find("export to standard output is refused"), std::string::npos);
  auto outside =
      Fc("export " + h5 + " -o " + (dir / "leak.csv"), "HPCML_ZONE=ae HPCML_DATASETS=" + canonical);
  EXPECT_EQ(outside.status, 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "leak.csv"));
}

// A real table as R's write.csv wrote it, unedited: mlbench's HouseVotes84
// (435 rows, 16 y/n votes with NA, the party as a string label) with an id
// and a timestamp column added in R (tests/data/house_votes84.csv). It goes
// through ingest, stats, derive, drift, validate, asof and export with no
// hand editing; the counts below are R's own (table(), colSums(is.na())).
TEST_F(CliTest, RealTableFromRThroughEveryCommand) {
  const std::string csv = std::string(HPCML_FCACHE_TEST_DATA) + "/house_votes84.csv";
  const std::string votes = dir / "votes.h5";
  auto in = Fc("ingest " + votes + " --csv " + csv +
               " --entity id --timestamp ts --label Class --zone ae --classification internal");
  ASSERT_EQ(in.status, 0) << in.output;
  EXPECT_NE(in.output.find("added v1 (435 rows, 16 features"), std::string::npos) << in.output;
  EXPECT_NE(in.output.find("kinds: 16 category (V1 2, V2 2,"), std::string::npos) << in.output;
  EXPECT_NE(in.output.find("label classes (2): democrat, republican"), std::string::npos);
  EXPECT_NE(in.output.find("V1 12, V2 48,"), std::string::npos) << in.output;
  EXPECT_NE(in.output.find("V16 104"), std::string::npos) << in.output;

  auto stats = Fc("stats " + votes + " --json");
  ASSERT_EQ(stats.status, 0) << stats.output;
  auto js = nlohmann::json::parse(stats.output);
  EXPECT_EQ(js["columns"][0]["name"], "V1");
  EXPECT_EQ(js["columns"][0]["missing"], 12);
  EXPECT_EQ(js["columns"][0]["top"][0], (nlohmann::json{{"value", "n"}, {"rows", 236}}));
  EXPECT_EQ(js["columns"][0]["top"][1], (nlohmann::json{{"value", "y"}, {"rows", 187}}));
  EXPECT_EQ(js["columns"][16]["name"], "Class");
  EXPECT_EQ(js["columns"][16]["top"][0], (nlohmann::json{{"value", "democrat"}, {"rows", 267}}));

  auto imputed = Fc("derive " + votes + " --impute");
  ASSERT_EQ(imputed.status, 0) << imputed.output;
  auto info = nlohmann::json::parse(Fc("info " + votes + " v2 --json").output);
  EXPECT_EQ(info["transform"]["impute"]["V1"], 0.0) << "V1's most frequent value, n, is code 0";
  auto st2 = nlohmann::json::parse(Fc("stats " + votes + " v2 --json").output);
  for (const auto& c : st2["columns"]) EXPECT_EQ(c["missing"], 0) << c["name"];

  // Two time splits of the same votes: the categories move little.
  ASSERT_EQ(Fc("derive " + votes + " --from v1 --until 2024-01-31").status, 0);
  ASSERT_EQ(Fc("derive " + votes + " --from v1 --since 2024-01-31").status, 0);
  auto drift = Fc("drift " + votes + " v3 v4 --json");
  ASSERT_TRUE(drift.status == 0 || drift.status == 3) << drift.output;
  auto jd = nlohmann::json::parse(drift.output);
  EXPECT_EQ(jd["columns"][0]["kind"], "category");
  EXPECT_EQ(jd["columns"][0]["unseen"], 0.0);

  WriteText(dir / "votes_rules.toml", "[features.V1]\nallowed = [\"y\", \"n\"]\n");
  EXPECT_EQ(Fc("validate " + votes + " v1 --rules " + (dir / "votes_rules.toml")).status, 0);
  WriteText(dir / "yes_only.toml", "[features.V1]\nallowed = [\"y\"]\n");
  auto broken = Fc("validate " + votes + " v1 --rules " + (dir / "yes_only.toml"));
  EXPECT_EQ(broken.status, 3) << broken.output;
  EXPECT_NE(broken.output.find("V1: 1 category not allowed: \"n\" (236 rows)"), std::string::npos)
      << broken.output;

  WriteText(dir / "req.csv",
            "\"id\",\"at\",\"outcome\"\n1,\"2024-03-01\",\"kept\"\n"
            "2,\"2024-03-01\",\"lost\"\n9999,\"2024-03-01\",\"kept\"\n");
  auto asof = Fc("asof " + votes + " --from v1 --requests " + (dir / "req.csv") +
                 " --entity id --time at --label outcome");
  ASSERT_EQ(asof.status, 0) << asof.output;
  auto ja = nlohmann::json::parse(Fc("info " + votes + " v5 --json").output);
  EXPECT_EQ(ja["label_classes"], (nlohmann::json{"kept", "lost"}));
  EXPECT_EQ(ja["feature_types"][0], "category");

  auto out = Fc("export " + votes + " v1 -o " + (dir / "votes_out.csv"));
  ASSERT_EQ(out.status, 0) << out.output;
  auto again = Fc("ingest " + votes + " --csv " + (dir / "votes_out.csv") +
                  " --entity id --timestamp ts --label Class --classification internal");
  ASSERT_EQ(again.status, 0) << again.output;
  auto v1 = nlohmann::json::parse(Fc("info " + votes + " v1 --json").output);
  auto v6 = nlohmann::json::parse(Fc("info " + votes + " v6 --json").output);
  EXPECT_EQ(v6["data_sha256"], v1["data_sha256"]) << "export -> ingest is lossless";
}

}  // namespace
}  // namespace hpcml::featurecache
