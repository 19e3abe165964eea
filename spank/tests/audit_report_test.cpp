#include "hpcml/guard/audit_report.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/sha256.hpp"
#include "hpcml/guard/audit.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

AuditRecord Rec(const std::string& user, const std::string& zone, std::vector<std::string> datasets,
                bool allow, const std::string& reason) {
  AuditRecord r;
  r.context = "node";
  r.enforce = "mount";
  r.cluster = "c";
  r.node = zone == "eu" ? "n3" : "n1";
  r.job_id = "7";
  r.step_id = "0";
  r.uid = 1001;
  r.user = user;
  r.role = "ml-engineer";
  r.zone = zone;
  r.datasets = std::move(datasets);
  r.allow = allow;
  r.reason = reason;
  return r;
}

// Denial reasons as spank/src/decision.cpp words them.
const char* kClassified =
    "dataset '/data/ae/customers/c.h5' is classified 'restricted' (/etc/hpcml/policy.toml:21); "
    "role 'ml-engineer' allows: internal, public";
const char* kOtherZone =
    "dataset '/data/eu/x.h5' is in zone 'eu' (/etc/hpcml/policy.toml:9), not in zone 'ae'";

class AuditReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("guard_audit_report_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "audit.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Six decisions with the real writer: two users, two zones, allows and denials.
  void WriteSix() {
    const std::vector<AuditRecord> recs = {
        Rec("alice", "ae", {"/data/ae/fraud.h5"}, true, "role 'ml-engineer' in zone 'ae'"),
        Rec("bob", "ae", {"/data/ae/customers/c.h5"}, false, kClassified),
        Rec("alice", "ae", {"/data/ae"}, true, "ok"),
        Rec("carol", "eu", {"/data/eu/x.h5"}, true, "ok"),
        Rec("bob", "ae", {"/data/eu/x.h5"}, false, kOtherZone),
        Rec("alice", "ae", {"/data/ae/fraud.h5", "/data/ae/b.h5"}, true, "ok"),
    };
    for (const AuditRecord& r : recs) ASSERT_TRUE(AppendAudit(path_, r).ok());
  }
  std::vector<std::string> Lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    ASSERT_TRUE(WriteFileAtomic(path, text).ok());
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(AuditReportTest, ReadsEveryDecisionOfARealLog) {
  WriteSix();
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->intact());
  ASSERT_EQ(r->entries.size(), 6u);
  EXPECT_EQ(r->lines, 6u);
  const AuditEntry& e = r->entries[1];
  EXPECT_EQ(e.user, "bob");
  EXPECT_EQ(e.decision, "deny");
  EXPECT_EQ(e.zone, "ae");
  EXPECT_EQ(e.node, "n1");
  EXPECT_EQ(e.role, "ml-engineer");
  EXPECT_EQ(e.uid, "1001");
  EXPECT_EQ(e.datasets, std::vector<std::string>{"/data/ae/customers/c.h5"});
  EXPECT_EQ(e.reason, kClassified);
  EXPECT_EQ(e.chain, "ok");
  EXPECT_EQ(e.line, 2u);
  EXPECT_EQ(*e.seq, 1u);
  EXPECT_GT(e.time_ms, 1700000000000);
  EXPECT_EQ(e.policy_sha256, "");  // this writer records none
  for (std::size_t i = 1; i < r->entries.size(); ++i)
    EXPECT_LE(r->entries[i - 1].time_ms, r->entries[i].time_ms);
}

