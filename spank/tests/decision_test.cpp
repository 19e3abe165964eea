#include "hpcml/guard/decision.hpp"

#include <gtest/gtest.h>

#include "test_policy.hpp"

namespace hpcml::guard {
namespace {

class DecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = ParsePolicy(testing::kPolicy, "policy.toml");
    ASSERT_TRUE(p.ok()) << p.status().message();
    policy_ = std::move(p).value();
  }
  // alice, account hpcml-ml, partition batch, 2 GPUs, on an 'ae' node.
  static Request Alice() {
    Request r;
    r.uid = 1001;
    r.user = "alice";
    r.groups = {"alice", "users"};
    r.account = "hpcml-ml";
    r.partition = "batch";
    r.gpus = 2;
    r.node_zone = "ae";
    r.role = "ml-engineer";
    r.zone = "ae";
    r.datasets = {"/data/ae/x.h5"};
    return r;
  }
  Decision D(const Request& r) { return Decide(policy_, r); }
  static void ExpectDeny(const Decision& d, std::string_view needle) {
    EXPECT_FALSE(d.allow);
    EXPECT_NE(d.reason.find(needle), std::string::npos) << d.reason;
  }
  Policy policy_;
};

TEST_F(DecisionTest, AllowsABoundUserInHerZone) {
  Decision d = D(Alice());
  EXPECT_TRUE(d.allow) << d.reason;
  EXPECT_EQ(d.role, "ml-engineer");
  EXPECT_EQ(d.zone, "ae");
}

TEST_F(DecisionTest, Table) {
  struct Row {
    const char* name;
    void (*edit)(Request&);
    bool allow;
    const char* needle;
  } rows[] = {
      {"no zone requested: the node's", [](Request& r) { r.zone.reset(); }, true, ""},
      {"no datasets", [](Request& r) { r.datasets.clear(); }, true, ""},
      {"default role via account binding",
       [](Request& r) {
         r.role.reset();
         r.gpus = 0;
       },
       true, ""},
      {"default role needs its GPUs", [](Request& r) { r.role.reset(); }, false,
       "allows at most 0"},
      {"an account binding without enforced associations",
       [](Request& r) {
         r.user = "bob";  // reader only through account hpcml-ml
         r.role.reset();
         r.gpus = 0;
         r.associations_enforced = false;
       },
       false,
       "role 'reader' comes only from the binding of account 'hpcml-ml', and slurmctld does not "
       "enforce associations (any user may name any account): set "
       "AccountingStorageEnforce=associations in slurm.conf"},
      {"a user binding needs no enforced associations",
       [](Request& r) { r.associations_enforced = false; }, true, ""},
      {"unbound role", [](Request& r) { r.role = "fraud-analyst"; }, false,
       "is not bound to role 'fraud-analyst'"},
      {"bound through a group",
       [](Request& r) {
         r.role = "fraud-analyst";
         r.groups.push_back("fraud");
         r.gpus = 1;
         r.datasets = {"/data/ae/restricted/a.h5"};
       },
       true, ""},
      {"undefined role", [](Request& r) { r.role = "admin"; }, false,
       "role 'admin' is not defined"},
      {"unbound user, other account",
       [](Request& r) {
         r.user = "bob";
         r.account = "hpcml-finance";
         r.role.reset();
       },
       false, "user 'bob' (uid 1001, account 'hpcml-finance') is not bound to role 'reader'"},
      {"zone mismatch", [](Request& r) { r.zone = "eu"; }, false,
       "requested zone 'eu' is not this node's zone 'ae'"},
      {"undeclared node zone",
       [](Request& r) {
         r.node_zone = "us";
         r.zone.reset();
       },
       false, "this node's zone 'us' is not declared"},
      {"dataset of another zone", [](Request& r) { r.datasets = {"/data/eu/y.h5"}; }, false,
       "dataset '/data/eu/y.h5' is in zone 'eu' (policy.toml:"},
      {"restricted classification", [](Request& r) { r.datasets = {"/data/ae/restricted/z"}; },
       false, "classified 'restricted' (policy.toml:11); role 'ml-engineer' allows: internal"},
      {"prefix entry", [](Request& r) { r.datasets = {"/data/ae/fraud-1.h5"}; }, false,
       "classified 'restricted'"},
      {"a directory holding a restricted entry", [](Request& r) { r.datasets = {"/data/ae"}; },
       false,
       "dataset '/data/ae' contains '/data/ae/fraud-', classified 'restricted' (policy.toml:"},
      {"a directory holding only what the role reads",
       [](Request& r) { r.datasets = {"/data/ae/public"}; }, true, ""},
      {"a directory holding another zone's entry",
       [](Request& r) {
         r.role = "fraud-analyst";
         r.groups.push_back("fraud");
         r.gpus = 1;
         r.partition.reset();
         r.datasets = {"/data"};
       },
       false, "matches no [[datasets]] entry"},
      {"one bad dataset among good ones",
       [](Request& r) {
         r.datasets = {"/data/ae/a", "/data/ae/b", "/data/eu/c"};
       },
       false, "'/data/eu/c'"},
      {"unknown dataset", [](Request& r) { r.datasets = {"/scratch/x"}; }, false,
       "matches no [[datasets]] entry"},
      {"too many GPUs", [](Request& r) { r.gpus = 5; }, false,
       "the job has 5 GPUs; role 'ml-engineer' allows at most 4"},
      {"GPU limit is inclusive", [](Request& r) { r.gpus = 4; }, true, ""},
      {"partition not allowed", [](Request& r) { r.partition = "urgent"; }, false,
       "partition 'urgent' is not allowed for role 'ml-engineer'"},
      {"one of several partitions not allowed", [](Request& r) { r.partition = "batch,urgent"; },
       false, "partition 'urgent'"},
      // An empty item of the list is a partition of its own, never skipped.
      {"an empty item after the partitions", [](Request& r) { r.partition = "batch,"; }, false,
       "partition '' is not allowed"},
      {"an empty item between partitions", [](Request& r) { r.partition = "batch,,batch"; }, false,
       "partition '' is not allowed"},
      {"only empty items", [](Request& r) { r.partition = ","; }, false,
       "partition '' is not allowed"},
      {"a blank is not trimmed", [](Request& r) { r.partition = "batch, batch"; }, false,
       "partition ' batch' is not allowed"},
  };
  for (const Row& row : rows) {
    Request r = Alice();
    row.edit(r);
    Decision d = D(r);
    EXPECT_EQ(d.allow, row.allow) << row.name << ": " << d.reason;
    // Every denial carries its class (the audit line's reason_code).
    EXPECT_EQ(d.code.empty(), row.allow) << row.name << ": code '" << d.code << "'";
    if (!row.allow) {
      EXPECT_NE(d.reason.find(row.needle), std::string::npos) << row.name << ": " << d.reason;
    }
  }
}

