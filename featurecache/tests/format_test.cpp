#include "hpcml/featurecache/format.hpp"

#include <gtest/gtest.h>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/sha256.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

TEST(Classification, OrderedLevels) {
  EXPECT_EQ(*ClassificationLevel("public"), 0);
  EXPECT_EQ(*ClassificationLevel("internal"), 1);
  EXPECT_EQ(*ClassificationLevel("confidential"), 2);
  EXPECT_EQ(*ClassificationLevel("restricted"), 3);
  EXPECT_FALSE(ClassificationLevel("secret").ok());
  EXPECT_EQ(ClassificationNames().size(), 4u);
}

TEST(Zone, Validation) {
  EXPECT_TRUE(ValidateZone("ae").ok());
  EXPECT_TRUE(ValidateZone("eu-west_1").ok());
  EXPECT_FALSE(ValidateZone("").ok());
  EXPECT_FALSE(ValidateZone("a b").ok());
  EXPECT_FALSE(ValidateZone("../x").ok());
  EXPECT_FALSE(ValidateZone(std::string(65, 'a')).ok());
}

TEST(VersionNames, ParseAndFormat) {
  EXPECT_EQ(*ParseVersionName("v3"), 3);
  EXPECT_EQ(*ParseVersionName("12"), 12);
  EXPECT_FALSE(ParseVersionName("v0").ok());
  EXPECT_FALSE(ParseVersionName("latest").ok());
  EXPECT_FALSE(ParseVersionName("v3x").ok());
  EXPECT_EQ(VersionName(7), "v7");
}

// A version that is not typed: rows, features, labels as given.
VersionInfo Untyped(bool labels) {
  VersionInfo v;
  v.rows = 10;
  v.feature_names = {"a", "b", "c"};
  v.feature_types = {"float", "int", "float"};
  if (labels) v.label_name = "y";
  return v;
}

TEST(DataDigest, IsTheDocumentedText) {
  DatasetDigests d;
  d.features = "aa", d.labels = "bb", d.entity_ids = "cc", d.timestamps = "dd";
  EXPECT_EQ(DataDigest(Untyped(true), d),
            Sha256::Hex("hpcml-featurecache-v1\nrows=10\nfeatures=3\nfeatures:aa\nlabels:"
                        "bb\nentity_ids:cc\ntimestamps:dd\n"));
  EXPECT_EQ(DataDigest(Untyped(false), d),
            Sha256::Hex("hpcml-featurecache-v1\nrows=10\nfeatures=3\nfeatures:aa\nentity_ids:"
                        "cc\ntimestamps:dd\n"));
  d.entity_keys = "ee";  // string keys
  EXPECT_EQ(DataDigest(Untyped(false), d),
            Sha256::Hex("hpcml-featurecache-v1\nrows=10\nfeatures=3\nfeatures:aa\nentity_ids:"
                        "cc\nentity_keys:ee\ntimestamps:dd\n"));
}

TEST(DataDigest, TypedVersionsCoverKindsClassesAndDictionaries) {
  DatasetDigests d;
  d.features = "aa", d.labels = "bb", d.entity_ids = "cc", d.timestamps = "dd";
  d.int_values = "ff", d.categories = "gg";
  VersionInfo v = Untyped(true);
  v.typed = true;
  v.feature_types = {"float", "int", "category"};
  v.category_counts = {0, 0, 2};
  v.label_classes = {"bad", "good"};
  const std::string digest = DataDigest(v, d);
  EXPECT_EQ(digest,
            Sha256::Hex("hpcml-featurecache-v2\nrows=10\nfeatures=3\nfeatures:aa\nlabels:bb\n"
                        "entity_ids:cc\ntimestamps:dd\nkinds=float,int,category\n"
                        "label_classes=[\"bad\",\"good\"]\nint_values:ff\ncategories:gg\n"
                        "category_counts=0,0,2\n"));
  // Each of these is data: changing it changes the digest.
  VersionInfo kinds = v;
  kinds.feature_types[0] = "bool";
  EXPECT_NE(DataDigest(kinds, d), digest);
  VersionInfo classes = v;
  classes.label_classes = {"good", "bad"};
  EXPECT_NE(DataDigest(classes, d), digest);
  VersionInfo counts = v;
  counts.category_counts = {0, 0, 3};
  EXPECT_NE(DataDigest(counts, d), digest);
  DatasetDigests other = d;
  other.categories = "hh";
  EXPECT_NE(DataDigest(v, other), digest);
}

TEST(ChunkRows, AboutOneMiBAndPageMultiples) {
  for (uint64_t f : {1, 3, 4, 16, 64, 100, 1000, 4096}) {
    uint64_t r = DefaultChunkRows(f);
    uint64_t bytes = r * f * 4;
    EXPECT_GE(r, 1u);
    EXPECT_EQ(bytes % 4096, 0u) << f;
    EXPECT_LE(bytes, 4u << 20) << f;
    EXPECT_GE(bytes, 256u << 10) << f;
  }
  EXPECT_EQ(ChunkRowsFor(64, 0), DefaultChunkRows(64));
  EXPECT_EQ(ChunkRowsFor(64, 1 << 30), DefaultChunkRows(64));
  EXPECT_EQ(ChunkRowsFor(64, 5), 16u);  // the smallest page multiple for 256-byte rows
  EXPECT_LT(ChunkRowsFor(2, 4) * 8, 8192u);
}

TEST(VersionAttrs, RoundTripAndMissingIsCorrupt) {
  testing::TempDir dir;
  h5::SilenceErrorPrinting();
  h5::File f(H5Fcreate((dir / "a.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  h5::Group g(H5Gcreate2(f.get(), "v2", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  VersionInfo v;
  v.name = "v2";
  v.number = 2;
  v.rows = 5;
  v.feature_names = {"a", "b"};
  v.feature_types = {"int", "float"};
  v.label_name = "y";
  v.entity_name = "id";
  v.timestamp_name = "ts";
  v.created_at = "2024-01-01T00:00:00Z";
  v.created_by = "alice@node";
  v.operation = "derive";
  v.transform = "{}";
  v.sources = {{"file:///x.csv", "abc"}};
  v.parents = {{"v1", "def"}};
  v.zone = "ae";
  v.classification = "internal";
  v.data_sha256 = "123";
  v.chunk_rows = 64;
  v.compression = 4;
  v.tool = "t";
  ASSERT_TRUE(WriteVersionAttrs(g.get(), v).ok());
  auto back = ReadVersionAttrs(g.get(), "v2");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rows, 5u);
  EXPECT_EQ(back->feature_types, v.feature_types);
  EXPECT_EQ(back->sources[0].uri, "file:///x.csv");
  EXPECT_EQ(back->parents[0].sha256, "def");
  EXPECT_EQ(back->compression, 4);
  // A version group whose name disagrees with its number is corrupt.
  EXPECT_EQ(ReadVersionAttrs(g.get(), "v3").status().code(), StatusCode::kCorrupt);
  H5Adelete(g.get(), "zone");
  auto missing = ReadVersionAttrs(g.get(), "v2");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("zone"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
