// The feature-cache adapter against real feature-set files written with
// hpcml::featurecache's writer.
#include "featurecache_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "hpcml/featurecache/writer.hpp"

namespace hpcml::trainer {
namespace {

namespace fc = hpcml::featurecache;

class FeatureCacheSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("HPCML_ZONE");  // outside a guarded job: no residency checks
    dir_ = std::filesystem::temp_directory_path() / ("hpcml_fcsrc_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "set.h5").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `rows` rows of 3 features: f0 = row index, f1 = -row, f2 = 0.5;
  // label = row % classes; optionally no labels.
  void Write(std::uint64_t rows, int classes, bool labels = true) {
    auto w = fc::FeatureSetWriter::Begin(path_, fc::WriterOptions{"ae", 30});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    fc::NewVersion spec;
    spec.feature_names = {"f0", "f1", "f2"};
    spec.feature_types = kinds_;
    if (kinds_[2] == "category") spec.categories = {{}, {}, {"only"}};
    spec.label_name = labels ? "y" : "";
    spec.label_classes = classes_;
    spec.operation = "ingest";
    spec.transform = "{\"op\":\"test\"}";
    spec.classification = "internal";
    spec.chunk_rows = 8;
    ASSERT_TRUE(w->StartVersion(spec).ok());
    std::vector<float> x, y;
    std::vector<std::int64_t> e, t;
    for (std::uint64_t r = 0; r < rows; ++r) {
      x.insert(x.end(), {static_cast<float>(r), -static_cast<float>(r),
                         kinds_[2] == "category" ? 0.0f : 0.5f});
      y.push_back(static_cast<float>(r % static_cast<std::uint64_t>(classes)));
      e.push_back(static_cast<std::int64_t>(r));
      t.push_back(1700000000 + static_cast<std::int64_t>(r));
    }
    for (auto [r, c, v] : poison_) (c == 3 ? y[r] : x[r * 3 + static_cast<std::uint64_t>(c)]) = v;
    ASSERT_TRUE(w->Append(x.data(), labels ? y.data() : nullptr, e.data(), t.data(), rows).ok());
    auto info = w->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }

  std::filesystem::path dir_;
  std::string path_;
  // Cells Write() replaces: (row, column, value); column 3 is the label.
  std::vector<std::tuple<std::uint64_t, int, float>> poison_;
  std::vector<std::string> kinds_ = {"float", "float", "float"};  // f2 may be a category
  std::vector<std::string> classes_;                              // the label's names
};

TEST_F(FeatureCacheSourceTest, ReplicasReadDisjointShardsWithMatchingLabels) {
  Write(64, 3);
  std::set<int> seen;
  for (int r = 0; r < 2; ++r) {
    FeatureCacheConfig c{path_, "", 3, 7, true, {}};
    ModelLineage lineage;
    auto s = OpenFeatureCache(c, 16, r, 2, &lineage);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)->feature_dim(), 3);
    EXPECT_EQ((*s)->num_classes(), 3);
    // Features arrive standardised with the version's statistics.
    ASSERT_TRUE(lineage.input.encoding.has_value());
    const ColumnEncoding& f0 = lineage.input.encoding->columns[0];
    EXPECT_DOUBLE_EQ(f0.center, 31.5);
    for (int step = 0; step < 4; ++step) {  // one epoch: 32 rows per replica
      std::vector<float> x(8 * 3), y(8);
      ASSERT_TRUE((*s)->Next(8, x.data(), y.data()).ok());
      for (int i = 0; i < 8; ++i) {
        const auto row =
            static_cast<int>(std::lround(x[static_cast<size_t>(i * 3)] * f0.scale + f0.center));
        EXPECT_EQ(x[static_cast<size_t>(i * 3 + 1)], -x[static_cast<size_t>(i * 3)]);
        EXPECT_EQ(y[static_cast<size_t>(i)], static_cast<float>(row % 3));
        EXPECT_TRUE(seen.insert(row).second) << "row " << row << " read twice";
      }
    }
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST_F(FeatureCacheSourceTest, PositionsRoundTrip) {
  Write(64, 3);
  auto s = OpenFeatureCache(FeatureCacheConfig{path_, "v1", 3, 1, true, {}}, 8, 0, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> x(24), y(8), again(24);
  ASSERT_TRUE((*s)->Next(8, x.data(), y.data()).ok());
  const std::string pos = (*s)->SavePosition();
  ASSERT_TRUE((*s)->Next(8, x.data(), nullptr).ok());
  ASSERT_TRUE((*s)->RestorePosition(pos).ok());
  ASSERT_TRUE((*s)->Next(8, again.data(), nullptr).ok());
  EXPECT_EQ(x, again);
  EXPECT_FALSE((*s)->RestorePosition("garbage").ok());
}

TEST_F(FeatureCacheSourceTest, LabelOutsideTheClassesNamesFileAndRow) {
  Write(16, 5);
  auto s = OpenFeatureCache(FeatureCacheConfig{path_, "", 2, 1, false, {}}, 16, 0, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> x(48), y(16);
  Status st = (*s)->Next(16, x.data(), y.data());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find(path_), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not a class in [0, 2)"), std::string::npos) << st.message();
}

TEST_F(FeatureCacheSourceTest, OpenErrorsAreClear) {
  auto missing = OpenFeatureCache(FeatureCacheConfig{path_ + ".nope", "", 2, 1, true, {}}, 8, 0, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("set.h5.nope"), std::string::npos)
      << missing.status().message();
  Write(16, 2, /*labels=*/false);
  auto nolabels = OpenFeatureCache(FeatureCacheConfig{path_, "", 2, 1, true, {}}, 8, 0, 1);
  ASSERT_FALSE(nolabels.ok());
  EXPECT_NE(nolabels.status().message().find("no labels"), std::string::npos);
  auto noversion = OpenFeatureCache(FeatureCacheConfig{path_, "v9", 2, 1, true, {}}, 8, 0, 1);
  ASSERT_FALSE(noversion.ok());
  EXPECT_NE(noversion.status().message().find("v9"), std::string::npos)
      << noversion.status().message();
  auto toosmall = OpenFeatureCache(FeatureCacheConfig{path_, "", 2, 1, true, {}}, 64, 0, 2);
  EXPECT_FALSE(toosmall.ok());
}

// Missing feature cells are encoded (the training mean, and a 1 in the
// column's missing indicator); a missing label refuses the version at the
// start, with the count and what to do.
TEST_F(FeatureCacheSourceTest, MissingCellsAreImputedAndMissingLabelsRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  poison_ = {{5, 1, nan}, {9, 1, nan}};
  Write(64, 2);
  auto s = OpenFeatureCache({path_, "", 2, 1, false, {}}, 16, 0, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // f0, f1, f2, then f1's indicator.
  ASSERT_EQ((*s)->feature_dim(), 4);
  std::vector<float> x(16 * 4), y(16);
  ASSERT_TRUE((*s)->Next(16, x.data(), y.data()).ok());
  EXPECT_EQ(x[5 * 4 + 1], 0.0f);
  EXPECT_EQ(x[5 * 4 + 3], 1.0f);
  EXPECT_EQ(x[6 * 4 + 3], 0.0f);
  EXPECT_NE(x[6 * 4 + 1], 0.0f);

  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  poison_ = {{5, 1, nan}, {7, 3, nan}};
  Write(64, 2);
  s = OpenFeatureCache({path_, "", 2, 1, true, {}}, 16, 0, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "--data " + path_ + " v1: training needs every cell; missing (NaN) cells: 1 (y 1)"),
            std::string::npos)
      << s.status().message();
}

// A category feature gets an embedding slot holding its code; a class
// label's number of classes must be the model's.
TEST_F(FeatureCacheSourceTest, CategoricalFeaturesAndClassCountsAreChecked) {
  kinds_ = {"float", "float", "category"};
  Write(64, 2);
  auto s = OpenFeatureCache({path_, "", 2, 1, false, {}}, 16, 0, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->feature_dim(), 2 + DefaultEmbedDim(2));  // "only", and the unknown row
  std::vector<float> x(static_cast<size_t>(16 * (*s)->feature_dim())), y(16);
  ASSERT_TRUE((*s)->Next(16, x.data(), y.data()).ok());
  for (int r = 0; r < 16; ++r) {
    const float code = x[static_cast<size_t>(r * (*s)->feature_dim() + 2)];
    EXPECT_EQ(code, 0.0f);
  }
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  kinds_ = {"float", "float", "float"};
  classes_ = {"bad", "good"};
  Write(64, 2);
  EXPECT_TRUE(OpenFeatureCache({path_, "", 2, 1, true, {}}, 16, 0, 1).ok());
  auto three = OpenFeatureCache({path_, "", 3, 1, true, {}}, 16, 0, 1);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find(
                "the label \"y\" has 2 classes (bad, good), so train with --classes 2"),
            std::string::npos)
      << three.status().message();
}

// An infinity (which the statistics do not count as missing) stops the batch
// that holds it, naming the version, row and column.
TEST_F(FeatureCacheSourceTest, InfiniteCellStopsItsBatch) {
  poison_ = {{37, 2, std::numeric_limits<float>::infinity()}};
  Write(64, 2);
  auto s = OpenFeatureCache({path_, "", 2, 1, false, {}}, 16, 0, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> x(16 * 3), y(16);
  Status st;
  int batches = 0;
  while (st.ok() && batches < 4) {
    st = (*s)->Next(16, x.data(), y.data());
    ++batches;
  }
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(batches, 3) << "rows 32..47, unshuffled, hold row 37";
  EXPECT_NE(st.message().find(path_ + " v1: row 37, column 3 (\"f2\") is inf"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace hpcml::trainer