TEST_F(DecisionTest, ADirectoryIsCheckedWithEverythingBelowIt) {
  // fraud-analyst may read both classifications in ae: all of /data/ae passes.
  Request r = Alice();
  r.role = "fraud-analyst";
  r.groups.push_back("fraud");
  r.gpus = 1;
  r.datasets = {"/data/ae"};
  Decision d = D(r);
  EXPECT_TRUE(d.allow) << d.reason;
  // An ae entry holding an eu entry: the eu part is named.
  auto p = ParsePolicy(R"([zones.ae]
[zones.eu]
[[datasets]]
path = "/data"
zone = "ae"
classification = "internal"
[[datasets]]
path = "/data/eu"
zone = "eu"
classification = "internal"
[[roles]]
name = "r"
zones = ["ae", "eu"]
classifications = ["internal"]
max_gpus = 0
[[bindings]]
user = "u"
roles = ["r"]
[defaults]
role = "r"
)",
                       "nested.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  Request q;
  q.user = "u";
  q.node_zone = "ae";
  q.datasets = {"/data"};
  Decision nested = Decide(*p, q);
  EXPECT_FALSE(nested.allow);
  EXPECT_NE(nested.reason.find("contains '/data/eu', which is in zone 'eu' (nested.toml:"),
            std::string::npos)
      << nested.reason;
}

TEST_F(DecisionTest, NoRoleAndNoDefaultDenies) {
  auto p = ParsePolicy("[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nmax_gpus = 0\n",
                       "p.toml");
  ASSERT_TRUE(p.ok());
  Request r = Alice();
  r.role.reset();
  r.datasets.clear();
  Decision d = Decide(*p, r);
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.reason.find("no --ml-role given"), std::string::npos);
}

