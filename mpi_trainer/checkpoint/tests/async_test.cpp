#include "hpcml/checkpoint/async.hpp"

#include <gtest/gtest.h>

#include "test_dir.hpp"

namespace hpcml::checkpoint {
namespace {

class AsyncTest : public TempDirTest {};

TEST_F(AsyncTest, WritesTheSnapshotNotTheLaterBuffer) {
  auto d = CheckpointDir::Open(dir(), 2);
  ASSERT_TRUE(d.ok());
  std::vector<float> w(1 << 16, 1.0f);
  AsyncWriter writer(*d);
  ASSERT_TRUE(writer.Start(7, 0, {{"w", {1 << 16}, Whole({1 << 16}), w.data()}}, {{"k", 1}}).ok());
  EXPECT_TRUE(writer.in_flight());
  // Training goes on and changes the parameters while the write runs.
  std::fill(w.begin(), w.end(), 2.0f);
  EXPECT_EQ(writer.Start(8, 0, {}, {}).code(), StatusCode::kFailedPrecondition);
  auto info = writer.Wait();
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_FALSE(writer.in_flight());
  Manifest m;
  m.step = 7;
  m.shards.push_back(*info);
  ASSERT_TRUE(d->Commit(m).ok());
  auto set = d->LoadLatest(true, nullptr);
  ASSERT_TRUE(set.ok());
  std::vector<float> back(1 << 16);
  ASSERT_TRUE(set->Read("w", Whole({1 << 16}), back.data()).ok());
  EXPECT_EQ(back.front(), 1.0f);
  EXPECT_EQ(back.back(), 1.0f);
  EXPECT_GE(writer.last_snapshot_s(), 0.0);
  EXPECT_EQ(writer.Wait().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(AsyncTest, ReportsWriteErrors) {
  auto d = CheckpointDir::Open(dir(), 2);
  ASSERT_TRUE(d.ok());
  std::vector<float> w(4, 0.f);
  AsyncWriter writer(*d);
  // A slice whose rank does not match the global shape is refused by the writer thread.
  ASSERT_TRUE(writer.Start(1, 0, {{"w", {4}, Slice{{0, 0}, {2, 2}}, w.data()}}, {}).ok());
  auto info = writer.Wait();
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("tensor 'w'"), std::string::npos)
      << info.status().message();
}

}  // namespace
}  // namespace hpcml::checkpoint