TEST_F(AuditReportTest, FiltersByUserDatasetZoneDecisionAndTime) {
  WriteSix();
  auto count = [&](const AuditFilter& f) {
    auto r = ReadAuditReport({path_}, f);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->entries.size() : 0;
  };
  AuditFilter f;
  f.users = {"alice"};
  EXPECT_EQ(count(f), 3u);
  f.users = {"alice", "carol"};
  EXPECT_EQ(count(f), 4u);
  // Who read /data/ae/fraud.h5: the jobs that named it, and the one given all of /data/ae.
  f = {};
  f.datasets = {"/data/ae/fraud.h5"};
  EXPECT_EQ(count(f), 3u);
  f.datasets = {"/data/ae/"};  // a prefix: everything below it, trailing slash or not
  EXPECT_EQ(count(f), 4u);
  f.datasets = {"/data/a"};  // component-wise, not a string prefix
  EXPECT_EQ(count(f), 0u);
  f = {};
  f.zones = {"eu"};
  EXPECT_EQ(count(f), 1u);
  f = {};
  f.decision = "deny";
  EXPECT_EQ(count(f), 2u);
  f.users = {"alice"};
  EXPECT_EQ(count(f), 0u);
  // Period: [since, until) against the logged times.
  auto all = ReadAuditReport({path_});
  ASSERT_TRUE(all.ok());
  f = {};
  f.since_ms = all->entries[0].time_ms + 1'000'000;
  EXPECT_EQ(count(f), 0u);
  f.since_ms = all->entries[0].time_ms - 1;
  EXPECT_EQ(count(f), 6u);
  f.until_ms = all->entries[0].time_ms;
  EXPECT_EQ(count(f), 0u);
}

TEST_F(AuditReportTest, RotatedFilesInAnyOrderAndSeveralLogs) {
  WriteSix();
  fs::rename(path_, path_ + ".2");
  ASSERT_TRUE(AppendAudit(path_, Rec("dave", "ae", {"/data/ae/d.h5"}, true, "ok")).ok());
  fs::rename(path_, path_ + ".1");
  ASSERT_TRUE(AppendAudit(path_, Rec("erin", "ae", {"/data/ae/e.h5"}, true, "ok")).ok());
  // A second node's log, copied beside it.
  const std::string other = (dir_ / "node3.jsonl").string();
  ASSERT_TRUE(AppendAudit(other, Rec("carol", "eu", {"/data/eu/y.h5"}, true, "ok")).ok());
  // As a glob names them: the side files are skipped.
  auto r = ReadAuditReport({path_, other, path_ + ".head", path_ + ".2", path_ + ".1",
                            path_ + ".repeat", other + ".head"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->logs.size(), 2u);
  EXPECT_EQ(r->logs[0].files, (std::vector<std::string>{path_ + ".2", path_ + ".1", path_}));
  EXPECT_TRUE(r->intact());
  EXPECT_EQ(r->entries.size(), 9u);
  EXPECT_EQ(r->lines, 9u);
  // The current log alone starts mid-chain: still intact (older files rotated away).
  auto current = ReadAuditReport({path_});
  ASSERT_TRUE(current.ok());
  EXPECT_TRUE(current->intact());
  EXPECT_EQ(current->logs[0].verify.first_seq, 7u);
  // A rotated file missing from the middle breaks the chain.
  auto gap = ReadAuditReport({path_ + ".2", path_});
  ASSERT_TRUE(gap.ok());
  EXPECT_FALSE(gap->intact());
}

TEST_F(AuditReportTest, ATamperedLineIsFlagged) {
  WriteSix();
  auto lines = Lines(path_);
  // Bob's denial turned into an allow.
  const std::string from = "\"decision\":\"deny\"";
  lines[1].replace(lines[1].find(from), from.size(), "\"decision\":\"allow\"");
  WriteLines(path_, lines);
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->intact());
  ASSERT_EQ(r->entries.size(), 6u);
  EXPECT_EQ(r->entries[1].decision, "allow");
  EXPECT_EQ(r->entries[1].chain, "bad");
  EXPECT_EQ(r->entries[0].chain, "unverified");
  EXPECT_EQ(r->entries[5].chain, "unverified");
  const std::string table = FormatAuditTable(*r);
  EXPECT_NE(table.find("NOT intact"), std::string::npos) << table;
  // Garbage in the log: counted, flagged, the rest still read.
  lines = Lines(path_);
  lines.insert(lines.begin() + 3, "not json at all");
  WriteLines(path_, lines);
  r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->unreadable, 1u);
  EXPECT_EQ(r->entries.size(), 6u);
}

// Issue 32: metrics use the line's reason_code, not its wording (which
// names paths and may change between guard versions).
TEST_F(AuditReportTest, MetricsUseTheLinesReasonCode) {
  AuditRecord deny = Rec("bob", "ae", {"/data/ae/customers/c.h5"}, false, kClassified);
  deny.reason_code = "gpus";  // against the wording, to see which one counts
  ASSERT_TRUE(AppendAudit(path_, deny).ok());
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].reason_code, "gpus");
  const std::string metrics = FormatAuditMetrics(*r);
  EXPECT_NE(metrics.find("reason=\"gpus\""), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("dataset_classification"), std::string::npos) << metrics;
}