TEST_F(DecisionTest, UnknownDatasetsMayBeAllowed) {
  auto p = ParsePolicy(
      "[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nmax_gpus = 0\n"
      "[[bindings]]\nuser = \"alice\"\nroles = [\"r\"]\n"
      "[defaults]\nrole = \"r\"\nunknown_datasets = \"allow\"\n",
      "p.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  Request r = Alice();
  r.role.reset();
  r.gpus = 0;
  r.partition = "anything";
  r.datasets = {"/scratch/x"};
  EXPECT_TRUE(Decide(*p, r).allow);
}

// unknown_datasets = "allow" lets a path outside every entry through, but
// not a directory above entries: "/" or "/data" holds every dataset of the
// policy, and each entry below must pass as it would if named.
TEST_F(DecisionTest, UnknownDatasetsAllowStillChecksEverythingBelow) {
  std::string text = testing::kPolicy;
  const std::string deny = "unknown_datasets = \"deny\"";
  ASSERT_NE(text.find(deny), std::string::npos);
  text.replace(text.find(deny), deny.size(), "unknown_datasets = \"allow\"");
  auto p = ParsePolicy(text, "policy.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  Request r = Alice();
  for (const char* above : {"/", "/data"}) {
    r.datasets = {above};
    Decision d = Decide(*p, r);
    EXPECT_FALSE(d.allow) << above;
    EXPECT_NE(d.reason.find("contains"), std::string::npos) << d.reason;
  }
  r.datasets = {"/data/ae"};  // holds /data/ae/restricted, which ml-engineer may not read
  Decision d = Decide(*p, r);
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.reason.find("classified 'restricted'"), std::string::npos) << d.reason;
  r.datasets = {"/scratch/x"};  // outside every entry, nothing below: allowed
  EXPECT_TRUE(Decide(*p, r).allow) << Decide(*p, r).reason;
}

// On the node the job record's partition is known: an empty one must not
// skip a role's partition rule.
TEST_F(DecisionTest, AnEmptyPartitionDeniesARoleWithPartitions) {
  Request r = Alice();
  r.partition = "";
  ExpectDeny(D(r), "the job has no partition");
  r.partition = "batch,";
  ExpectDeny(D(r), "partition '' is not allowed");
}

TEST_F(DecisionTest, SubmitSideSkipsWhatItCannotKnow) {
  Request r = Alice();
  r.account.reset();
  r.partition.reset();
  r.gpus.reset();
  r.node_zone.reset();
  r.role.reset();  // reader: bound through an account binding, account unknown
  EXPECT_TRUE(D(r).allow) << D(r).reason;
  r.zone = "eu";  // reader may not run in eu
  ExpectDeny(D(r), "role 'reader' may not run in zone 'eu'");
  r.zone.reset();
  r.role = "ml-engineer";
  r.datasets = {"/data/ae/a", "/data/eu/b"};  // no zone known: only classifications checked
  EXPECT_TRUE(D(r).allow);
  r.zone = "ae";
  ExpectDeny(D(r), "is in zone 'eu'");
}

TEST_F(DecisionTest, ErrorsDeny) {
  Decision d = DenyForError(NotFound("/etc/hpcml/policy.toml: No such file or directory"));
  ExpectDeny(d, "/etc/hpcml/policy.toml");
  EXPECT_EQ(d.code, "error_not_found");
  EXPECT_EQ(DenyForError(IoError("disk full"), "audit_log").code, "audit_log");
}

}  // namespace
}  // namespace hpcml::guard

namespace hpcml::guard {
namespace {

TEST(DatasetZones, EachEntryAndEveryEntryBelowADirectory) {
  auto p = ParsePolicy(testing::kPolicy, "policy.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(DatasetZones(*p, {"/data/ae/x.h5"}), (std::vector<std::string>{"ae"}));
  EXPECT_EQ(DatasetZones(*p, {"/data/ae/x.h5", "/data/eu/y.h5"}),
            (std::vector<std::string>{"ae", "eu"}));
  EXPECT_EQ(DatasetZones(*p, {"/data"}), (std::vector<std::string>{"ae", "eu"}));
  EXPECT_TRUE(DatasetZones(*p, {"/scratch/unknown"}).empty());
}

}  // namespace
}  // namespace hpcml::guard
