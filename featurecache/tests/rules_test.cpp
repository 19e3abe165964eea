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

// A category feature (grade: A 600, B 300, Z 100, with 50 missing) and a
// class label (bad 100, good 900): categories and class shares are exact.
VersionStats Categorical() {
  StatsAccumulator acc({"grade", "y"}, true, 0);
  acc.CountCodes({true, true});
  std::vector<float> x, y;
  for (int r = 0; r < 1050; ++r) {
    x.push_back(r >= 1000 ? NAN : r < 600 ? 0.0f : r < 900 ? 1.0f : 2.0f);
    y.push_back(r % 10 == 0 ? 0.0f : 1.0f);
  }
  acc.Add(x.data(), y.data(), 1050);
  VersionStats s = acc.Finish();
  NameCodes({{"A", "B", "Z"}}, {"bad", "good"}, &s);
  return s;
}

TEST(Rules, CategoriesAllowedCountedAndClassSharesNamed) {
  auto r = Rules::Parse(R"([features.grade]
allowed = ["A", "B"]
max_categories = 2
max_missing = 0.01
[label]
min_share = 0.2
)",
                        "rules.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto broken = CheckRules(*r, Categorical(), true);
  ASSERT_TRUE(broken.ok()) << broken.status().ToString();
  const std::string text = Joined(*broken);
  EXPECT_NE(text.find("grade: 1 category not allowed: \"Z\" (100 rows) (rules.toml:1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("grade: 3 distinct categories, the rule allows 2"), std::string::npos);
  EXPECT_NE(text.find("grade: 0.04762 of the values are missing"), std::string::npos) << text;
  EXPECT_NE(text.find("y: class \"bad\" is 0.1 of the labelled rows"), std::string::npos) << text;
  EXPECT_EQ(broken->size(), 4u) << text;

  auto kinds = Rules::Parse("[features.grade]\nmax = 3\n", "k.toml");
  ASSERT_TRUE(kinds.ok());
  EXPECT_NE(CheckRules(*kinds, Categorical(), true)
                .status()
                .message()
                .find("k.toml:1: min and max do not apply to \"grade\", a category column"),
            std::string::npos);
  auto list = Rules::Parse("[features.grade]\nallowed = [1, 2]\n", "l.toml");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("l.toml:2: features.grade.allowed must be a list"),
            std::string::npos)
      << list.status().message();
}

}  // namespace
}  // namespace hpcml::featurecache
