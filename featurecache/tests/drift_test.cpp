#include "drift.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "hpcml/featurecache/ingest.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(CategoryPsi, ByNameWithUnseenShare) {
  double unseen = 0;
  // Same shares, codes in another order: no drift.
  EXPECT_NEAR(CategoryPsi({"A", "B"}, {60, 40}, {"B", "A"}, {20, 30}, &unseen), 0.0, 1e-12);
  EXPECT_EQ(unseen, 0.0);
  // A: 50/50; B: 25% A, 25% B, 50% C (new): the documented sum.
  const double psi = CategoryPsi({"A", "B"}, {50, 50}, {"A", "B", "C"}, {25, 25, 50}, &unseen);
  const double expect =
      2 * (0.25 - 0.5) * std::log(0.25 / 0.5) + (0.5 - 1e-4) * std::log(0.5 / 1e-4);
  EXPECT_NEAR(psi, expect, 1e-12);
  EXPECT_DOUBLE_EQ(unseen, 0.5);
}

// Two ingests of a table with a category column whose mix moves and gains
// a category: drift names it, with the unseen share; the unchanged column
// does not drift.
TEST(Drift, CategoricalColumnsByExactCounts) {
  TempDir dir;
  std::string a = "id,ts,channel,steady,y\n", b = a;
  for (int r = 0; r < 2000; ++r) {
    a += fmt::format("{},0,{},{},{}\n", r, r % 2 ? "web" : "branch", r % 3 ? "x" : "y",
                     r % 4 ? "good" : "bad");
    b += fmt::format("{},0,{},{},{}\n", r,
                     r % 5 == 0  ? "app"
                     : r % 5 < 3 ? "web"
                                 : "branch",
                     r % 3 ? "x" : "y", r % 4 ? "good" : "bad");
  }
  WriteText(dir / "a.csv", a);
  WriteText(dir / "b.csv", b);
  IngestOptions o = CsvIngest(dir / "a.csv");
  std::string path = dir / "fs.h5";
  ASSERT_TRUE(Ingest(path, o).ok());
  o.csv_path = dir / "b.csv";
  ASSERT_TRUE(Ingest(path, o).ok());
  auto fs = FeatureSet::Open(path);
  auto r = Drift(*fs, "v1", "v2", DriftOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->columns.size(), 3u);
  const ColumnDrift& channel = r->columns[0];
  EXPECT_TRUE(channel.categorical);
  EXPECT_TRUE(channel.drifted);
  EXPECT_DOUBLE_EQ(channel.unseen, 0.2);
  EXPECT_TRUE(std::isnan(channel.ks));
  EXPECT_EQ(channel.count_b, 2000u);
  EXPECT_FALSE(r->columns[1].drifted) << r->columns[1].psi;
  EXPECT_NEAR(r->columns[1].psi, 0.0, 1e-12);
  EXPECT_FALSE(r->columns[2].drifted);  // the label, by class name
  const std::string text = FormatDrift(path, *r, DriftOptions{});
  EXPECT_NE(text.find("20.00%"), std::string::npos) << text;
}

}  // namespace
}  // namespace hpcml::featurecache
