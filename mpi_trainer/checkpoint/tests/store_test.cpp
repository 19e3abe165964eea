#include "hpcml/checkpoint/store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_dir.hpp"

namespace hpcml::checkpoint {
namespace {

constexpr std::int64_t kRows = 6, kCols = 4;

float Value(std::int64_t step, std::int64_t r, std::int64_t c) {
  return static_cast<float>(step * 1000 + r * 10 + c);
}

// Saves step `step` as `parts` ranks each owning a block of rows of the
// matrix "w" plus a whole copy of the vector "b" owned by rank 0 only.
void SaveRows(const CheckpointDir& d, std::int64_t step, int parts) {
  Manifest m;
  m.step = step;
  m.state = {{"layout", fmt::format("{}x1x1", parts)},
             {"loader", {{"epoch", 1}, {"offset", step}}}};
  for (int r = 0; r < parts; ++r) {
    Slice s = *SplitAlong({kRows, kCols}, 0, r, parts);
    std::vector<float> data;
    for (std::int64_t i = 0; i < s.shape[0]; ++i) {
      for (std::int64_t j = 0; j < kCols; ++j) data.push_back(Value(step, s.offset[0] + i, j));
    }
    std::vector<float> bias{1.f, 2.f, 3.f};
    std::vector<TensorRef> t{{"w", {kRows, kCols}, s, data.data()}};
    if (r == 0) t.push_back({"b", {3}, Whole({3}), bias.data()});
    auto info = d.WriteShard(step, r, t, {{"rng", r * 7}});
    ASSERT_TRUE(info.ok()) << info.status().message();
    EXPECT_EQ(info->checksum.size(), 9u + 32u);
    m.shards.push_back(*info);
  }
  ASSERT_TRUE(d.Commit(m).ok());
}

class StoreTest : public TempDirTest {};

TEST_F(StoreTest, SaveAndLoadAcrossLayouts) {
  auto d = CheckpointDir::Open(dir(), 3);
  ASSERT_TRUE(d.ok());
  SaveRows(*d, 5, 3);  // saved by 3 ranks, row blocks
  std::vector<std::string> warnings;
  auto set = d->LoadLatest(true, &warnings);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(set->manifest().step, 5);
  EXPECT_EQ(set->manifest().state["loader"]["offset"], 5);
  EXPECT_EQ(*set->GlobalShape("w"), (Shape{kRows, kCols}));
  // Loaded by 2 ranks owning column halves: every element comes back.
  for (int half = 0; half < 2; ++half) {
    Slice want = *SplitAlong({kRows, kCols}, 1, half, 2);
    std::vector<float> out(static_cast<size_t>(want.elements()));
    ASSERT_TRUE(set->Read("w", want, out.data()).ok());
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t c = 0; c < 2; ++c) {
        EXPECT_EQ(out[static_cast<size_t>(r * 2 + c)], Value(5, r, half * 2 + c));
      }
    }
  }
  std::vector<float> b(3);
  ASSERT_TRUE(set->Read("b", Whole({3}), b.data()).ok());
  EXPECT_EQ(b, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((*set->RankState(2))["rng"], 14);
  EXPECT_FALSE(set->RankState(3).ok());
  EXPECT_FALSE(set->Read("missing", Whole({3}), b.data()).ok());
  EXPECT_FALSE(set->Read("w", Whole({3}), b.data()).ok());  // wrong rank
}

TEST_F(StoreTest, KeepsTheNewestSets) {
  auto d = CheckpointDir::Open(dir(), 2);
  ASSERT_TRUE(d.ok());
  for (std::int64_t step : {10, 20, 30, 40}) SaveRows(*d, step, 2);
  EXPECT_EQ(d->ListSteps(), (std::vector<std::int64_t>{40, 30}));
}

TEST_F(StoreTest, IgnoresASetWithoutManifest) {
  auto d = CheckpointDir::Open(dir(), 3);
  ASSERT_TRUE(d.ok());
  SaveRows(*d, 10, 2);
  // A writer killed before the commit: shards but no manifest.
  std::vector<float> data(static_cast<size_t>(kRows * kCols), 0.f);
  ASSERT_TRUE(
      d->WriteShard(11, 0, {{"w", {kRows, kCols}, Whole({kRows, kCols}), data.data()}}, {}).ok());
  std::vector<std::string> warnings;
  auto set = d->LoadLatest(true, &warnings);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->manifest().step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no manifest"), std::string::npos);
}

TEST_F(StoreTest, CorruptShardFallsBackToThePreviousSet) {
  auto d = CheckpointDir::Open(dir(), 3);
  ASSERT_TRUE(d.ok());
  SaveRows(*d, 1, 2);
  SaveRows(*d, 2, 2);
  // Flip one bit of a stored value in a shard of the newest set (rank 1
  // holds rows 3..5; row 4, column 1 of step 2 is 2041.0f).
  std::string shard = d->SetPath(2) + "/shard-00001.h5";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    float v = Value(2, 4, 1);
    auto at = bytes.find(std::string(reinterpret_cast<const char*>(&v), sizeof v));
    ASSERT_NE(at, std::string::npos);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<std::string> warnings;
  auto set = d->LoadLatest(true, &warnings);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->manifest().step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("checksum mismatch"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("shard-00001.h5"), std::string::npos) << warnings[0];
  // A truncated shard is caught even without checksums (size check).
  std::filesystem::resize_file(d->SetPath(1) + "/shard-00000.h5", 100);
  auto truncated = d->Load(1, false);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("100 bytes, manifest says"), std::string::npos)
      << truncated.status().message();
}

TEST_F(StoreTest, DamagedManifestIsNotUsed) {
  auto d = CheckpointDir::Open(dir(), 3);
  ASSERT_TRUE(d.ok());
  SaveRows(*d, 1, 1);
  SaveRows(*d, 2, 1);
  std::ofstream(d->SetPath(2) + "/manifest.json") << "{\"version\": 1, \"step\": ";
  std::vector<std::string> warnings;
  auto set = d->LoadLatest(true, &warnings);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->manifest().step, 1);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST_F(StoreTest, EmptyDirectoryIsAFreshStart) {
  auto d = CheckpointDir::Open(dir() + "/new/sub", 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->LoadLatest(true, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(CheckpointDir::Open(dir(), 0).ok());
}

}  // namespace
}  // namespace hpcml::checkpoint