TEST_F(AuditReportTest, RepeatedDenialsCountWithTheirDecision) {
  AuditRecord deny = Rec("bob", "ae", {"/data/ae/customers/c.h5"}, false, kClassified);
  for (int i = 0; i < 5; ++i) {
    deny.job_id = std::to_string(500 + i);
    ASSERT_TRUE(AppendAudit(path_, deny).ok());
  }
  ASSERT_TRUE(AppendAudit(path_, Rec("alice", "ae", {"/data/ae/a.h5"}, true, "ok")).ok());
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entries.size(), 3u);  // the denial, its repeat summary, the allow
  EXPECT_EQ(r->entries[1].count, 4u);
  EXPECT_EQ(r->entries[1].user, "bob");
  EXPECT_EQ(r->entries[1].decision, "deny");
  EXPECT_EQ(r->entries[1].job_id, "504");
  EXPECT_EQ(r->entries[1].datasets, deny.datasets);
  EXPECT_EQ(r->entries[1].chain, "ok");
  const std::string metrics = FormatAuditMetrics(*r);
  EXPECT_NE(metrics.find("hpcml_guard_decisions_total{decision=\"deny\",reason=\"dataset_"
                         "classification\",zone=\"ae\",context=\"node\"} 5\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("hpcml_guard_decisions_total{decision=\"allow\",reason=\"none\",zone="
                         "\"ae\",context=\"node\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("hpcml_guard_audit_chain_intact{log=\"" + path_ + "\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("# TYPE hpcml_guard_decisions_total counter\n"), std::string::npos);
}

// Lines of a newer guard: extra fields, the policy digest and version.
TEST_F(AuditReportTest, ReadsFieldsItDoesNotKnowAndThePolicyDigest) {
  std::vector<std::string> lines;
  std::string prev(64, '0');
  for (int i = 0; i < 2; ++i) {
    nlohmann::ordered_json j = {{"seq", i},
                                {"time", "2026-11-17T08:00:0" + std::to_string(i) + ".000Z"},
                                {"context", "node"},
                                {"node", "n1"},
                                {"user", "alice"},
                                {"zone", "ae"},
                                {"datasets", {"/data/ae/x.h5"}},
                                {"decision", "allow"},
                                {"reason", "ok"},
                                {"version", "0.2.0"},
                                {"policy_sha256", std::string(64, 'a')},
                                {"something_new", {{"nested", true}}},
                                {"prev", prev}};
    lines.push_back(j.dump());
    prev = Sha256::Hex(lines.back());
  }
  WriteLines(path_, lines);
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->intact());
  ASSERT_EQ(r->entries.size(), 2u);
  EXPECT_EQ(r->entries[0].policy_sha256, std::string(64, 'a'));
  EXPECT_EQ(r->entries[0].version, "0.2.0");
  EXPECT_EQ(r->entries[1].time_ms, 1794902401000);
  EXPECT_NE(FormatAuditTable(*r).find("aaaaaaaaaaaa "), std::string::npos);
  // "who read /data/ae/... last week": a fixed week around those lines.
  AuditFilter f;
  f.datasets = {"/data/ae"};
  f.since_ms = *ParseAuditTime("--since", "2026-11-16", 0);
  f.until_ms = *ParseAuditTime("--until", "2026-11-23", 0);
  r = ReadAuditReport({path_}, f);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->entries.size(), 2u);
}

TEST_F(AuditReportTest, CsvAndJsonShapes) {
  WriteSix();
  auto r = ReadAuditReport({path_});
  ASSERT_TRUE(r.ok());
  const std::string csv = FormatAuditCsv(*r);
  std::istringstream in(csv);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header,
            "time,decision,count,user,uid,role,zone,node,cluster,job_id,step_id,context,enforce,"
            "datasets,policy_sha256,version,reason,chain,file,line,seq");
  // Fields outside quotes: 21 per row; the two-dataset row and the reasons
  // with commas are quoted.
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    ++rows;
    int fields = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++fields;
    }
    EXPECT_EQ(fields, 21) << line;
  }
  EXPECT_EQ(rows, 6);
  EXPECT_NE(csv.find(",\"/data/ae/fraud.h5,/data/ae/b.h5\","), std::string::npos) << csv;
  const auto j = nlohmann::json::parse(FormatAuditJson(*r));
  EXPECT_EQ(j["format"], "hpcml-audit-report/1");
  EXPECT_EQ(j["intact"], true);
  ASSERT_EQ(j["logs"].size(), 1u);
  EXPECT_EQ(j["logs"][0]["files"][0], path_);
  EXPECT_EQ(j["logs"][0]["problems"].size(), 0u);
  ASSERT_EQ(j["decisions"].size(), 6u);
  EXPECT_EQ(j["decisions"][1]["user"], "bob");
  EXPECT_EQ(j["decisions"][1]["datasets"][0], "/data/ae/customers/c.h5");
  EXPECT_EQ(j["decisions"][1]["chain"], "ok");
  EXPECT_EQ(j["decisions"][1]["seq"], 1);
}

