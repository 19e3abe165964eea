#include "hpcml/guard/policy.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hpcml/common/sha256.hpp"
#include "test_policy.hpp"

namespace hpcml::guard {
namespace {

Policy MustParse(std::string_view text) {
  auto p = ParsePolicy(text, "policy.toml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

// The error of parsing `text`; fails the test if it parses.
std::string ErrorOf(std::string_view text) {
  auto p = ParsePolicy(text, "policy.toml");
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? std::string() : p.status().message();
}

TEST(Policy, ParsesTheFullFormat) {
  Policy p = MustParse(testing::kPolicy);
  EXPECT_EQ(p.zones().size(), 2u);
  EXPECT_EQ(p.zones().at("ae"), "UAE");
  EXPECT_EQ(p.datasets().size(), 4u);
  EXPECT_EQ(p.roles().size(), 3u);
  EXPECT_EQ(p.roles().at("ml-engineer").max_gpus, 4u);
  EXPECT_TRUE(p.roles().at("ml-engineer").partitions->count("batch"));
  EXPECT_FALSE(p.roles().at("fraud-analyst").partitions.has_value());
  EXPECT_EQ(p.bindings().size(), 3u);
  EXPECT_EQ(p.default_role(), "reader");
  EXPECT_EQ(p.unknown_datasets(), UnknownDatasets::kDeny);
}

TEST(Policy, TheShippedExampleParses) {
  std::ifstream in(HPCML_GUARD_EXAMPLE_POLICY);
  ASSERT_TRUE(in) << HPCML_GUARD_EXAMPLE_POLICY;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = ParsePolicy(text, HPCML_GUARD_EXAMPLE_POLICY);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->MatchDataset("/data/ae/fraud-2024.h5")->classification, "restricted");
  EXPECT_EQ(p->default_role(), "reader");
}

// The digest names the exact text parsed (audit lines and the slurmd log
// carry it): one byte more is another policy.
TEST(Policy, DigestIsTheSha256OfTheText) {
  auto p = ParsePolicy(testing::kPolicy, "policy.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->sha256(), Sha256::Hex(testing::kPolicy));
  EXPECT_EQ(p->sha256().size(), 64u);
  auto q = ParsePolicy(std::string(testing::kPolicy) + "\n", "policy.toml");
  ASSERT_TRUE(q.ok());
  EXPECT_NE(q->sha256(), p->sha256());
}

TEST(Policy, EntriesBelowADirectory) {
  auto p = ParsePolicy(testing::kPolicy, "policy.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto paths = [&](std::string_view dir) {
    std::vector<std::string> out;
    for (const DatasetEntry& e : p->EntriesBelow(dir)) out.emplace_back(e.path);
    return out;
  };
  EXPECT_EQ(paths("/data/ae"),
            (std::vector<std::string>{"/data/ae/fraud-", "/data/ae/restricted"}));
  EXPECT_EQ(paths("/data/ae/"), paths("/data/ae"));
  EXPECT_EQ(paths("/data"), (std::vector<std::string>{"/data/ae", "/data/ae/fraud-",
                                                      "/data/ae/restricted", "/data/eu"}));
  EXPECT_TRUE(paths("/data/ae/restricted").empty());  // not itself
  EXPECT_TRUE(paths("/data/a").empty());              // "/data/ae" is not below "/data/a"
  EXPECT_EQ(paths("/").size(), 4u);
}

TEST(Policy, MatchesTheMostSpecificEntry) {
  Policy p = MustParse(testing::kPolicy);
  auto cls = [&](std::string_view path) {
    auto e = p.MatchDataset(path);
    return e ? fmt::format("{}@{}", e->classification, e->zone) : std::string("none");
  };
  EXPECT_EQ(cls("/data/ae"), "internal@ae");
  EXPECT_EQ(cls("/data/ae/x.h5"), "internal@ae");
  EXPECT_EQ(cls("/data/ae/restricted"), "restricted@ae");
  EXPECT_EQ(cls("/data/ae/restricted/deep/x.h5"), "restricted@ae");
  EXPECT_EQ(cls("/data/ae/fraud-2024.h5"), "restricted@ae");
  EXPECT_EQ(cls("/data/ae/fraud-2024/part0.h5"), "restricted@ae");
  EXPECT_EQ(cls("/data/ae/fraud.h5"), "internal@ae");  // not the prefix "fraud-"
  EXPECT_EQ(cls("/data/eu/y"), "internal@eu");
  // A component boundary: /data/aexfil is not inside /data/ae.
  EXPECT_EQ(cls("/data/aexfil/y"), "none");
  EXPECT_EQ(cls("/data"), "none");
  EXPECT_EQ(cls("/"), "none");
  EXPECT_EQ(cls("relative"), "none");
}

// The exact-path index (DatasetTable): empty in a default policy, and probed
// past colliding entries.
TEST(Policy, ExactEntriesAmongManyAndInADefaultPolicy) {
  EXPECT_EQ(Policy().MatchDataset("/data/ae"), std::nullopt);
  std::string text = "[zones.ae]\n";
  for (int i = 0; i < 1000; ++i)
    text += "[[datasets]]\npath = \"/d/" + std::to_string(i) +
            "\"\nzone = \"ae\"\nclassification = \"c" + std::to_string(i) + "\"\n";
  Policy p = MustParse(text);
  for (int i = 0; i < 1000; ++i) {
    auto e = p.MatchDataset("/d/" + std::to_string(i) + "/x");
    ASSERT_TRUE(e) << i;
    EXPECT_EQ(e->classification, "c" + std::to_string(i));
  }
  EXPECT_EQ(p.MatchDataset("/d/1000"), std::nullopt);
  EXPECT_EQ(p.MatchDataset("/d"), std::nullopt);
}

TEST(Policy, BindingsByUserGroupAndAccount) {
  Policy p = MustParse(testing::kPolicy);
  EXPECT_TRUE(p.IsBound("ml-engineer", "alice", {}, std::string("x")));
  EXPECT_FALSE(p.IsBound("ml-engineer", "bob", {"users"}, std::string("hpcml-ml")));
  EXPECT_TRUE(p.IsBound("fraud-analyst", "bob", {"users", "fraud"}, std::string("x")));
  EXPECT_TRUE(p.IsBound("reader", "bob", {}, std::string("hpcml-ml")));
  EXPECT_FALSE(p.IsBound("reader", "bob", {}, std::string("hpcml-finance")));
  // Unknown account (submit side): possibly bound when an account binding names the role.
  EXPECT_TRUE(p.IsBound("reader", "bob", {}, std::nullopt));
  EXPECT_FALSE(p.IsBound("fraud-analyst", "bob", {}, std::nullopt));
}

TEST(Policy, BindsGroupsOnlyWithAGroupBinding) {
  EXPECT_TRUE(MustParse(testing::kPolicy).binds_groups());
  Policy no_groups = MustParse(R"(
[zones.ae]
[[roles]]
name = "r"
zones = ["ae"]
classifications = []
max_gpus = 0
[[bindings]]
user = "alice"
roles = ["r"]
)");
  EXPECT_FALSE(no_groups.binds_groups());
}

TEST(Policy, ErrorsNameFileLineAndKey) {
  struct Case {
    std::string text;
    std::string needle;
  } cases[] = {
      {"[zones.ae]\ncolour = 1\n", "policy.toml:2: [zones.ae]: unknown key 'colour'"},
      {"[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nmax_gpu = 1\n",
       "policy.toml:5: [[roles]]: unknown key 'max_gpu'"},
      {"[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nmax_gpus = -1\n",
       "policy.toml:5: [[roles]] 'r' key 'max_gpus'"},
      {"[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nmax_gpus = \"4\"\n",
       "policy.toml:5: [[roles]] 'r' key 'max_gpus'"},
      {"[zones.ae]\n[[roles]]\nname = \"r\"\nzones = [\"xx\"]\nmax_gpus = 1\n",
       "policy.toml:4: [[roles]] 'r' key 'zones': zone 'xx' is not declared"},
      {"[zones.ae]\n[[roles]]\nname = \"r\"\nmax_gpus = 1\n",
       "policy.toml:2: [[roles]] 'r': missing key 'zones'"},
      {"[zones.ae]\n\n[[datasets]]\npath = \"/d\"\nzone = \"eu\"\nclassification = \"c\"\n",
       "policy.toml:5: [[datasets]] key 'zone': zone 'eu' is not declared"},
      {"[zones.ae]\n[[datasets]]\npath = \"d\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "policy.toml:3: [[datasets]] key 'path': 'd' is not an absolute path"},
      {"[zones.ae]\n[[datasets]]\npath = \"/a/../b\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "'.' and '..' are not allowed"},
      {"[zones.ae]\n[[datasets]]\npath = \"/a*/b\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "'*' is only allowed at the end"},
      {"[zones.ae]\n[[datasets]]\npath = \"/\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "'/': the file system root cannot be a dataset"},
      {"[zones.ae]\n[view]\nroots = [\"/data/ae\", \"/\"]\n",
       "policy.toml:3: [view] key 'roots': '/': the file system root cannot be a dataset"},
      {"[zones.ae]\n[view]\nroots = [\"/data/ae-*\"]\n", "a root is a directory, not a prefix"},
      {"[zones.ae]\nnodes = [\"node[1-\"]\n", "[zones.ae] key 'nodes': 'node[1-': one [ranges]"},
      {"[zones.ae]\nnodes = [\"node[3-1]\"]\n", "bad range '3-1'"},
      // Every item of a range list counts: an empty one is a bad range.
      {"[zones.ae]\nnodes = [\"node[]\"]\n", "'node[]': bad range ''"},
      {"[zones.ae]\nnodes = [\"node[1,,2]\"]\n", "'node[1,,2]': bad range ''"},
      {"[zones.ae]\nnodes = [\"node[1,]\"]\n", "'node[1,]': bad range ''"},
      {"[zones.ae]\nnodes = [\"node[1, 2]\"]\n", "'node[1, 2]': bad range ' 2'"},
      {"[zones.ae]\nnodes = [\"no de\"]\n", "a character other than"},
      {"[zones.ae]\n[view]\nroot = [\"/data\"]\n", "root"},
      {"[zones.ae]\n[[datasets]]\npath = \"/*\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "'/*': the file system root cannot be a dataset"},
      {"[zones.ae]\n[[datasets]]\npath = \"//\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "the file system root cannot be a dataset"},
      {"[zones.ae]\n[[datasets]]\npath = \"/a\"\nzone = \"ae\"\nclassification = \"c\"\n"
       "[[datasets]]\npath = \"/a/\"\nzone = \"ae\"\nclassification = \"c\"\n",
       "policy.toml:6: [[datasets]] path '/a/' already declared at line 2"},
      {"[zones.ae]\n[[bindings]]\nuser = \"u\"\ngroup = \"g\"\nroles = []\n",
       "policy.toml:2: [[bindings]]: give exactly one of"},
      {"[zones.ae]\n[[bindings]]\nuser = \"u\"\nroles = [\"nope\"]\n",
       "policy.toml:4: [[bindings]] key 'roles': role 'nope' is not declared"},
      {"[zones.ae]\n[defaults]\nrole = \"nope\"\n",
       "policy.toml:3: [defaults] key 'role': role 'nope' is not declared"},
      {"[zones.ae]\n[defaults]\nunknown_datasets = \"maybe\"\n",
       "policy.toml:3: [defaults] key 'unknown_datasets'"},
      {"[zones.ae]\nextra = 1\n", "policy.toml:2: [zones.ae]: unknown key 'extra'"},
      {"version = 2\n[zones.ae]\n", "policy.toml:1: top level: unknown key 'version'"},
      {"[zones.ae]\n[[roles]\n", "policy.toml:2: TOML syntax error"},
      // toml++ 3.3 asserts on this in debug builds; its release build errors.
      {"[.e]]\n", "policy.toml:1: TOML syntax error"},
      {"", "policy.toml:1: no zones"},
      {"datasets = 3\n[zones.ae]\n", "policy.toml:1: 'datasets' must be an array of tables"},
  };
  for (const Case& c : cases) {
    std::string err = ErrorOf(c.text);
    EXPECT_NE(err.find(c.needle), std::string::npos) << "want: " << c.needle << "\ngot: " << err;
  }
}

class PolicyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("guard_policy_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    ::chmod(dir_.c_str(), 0755);
    path_ = (dir_ / "policy.toml").string();
    std::ofstream(path_) << testing::kPolicy;
    ::chmod(path_.c_str(), 0644);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(PolicyFileTest, LoadsASafeFile) {
  auto p = LoadPolicyFile(path_, ::geteuid());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->source(), path_);
}

TEST_F(PolicyFileTest, RefusesGroupOrOtherWritableFiles) {
  ::chmod(path_.c_str(), 0664);
  auto p = LoadPolicyFile(path_, ::geteuid());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("writable by group or others"), std::string::npos);
  ::chmod(path_.c_str(), 0646);
  EXPECT_FALSE(LoadPolicyFile(path_, ::geteuid()).ok());
}

TEST_F(PolicyFileTest, RefusesAWritableDirectory) {
  ::chmod(dir_.c_str(), 0777);
  auto p = LoadPolicyFile(path_, ::geteuid());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("directory"), std::string::npos);
  ::chmod(dir_.c_str(), 01777);  // sticky, like /tmp: accepted
  EXPECT_TRUE(LoadPolicyFile(path_, ::geteuid()).ok());
}

TEST_F(PolicyFileTest, RefusesAFileNotOwnedByRoot) {
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0) << "the unit tests run as root";
  auto p = LoadPolicyFile(path_);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("owned by uid 65534"), std::string::npos);
}

TEST_F(PolicyFileTest, MissingFileIsAnError) {
  auto p = LoadPolicyFile((dir_ / "absent.toml").string());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("absent.toml"), std::string::npos);
}

TEST(PolicyZones, NodesByNameAndHostlist) {
  auto p = ParsePolicy(R"([zones.ae]
nodes = ["node[1-2,5]", "login"]
[zones.eu]
nodes = ["gpu[01-16]x"]
)",
                       "policy.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->names_nodes());
  EXPECT_EQ(p->ZonesOfNode("node1"), (std::vector<std::string>{"ae"}));
  EXPECT_EQ(p->ZonesOfNode("node5"), (std::vector<std::string>{"ae"}));
  EXPECT_EQ(p->ZonesOfNode("login"), (std::vector<std::string>{"ae"}));
  EXPECT_TRUE(p->ZonesOfNode("node3").empty());
  EXPECT_TRUE(p->ZonesOfNode("node12").empty());
  EXPECT_EQ(p->ZonesOfNode("gpu07x"), (std::vector<std::string>{"eu"}));
  EXPECT_TRUE(p->ZonesOfNode("gpu7x").empty()) << "a padded range matches padded names only";
  EXPECT_TRUE(p->ZonesOfNode("gpu17x").empty());
  EXPECT_TRUE(p->ZonesOfNode("node").empty());
}

}  // namespace
}  // namespace hpcml::guard
