#include "prices.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace hpcml::accounting {
namespace {

using testing::Utc;
const bool kUtc = testing::UseUtc();

Status ParseError(const std::string& text) {
  Result<PriceTable> t = PriceTable::Parse(text, "p.toml");
  return t.ok() ? Status::Ok() : t.status();
}

TEST(AcctPriceTable, LoadsTheExampleTable) {
  ASSERT_TRUE(kUtc);
  Result<PriceTable> t = PriceTable::Load(HPCML_ACCT_EXAMPLES "/prices.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->currency(), "EUR");
  EXPECT_EQ(t->TierOf("batch"), Tier::kSpot);
  EXPECT_EQ(t->TierOf("urgent"), Tier::kOnDemand);
  EXPECT_EQ(t->TierOf("elsewhere"), Tier::kOnDemand);
  EXPECT_EQ(t->KnownGpuTypes(), (std::vector<std::string>{"a100", "h100"}));
}

TEST(AcctPriceTable, CostPerUnitHourAtTheTierOfThePartition) {
  PriceTable t = testing::LoadPrices("prices.toml");
  const int64_t s = Utc("2026-03-01T00:00:00");
  // 2 GPUs for 90 minutes: 3 GPU-hours.
  EXPECT_DOUBLE_EQ(*t.Cost(Resource::kGpu, "h100", "urgent", s, s + 5400, 2), 3 * 4.0);
  EXPECT_DOUBLE_EQ(*t.Cost(Resource::kGpu, "h100", "batch", s, s + 5400, 2), 3 * 2.0);
  EXPECT_DOUBLE_EQ(*t.Cost(Resource::kCpu, "", "urgent", s, s + 3600, 8), 8 * 0.1);
  EXPECT_DOUBLE_EQ(*t.Cost(Resource::kMem, "", "batch", s, s + 7200, 64), 64 * 2 * 0.005);
  EXPECT_DOUBLE_EQ(*t.Cost(Resource::kGpu, "h100", "urgent", s, s, 2), 0);
  EXPECT_TRUE(t.Charges(Resource::kCpu));
  EXPECT_FALSE(t.Charges(Resource::kBilling));
}

TEST(AcctPriceTable, UnknownGpuTypeListsTheKnownOnes) {
  PriceTable t = testing::LoadPrices("prices.toml");
  Result<double> c = t.Cost(Resource::kGpu, "mi300x", "urgent", 0, 3600, 1);
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_NE(m.find("mi300x"), std::string::npos) << m;
  EXPECT_NE(m.find("a100, h100"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown type"), std::string::npos) << m;
  Result<double> untyped = t.Cost(Resource::kGpu, "", "urgent", 0, 3600, 1);
  ASSERT_FALSE(untyped.ok());
  EXPECT_NE(untyped.status().message().find("(untyped)"), std::string::npos);
  EXPECT_NE(untyped.status().message().find("gpu_type = \"*\""), std::string::npos);
}

TEST(AcctPriceTable, MostSpecificRateWinsAndWildcardCoversTheRest) {
  Result<PriceTable> t = PriceTable::Parse(R"(
currency = "USD"
[[rate]]
resource = "gpu"
gpu_type = "*"
on_demand = 1.0
[[rate]]
resource = "gpu"
gpu_type = "*"
partition = "gold"
on_demand = 5.0
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 3.0
[[rate]]
resource = "gpu"
gpu_type = "h100"
partition = "gold"
on_demand = 7.0
)",
                                           "p.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(*t->Cost(Resource::kGpu, "h100", "gold", 0, 3600, 1), 7.0);
  EXPECT_DOUBLE_EQ(*t->Cost(Resource::kGpu, "h100", "other", 0, 3600, 1), 3.0);
  EXPECT_DOUBLE_EQ(*t->Cost(Resource::kGpu, "l4", "gold", 0, 3600, 1), 5.0);
  EXPECT_DOUBLE_EQ(*t->Cost(Resource::kGpu, "", "other", 0, 3600, 1), 1.0);
}

TEST(AcctPriceTable, EffectiveDatesSplitAnInterval) {
  Result<PriceTable> t = PriceTable::Parse(R"(
currency = "USD"
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 4.0
effective_until = 2026-03-01T01:00:00
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 2.0
effective_from = 2026-03-01T01:00:00
effective_until = 2026-04-01
)",
                                           "p.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const int64_t s = Utc("2026-03-01T00:30:00");
  // 30 minutes at 4.0 then 60 minutes at 2.0, one GPU.
  EXPECT_DOUBLE_EQ(*t->Cost(Resource::kGpu, "h100", "p", s, s + 5400, 1), 0.5 * 4.0 + 1.0 * 2.0);
  // After the last rate ends there is no price.
  Result<double> late = t->Cost(Resource::kGpu, "h100", "p", Utc("2026-04-01T00:00:00"),
                                Utc("2026-04-01T01:00:00"), 1);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("2026-04-01T00:00:00"), std::string::npos);
}

TEST(AcctPriceTable, SpotPartitionNeedsASpotPrice) {
  Result<PriceTable> t = PriceTable::Parse(R"(
currency = "USD"
[tiers]
cheap = "spot"
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 4.0
)",
                                           "p.toml");
  ASSERT_TRUE(t.ok());
  Result<double> c = t->Cost(Resource::kGpu, "h100", "cheap", 0, 3600, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("p.toml:5"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("spot"), std::string::npos);
}

TEST(AcctPriceTable, UnknownKeyNamesFileLineAndKey) {
  Status st =
      ParseError("currency = \"USD\"\n[[rate]]\nresource = \"gpu\"\non_demand = 1\nspto = 2\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("p.toml:5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rate.spto"), std::string::npos) << st.message();
  st = ParseError("currency = \"USD\"\ncurency = \"EUR\"\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("p.toml:2: curency"), std::string::npos) << st.message();
}

TEST(AcctPriceTable, BadValuesAreErrors) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"", "missing key 'currency'"},
      {"currency = 3", "currency must be a string"},
      {"currency = \"USD\"\ndefault_tier = \"cheap\"", "p.toml:2"},
      {"currency = \"USD\"\n[tiers]\nbatch = \"free\"", "tiers.batch"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"disk\"\non_demand = 1", "resource 'disk'"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"gpu\"\non_demand = -1", "negative"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"gpu\"\non_demand = \"1\"", "a number"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"gpu\"", "missing key 'on_demand'"},
      {"currency = \"USD\"\n[[rate]]\non_demand = 1", "missing key 'resource'"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"cpu\"\ngpu_type = \"h100\"\non_demand = 1",
       "only a gpu rate"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"cpu\"\non_demand = 1\neffective_from = \"2026\"",
       "date"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"cpu\"\non_demand = 1\n"
       "effective_from = 2026-02-01\neffective_until = 2026-01-01",
       "not before"},
      {"currency = \"USD\"\n[[rate]]\nresource = \"cpu\"\non_demand = 1\n[[rate]]\n"
       "resource = \"cpu\"\non_demand = 2",
       "overlaps the one at line 2"},
      {"currency = \"USD\"\nrate = 3", "array of tables"},
      {"currency = = \"USD\"", "p.toml:1"},
  };
  for (const Case& c : cases) {
    Status st = ParseError(c.text);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_NE(st.message().find(c.expect), std::string::npos)
        << "text:\n"
        << c.text << "\nmessage: " << st.message();
  }
}

TEST(AcctPriceTable, MissingFileNamesIt) {
  Result<PriceTable> t = PriceTable::Load("/nonexistent/prices.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent/prices.toml"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::accounting