TEST(AuditReport, ParsesTimesAndAges) {
  const std::int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*ParseAuditTime("--since", "7d", now), now - 7 * 86'400'000LL);
  EXPECT_EQ(*ParseAuditTime("--since", "12h", now), now - 12 * 3'600'000LL);
  EXPECT_EQ(*ParseAuditTime("--since", "30m", now), now - 30 * 60'000LL);
  EXPECT_EQ(*ParseAuditTime("--since", "2w", now), now - 14 * 86'400'000LL);
  EXPECT_EQ(*ParseAuditTime("--since", "2026-11-17T08:00:00Z", now), 1794902400000);
  EXPECT_EQ(*ParseAuditTime("--since", "2026-11-17T10:00:00+02:00", now), 1794902400000);
  for (const char* bad : {"", "7", "7y", "d", "last week", "2026-11-17T25:00"}) {
    auto t = ParseAuditTime("--until", bad, now);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find(std::string("--until '") + bad + "'"), std::string::npos)
        << t.status().message();
  }
}

TEST(AuditReport, ClassifiesReasons) {
  EXPECT_EQ(ReasonClass("allow", "anything"), "none");
  EXPECT_EQ(ReasonClass("deny", kClassified), "dataset_classification");
  EXPECT_EQ(ReasonClass("deny", kOtherZone), "dataset_zone");
  EXPECT_EQ(
      ReasonClass("deny",
                  "dataset '/data/x' matches no [[datasets]] entry in /etc/hpcml/policy.toml"),
      "dataset_unknown");
  EXPECT_EQ(ReasonClass("deny", "user 'bob' (uid 1002) is not bound to role 'admin'"),
            "role_unbound");
  EXPECT_EQ(ReasonClass("deny", "role 'x' is not defined in /etc/hpcml/policy.toml"),
            "role_unknown");
  EXPECT_EQ(ReasonClass("deny", "no --ml-role given and the policy has no [defaults] role"),
            "role_missing");
  EXPECT_EQ(ReasonClass("deny", "role 'r' may not run in zone 'eu' (allowed: ae; p.toml:3)"),
            "role_zone");
  EXPECT_EQ(ReasonClass("deny", "requested zone 'eu' is not this node's zone 'ae'"), "zone");
  EXPECT_EQ(ReasonClass("deny", "the job has 8 GPUs; role 'r' allows at most 4 (p.toml:3)"),
            "gpus");
  EXPECT_EQ(ReasonClass("deny", "partition 'x' is not allowed for role 'r' (allowed: a; p:1)"),
            "partition");
  EXPECT_EQ(ReasonClass("deny", "task: the task is not in its step's dataset view"), "task");
  EXPECT_EQ(ReasonClass("deny", "audit log: write /var/log/x: No space left on device"),
            "audit_log");
  EXPECT_EQ(ReasonClass("deny", "/etc/hpcml/policy.toml: not owned by root"), "policy");
  EXPECT_EQ(ReasonClass("deny", "something new"), "other");
}

TEST(AuditReport, RefusesCompressedAndMissingFiles) {
  auto r = ReadAuditReport({"/var/log/hpcml/audit.jsonl.3.gz"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("audit.jsonl.3.gz: compressed"), std::string::npos);
  r = ReadAuditReport({"/nonexistent/audit.jsonl"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/audit.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::guard
