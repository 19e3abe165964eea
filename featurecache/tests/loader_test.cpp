#include "hpcml/featurecache/loader.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

// Every row of a batch holds the data of the source row it claims.
void CheckBatch(const Batch& b, uint64_t nf, bool labels) {
  ASSERT_EQ(b.x().size(), b.rows() * nf);
  ASSERT_EQ(b.y().size(), labels ? b.rows() : 0u);
  for (size_t i = 0; i < b.rows(); ++i) {
    uint64_t id = b.row_ids()[i];
    for (uint64_t j = 0; j < nf; ++j) ASSERT_EQ(b.x()[i * nf + j], Value(id, j)) << "row " << id;
    if (labels) {
      ASSERT_EQ(b.y()[i], Label(id));
    }
  }
}

std::vector<uint64_t> Epoch(Loader& l, uint64_t nf, bool labels = true) {
  std::vector<uint64_t> ids;
  uint64_t epoch = l.epoch();
  for (uint64_t s = 0; s < l.batches_per_epoch(); ++s) {
    auto b = l.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) break;
    EXPECT_EQ(b->epoch(), epoch);
    EXPECT_EQ(b->step(), s);
    CheckBatch(*b, nf, labels);
    ids.insert(ids.end(), b->row_ids().begin(), b->row_ids().end());
  }
  return ids;
}

struct Config {
  bool shuffle;
  int compression;
  uint32_t threads;
  bool direct;
  std::string codec = "";  // empty: deflate at `compression` (when > 0)
};

class LoaderTest : public ::testing::TestWithParam<Config> {};

TEST_P(LoaderTest, DeliversThePlanExactly) {
  const Config c = GetParam();
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 20011,
                     .features = 6,
                     .chunk_rows = 1000,
                     .compression = c.compression,
                     .codec = c.codec});
  for (uint32_t world : {1u, 3u}) {
    std::vector<uint64_t> all;
    for (uint32_t rank = 0; rank < world; ++rank) {
      LoaderOptions o;
      o.rank = rank;
      o.world = world;
      o.batch_rows = 128;
      o.seed = 5;
      o.shuffle = c.shuffle;
      o.threads = c.threads;
      o.direct_io = c.direct;
      o.shuffle_window_rows = 3000;
      auto l = Loader::Open(path, "latest", o);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      EXPECT_EQ(l->direct_io(), c.direct);
      for (uint64_t e = 0; e < 2; ++e) {
        auto ids = Epoch(*l, 6);
        EXPECT_EQ(ids, l->plan().EpochRows(e)) << "the loader delivers the plan's order";
        if (e == 0) all.insert(all.end(), ids.begin(), ids.end());
      }
    }
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 20011u);
    for (uint64_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, LoaderTest,
                         ::testing::Values(Config{false, 0, 1, true}, Config{true, 0, 1, true},
                                           Config{true, 0, 3, true}, Config{false, 3, 2, true},
                                           Config{true, 3, 1, true}, Config{true, 0, 2, false},
                                           Config{true, 0, 2, true, "blosc-lz4"},
                                           Config{false, 0, 1, true, "blosc-zstd"}),
                         // Stable names (the default prints the struct's bytes).
                         [](const ::testing::TestParamInfo<Config>& p) {
                           const Config& c = p.param;
                           std::string codec = c.codec.empty() ? "deflate" : c.codec;
                           std::replace(codec.begin(), codec.end(), '-', '_');
                           return fmt::format("shuffle{}_level{}_threads{}_{}_{}",
                                              c.shuffle ? 1 : 0, c.compression, c.threads,
                                              c.direct ? "direct" : "buffered", codec);
                         });

TEST(Loader, SaveAndRestoreContinueExactly) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 5000, .features = 3, .chunk_rows = 256});
  LoaderOptions o;
  o.batch_rows = 64;
  o.seed = 11;
  o.shuffle_window_rows = 300;
  auto ref = Loader::Open(path, "", o);
  ASSERT_TRUE(ref.ok());
  std::vector<std::vector<uint64_t>> expected;
  for (int i = 0; i < 250; ++i) {  // more than three epochs
    auto b = ref->Next();
    ASSERT_TRUE(b.ok());
    expected.emplace_back(b->row_ids().begin(), b->row_ids().end());
  }
  for (int cut : {0, 1, 5, 78, 79, 80, 200}) {
    auto a = Loader::Open(path, "", o);
    ASSERT_TRUE(a.ok());
    for (int i = 0; i < cut; ++i) ASSERT_TRUE(a->Next().ok());
    std::string saved = a->Save().ToString();
    auto b = Loader::Open(path, "", o);
    ASSERT_TRUE(b.ok());
    auto pos = Position::Parse(saved);
    ASSERT_TRUE(pos.ok()) << saved;
    ASSERT_TRUE(b->Restore(*pos).ok());
    EXPECT_EQ(b->epoch(), pos->epoch);
    EXPECT_EQ(b->step(), pos->step);
    for (int i = cut; i < cut + 30; ++i) {
      auto batch = b->Next();
      ASSERT_TRUE(batch.ok());
      ASSERT_EQ(std::vector<uint64_t>(batch->row_ids().begin(), batch->row_ids().end()),
                expected[i])
          << "cut " << cut;
    }
    // Restoring the same loader again (rewind) also works.
    ASSERT_TRUE(a->Restore(*pos).ok());
    auto again = a->Next();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(std::vector<uint64_t>(again->row_ids().begin(), again->row_ids().end()),
              expected[cut]);
  }
}

