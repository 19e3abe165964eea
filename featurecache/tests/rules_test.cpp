#include "rules.hpp"

#include <gtest/gtest.h>

namespace hpcml::featurecache {
namespace {

// Two features and a label: a in [0, 10] with one NaN in ten, b constant,
// label classes 0 (90%) and 1 (10%).
VersionStats Example() {
  StatsAccumulator acc({"a", "b", "y"}, true, 0);
  std::vector<float> x, y;
  for (int r = 0; r < 1000; ++r) {
    x.push_back(r % 10 == 0 ? NAN : static_cast<float>(r % 11));
    x.push_back(2.0f);
    y.push_back(r % 10 == 0 ? 1.0f : 0.0f);
  }
  acc.Add(x.data(), y.data(), 1000);
  return acc.Finish();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(Rules, EachBrokenRuleNamesColumnRuleAndLine) {
  auto r = Rules::Parse(R"([rows]
min = 2000
[features.a]
max = 9.5
max_missing = 0.05
[features.b]
min = 1.0
max = 3.0
[label]
min_share = 0.2
)",
                        "r.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto broken = CheckRules(*r, Example(), true);
  ASSERT_TRUE(broken.ok()) << broken.status().ToString();
  const std::string all = Joined(*broken);
  ASSERT_EQ(broken->size(), 4u) << all;
  EXPECT_NE(all.find("rows: 1000 rows, the rule expects 2000 to any (r.toml:1)"), std::string::npos)
      << all;
  EXPECT_NE(all.find("a: 0.1 of the values are missing, the rule allows 0.05 (r.toml:3)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("a: max is 10, the rule allows 9.5 (r.toml:3)"), std::string::npos) << all;
  EXPECT_NE(all.find("y: class 1 is 0.1 of the labelled rows"), std::string::npos) << all;
}

TEST(Rules, HoldingRulesGiveNothing) {
  auto r =
      Rules::Parse("[rows]\nmin = 10\nmax = 1000\n[features.a]\nmin = 0\nmax = 10\n", "r.toml");
  ASSERT_TRUE(r.ok());
  auto broken = CheckRules(*r, Example(), true);
  ASSERT_TRUE(broken.ok());
  EXPECT_TRUE(broken->empty()) << Joined(*broken);
}

TEST(Rules, StrictParsing) {
  const std::pair<const char*, const char*> cases[] = {
      {"[rows]\nmni = 1\n", "r.toml:2: unknown key 'mni' in [rows]"},
      {"[features.a]\nmin = \"x\"\n", "r.toml:2: [features.a] min must be a number"},
      {"[extra]\n", "r.toml:1: unknown table [extra]"},
      {"rows = 3\n", "r.toml:1: 'rows' must be a table"},
      {"[rows\n", "r.toml:1:"},
  };
  for (const auto& [text, want] : cases) {
    auto r = Rules::Parse(text, "r.toml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  auto r = Rules::Parse("[features.zz]\nmin = 1\n", "r.toml");
  ASSERT_TRUE(r.ok());
  auto broken = CheckRules(*r, Example(), true);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("r.toml:1: the version has no feature \"zz\""),
            std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
