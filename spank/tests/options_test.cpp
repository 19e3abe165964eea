#include "options.hpp"

#include <gtest/gtest.h>

namespace hpcml::guard {
namespace {

std::vector<std::string_view> V(std::initializer_list<std::string_view> l) {
  return l;
}

TEST(PluginArgs, ParsesAllKeys) {
  auto c = ParsePluginArgs(
      V({"policy=/etc/hpcml/policy.toml", "zone=ae", "audit=/var/log/a.jsonl", "cluster=c1"}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->policy_path, "/etc/hpcml/policy.toml");
  EXPECT_EQ(c->zone, "ae");
  EXPECT_EQ(c->audit_path, "/var/log/a.jsonl");
  EXPECT_EQ(c->cluster, "c1");
}

TEST(PluginArgs, AuditHasADefault) {
  auto c = ParsePluginArgs(V({"policy=/p.toml", "zone=ae"}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->audit_path, PluginConfig::kDefaultAuditPath);
  EXPECT_FALSE(c->audit_sync);
  auto synced = ParsePluginArgs(V({"policy=/p.toml", "zone=ae", "audit_sync=yes"}));
  ASSERT_TRUE(synced.ok());
  EXPECT_TRUE(synced->audit_sync);
  EXPECT_EQ(c->job_cache, PluginConfig::kDefaultJobCache);
}

TEST(PluginArgs, JobCacheIsADirectoryOrOff) {
  auto dir = ParsePluginArgs(V({"policy=/p.toml", "zone=ae", "job_cache=/var/cache/g"}));
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->job_cache, "/var/cache/g");
  auto off = ParsePluginArgs(V({"policy=/p.toml", "zone=ae", "job_cache=off"}));
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->job_cache.empty());
}

TEST(PluginArgs, PolicyCacheIsADirectoryOrOff) {
  EXPECT_EQ(ParsePluginArgs(V({"policy=/p.toml"}))->policy_cache,
            PluginConfig::kDefaultPolicyCache);
  EXPECT_EQ(ParsePluginArgs(V({"policy=/p.toml", "policy_cache=/var/cache/g"}))->policy_cache,
            "/var/cache/g");
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml", "policy_cache=off"}))->policy_cache.empty());
  EXPECT_FALSE(ParsePluginArgs(V({"policy=/p.toml", "policy_cache=rel/dir"})).ok());
}

TEST(PluginArgs, CollectorIsHostAndPort) {
  EXPECT_FALSE(ParsePluginArgs(V({"policy=/p.toml"}))->collector.has_value());
  auto c = ParsePluginArgs(V({"policy=/p.toml", "audit_collector=10.1.2.3:514"}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->collector.has_value());
  EXPECT_EQ(c->collector->host, "10.1.2.3");
  EXPECT_EQ(c->collector->port, 514);
  EXPECT_EQ(c->collector->text(), "10.1.2.3:514");
  auto v6 = ParsePluginArgs(V({"policy=/p.toml", "audit_collector=[fd00::1]:6514"}));
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->collector->host, "fd00::1");
  EXPECT_EQ(
      ParsePluginArgs(V({"policy=/p.toml", "audit_collector=ctl.example:601"}))->collector->host,
      "ctl.example");
  for (const char* bad :
       {"audit_collector=ctl", "audit_collector=ctl:", "audit_collector=:514",
        "audit_collector=ctl:0", "audit_collector=ctl:65536", "audit_collector=ctl:5x",
        "audit_collector=c/t:514", "audit_collector=[fd00::1:514"}) {
    auto r = ParsePluginArgs(V({"policy=/p.toml", bad}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("audit_collector"), std::string::npos) << bad;
  }
}

TEST(PluginArgs, EnforceIsMountOrAdvisory) {
  // zone= is optional: the node's zone can come from the policy or from its
  // Slurm feature (plugin.cpp, NodeZone).
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml"}))->zone.empty());
  // The view is the default; the advisory mode must be named.
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml", "zone=ae"}))->enforce_mount);
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml", "zone=ae", "enforce=mount"}))->enforce_mount);
  EXPECT_FALSE(
      ParsePluginArgs(V({"policy=/p.toml", "zone=ae", "enforce=advisory"}))->enforce_mount);
}

TEST(PluginArgs, ConfineIsLandlockUnlessNamedNone) {
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml"}))->confine_landlock);
  EXPECT_TRUE(ParsePluginArgs(V({"policy=/p.toml", "confine=landlock"}))->confine_landlock);
  EXPECT_FALSE(ParsePluginArgs(V({"policy=/p.toml", "confine=none"}))->confine_landlock);
}

TEST(PluginArgs, RejectsBadArguments) {
  struct Case {
    std::vector<std::string_view> args;
    std::string_view needle;
  } cases[] = {
      {V({"policy=/p", "zone=ae", "color=red"}), "unknown plugin argument 'color'"},
      {V({"policy=/p", "zone=ae", "verbose"}), "expected key=value"},
      {V({"policy=/p", "zone=ae", "=x"}), "expected key=value"},
      {V({"policy=relative.toml", "zone=ae"}), "not an absolute path"},
      {V({"policy=/p", "zone=ae", "zone=eu"}), "given twice"},
      {V({"policy=/p", "zone=ae", "audit_sync=maybe"}), "expected yes or no"},
      {V({"policy=/p", "zone=ae", "job_cache=cache"}), "not an absolute path"},
      {V({"policy=/p", "zone=ae", "enforce=chroot"}), "expected mount or advisory"},
      {V({"policy=/p", "zone=ae", "enforce=none"}), "expected mount or advisory"},
      {V({"policy=/p", "confine=seccomp"}), "expected landlock or none"},
      {V({"policy=/p", "confine=none", "confine=none"}), "given twice"},
      {V({"policy=/p", "zone="}), "empty value"},
      {V({"policy=/p", "zone=a e"}), "character other than"},
      {V({"zone=ae"}), "missing plugin argument policy="},
  };
  for (const Case& c : cases) {
    auto r = ParsePluginArgs(c.args);
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
}

TEST(Names, ValidatesCharactersAndLength) {
  EXPECT_TRUE(ValidateName("--ml-role", "ml-engineer_2.0").ok());
  EXPECT_FALSE(ValidateName("--ml-role", "").ok());
  EXPECT_FALSE(ValidateName("--ml-role", std::string(65, 'a')).ok());
  EXPECT_FALSE(ValidateName("--ml-role", "a/b").ok());
  auto st = ValidateName("--data-zone", "a\nb");
  EXPECT_NE(st.message().find("--data-zone"), std::string::npos);
}

TEST(Datasets, SplitsCommasDeduplicatesAndAbsolutises) {
  std::vector<std::string> out;
  ASSERT_TRUE(AppendDatasets("/a,/b", std::nullopt, &out).ok());
  ASSERT_TRUE(AppendDatasets("/b,rel/x", std::string("/home/u"), &out).ok());
  EXPECT_EQ(out, (std::vector<std::string>{"/a", "/b", "/home/u/rel/x"}));
  EXPECT_EQ(JoinDatasets(out), "/a,/b,/home/u/rel/x");
}

TEST(Datasets, RejectsMalformedValues) {
  std::vector<std::string> out;
  EXPECT_FALSE(AppendDatasets("", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets("/a,,/b", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets("/a,", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets(",/a", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets(",", std::nullopt, &out).ok());
  // Blanks are part of a path: " /b" is relative, not trimmed to "/b".
  EXPECT_FALSE(AppendDatasets("/a, /b", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets("rel", std::nullopt, &out).ok());  // remote: no cwd
  EXPECT_FALSE(AppendDatasets("/a\x01", std::nullopt, &out).ok());
  EXPECT_FALSE(AppendDatasets("/" + std::string(kMaxPathLength, 'x'), std::nullopt, &out).ok());
}

TEST(Datasets, LimitsTheCount) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < kMaxDatasets; ++i)
    ASSERT_TRUE(AppendDatasets("/d" + std::to_string(i), std::nullopt, &out).ok());
  EXPECT_TRUE(AppendDatasets("/d0", std::nullopt, &out).ok());  // a repeat adds nothing
  auto st = AppendDatasets("/one-more", std::nullopt, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(out.size(), kMaxDatasets);
}

TEST(Datasets, LimitsTheTotalSize) {
  std::vector<std::string> out;
  std::string long_path = "/" + std::string(4000, 'x');
  Status st;
  for (int i = 0; st.ok() && i < 40; ++i)
    st = AppendDatasets(long_path + std::to_string(i), std::nullopt, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bytes"), std::string::npos);
  EXPECT_LE(JoinDatasets(out).size(), kMaxDatasetsBytes);
}

TEST(Tres, ReadsTheUntypedGpuCount) {
  EXPECT_EQ(*GpusFromTres("cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2"), 2u);
  EXPECT_EQ(*GpusFromTres("cpu=1,gres/gpu:h100=3,gres/gpu=3"), 3u);
  EXPECT_EQ(*GpusFromTres("cpu=1,mem=1G"), 0u);
  // Only typed entries (AccountingStorageTRES=gres/gpu:h100): still counted.
  EXPECT_EQ(*GpusFromTres("cpu=1,gres/gpu:h100=3"), 3u);
  EXPECT_EQ(*GpusFromTres("gres/gpu:h100=2,gres/gpu:a100=2"), 4u);
  EXPECT_EQ(*GpusFromTres(""), 0u);
  EXPECT_FALSE(GpusFromTres("gres/gpu=x").ok());
  EXPECT_FALSE(GpusFromTres("gres/gpu=").ok());
  EXPECT_FALSE(GpusFromTres("gres/gpu=99999999999").ok());
}

}  // namespace
}  // namespace hpcml::guard