TEST(Loader, PositionFromAnotherLayoutIsRefused) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1000, .features = 2});
  LoaderOptions o;
  o.batch_rows = 10;
  auto a = Loader::Open(path, "", o);
  ASSERT_TRUE(a->Next().ok());
  Position p = a->Save();
  o.world = 2;
  auto b = Loader::Open(path, "", o);
  Status st = b->Restore(p);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("another sharding"), std::string::npos);
  EXPECT_TRUE(b->Restore(Position::EpochStart(3)).ok()) << "an epoch start fits any layout";
  EXPECT_EQ(b->epoch(), 3u);
  EXPECT_FALSE(b->Restore(Position{0, 3, 0}).ok());
  EXPECT_FALSE(Position::Parse("epoch=1 step=x fingerprint=0").ok());
  EXPECT_FALSE(Position::Parse("epoch=1").ok());
  EXPECT_EQ(Position::Parse(p.ToString())->fingerprint, p.fingerprint);
}

TEST(Loader, EpochLimitAndDone) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 100, .features = 2});
  LoaderOptions o;
  o.batch_rows = 30;
  o.epochs = 2;
  auto l = Loader::Open(path, "", o);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->batches_per_epoch(), 4u);
  int n = 0;
  std::vector<size_t> sizes;
  while (!l->done()) {
    auto b = l->Next();
    ASSERT_TRUE(b.ok());
    sizes.push_back(b->rows());
    ++n;
  }
  EXPECT_EQ(n, 8);
  EXPECT_EQ(sizes[3], 10u) << "short last batch";
  EXPECT_EQ(l->Next().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(l->stats().batches, 8u);
  EXPECT_EQ(l->stats().rows, 200u);
}

TEST(Loader, BatchesOutliveTheLoader) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1000, .features = 4});
  std::vector<Batch> kept;
  {
    LoaderOptions o;
    o.batch_rows = 100;
    auto l = Loader::Open(path, "", o);
    for (int i = 0; i < 25; ++i) kept.push_back(*l->Next());
  }
  for (auto& b : kept) CheckBatch(b, 4, true);
  kept[0].mutable_x()[0] = -1;  // the buffer is the batch's own
  EXPECT_EQ(kept[0].x()[0], -1);
}

TEST(Loader, NoLabelsAndDropLast) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1001, .features = 2, .labels = false});
  LoaderOptions o;
  o.batch_rows = 100;
  o.world = 2;
  o.rank = 1;
  o.drop_last = true;
  auto l = Loader::Open(path, "", o);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->has_labels());
  EXPECT_EQ(l->batches_per_epoch(), 5u);
  auto ids = Epoch(*l, 2, false);
  EXPECT_EQ(ids.size(), 500u);
}

TEST(Loader, BadOptionsAndVersions) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10, .features = 2});
  LoaderOptions o;
  o.rank = 2;
  o.world = 2;
  EXPECT_FALSE(Loader::Open(path, "", o).ok());
  o = {};
  o.threads = 0;
  EXPECT_FALSE(Loader::Open(path, "", o).ok());
  EXPECT_EQ(Loader::Open(path, "v2", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Loader::Open(dir / "nope.h5", "", {}).status().code(), StatusCode::kNotFound);
  o = {};
  o.verify = true;
  EXPECT_TRUE(Loader::Open(path, "", o).ok());
}

TEST(Loader, UndisturbedByAWriterAddingAVersion) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 30000, .features = 8, .chunk_rows = 512});
  LoaderOptions o;
  o.batch_rows = 256;
  o.seed = 3;
  auto l = Loader::Open(path, "v1", o);
  ASSERT_TRUE(l.ok());
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i)
      MakeVersion(path, {.rows = 20000, .features = 8, .chunk_rows = 512});
  });
  std::vector<uint64_t> ids;
  for (int e = 0; e < 3; ++e) {
    auto got = Epoch(*l, 8);
    ids.insert(ids.end(), got.begin(), got.end());
  }
  writer.join();
  EXPECT_EQ(ids.size(), 90000u);
  auto fresh = Loader::Open(path, "latest", o);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->info().name, "v4");
}

TEST(Loader, AccessCheckApplies) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10, .features = 2, .zone = "ae"});
  ScopedEnv z("HPCML_ZONE", "eu");
  ScopedEnv d("HPCML_DATASETS", *CanonicalPath(path, true));
  EXPECT_EQ(Loader::Open(path, "", {}).status().code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace hpcml::featurecache

namespace hpcml::featurecache {
namespace {

// A batch's features are a float array on float alignment whatever offset
// the version's chunks have in the file (they follow metadata of any size;
// XGBoost's array interface, for one, refuses a misaligned pointer). Many
// versions of odd sizes in one file put chunks at offsets of every residue.
TEST(Loader, BatchFeaturesAreFloatAligned) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  for (uint64_t v = 0; v < 12; ++v) {
    const VersionInfo info =
        MakeVersion(path, {.rows = 37 + 13 * v, .features = 1 + v % 3, .chunk_rows = 5 + v});
    for (bool direct : {true, false}) {
      LoaderOptions o;
      o.batch_rows = 8;
      o.shuffle = false;
      o.direct_io = direct;
      auto l = Loader::Open(path, info.name, o);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      for (uint64_t s = 0; s < l->batches_per_epoch(); ++s) {
        auto b = l->Next();
        ASSERT_TRUE(b.ok());
        const auto at = reinterpret_cast<std::uintptr_t>(b->x().data());
        ASSERT_EQ(at % alignof(float), 0u) << info.name << " batch " << s << " direct " << direct;
        CheckBatch(*b, info.features(), true);
      }
    }
  }
}

}  // namespace
}  // namespace hpcml::featurecache
