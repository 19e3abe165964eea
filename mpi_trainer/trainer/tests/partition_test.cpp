#include "hpcml/trainer/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace hpcml::trainer {
namespace {

ModelConfig Mlp(std::vector<std::int64_t> hidden, std::int64_t in = 8, std::int64_t out = 4) {
  ModelConfig c;
  c.input_dim = in;
  c.hidden = std::move(hidden);
  c.output_dim = out;
  return c;
}

TEST(Partition, SerialKeepsEveryLayerWholeOnOneStage) {
  auto part = PartitionModel(Mlp({16, 16}), GridShape{});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  ASSERT_EQ(part->layers.size(), 3u);
  for (const LayerPartition& l : part->layers) {
    EXPECT_EQ(l.split, Split::kReplicated);
    EXPECT_EQ(l.stage, 0);
  }
  EXPECT_TRUE(part->layers[0].activation);
  EXPECT_FALSE(part->layers[2].activation);
  EXPECT_EQ(part->stage_begin, (std::vector<int>{0, 3}));
  EXPECT_EQ(part->layers[0].in, 8);
  EXPECT_EQ(part->layers[2].out, 4);
}

TEST(Partition, TensorParallelPairsColumnThenRowAndLeavesOddLastLayerReplicated) {
  auto part = PartitionModel(Mlp({16, 16}), GridShape{1, 1, 2});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->layers[0].split, Split::kColumn);
  EXPECT_EQ(part->layers[1].split, Split::kRow);
  EXPECT_EQ(part->layers[2].split, Split::kReplicated);
}

TEST(Partition, StageBoundariesNeverCutAPair) {
  auto part = PartitionModel(Mlp({16, 16, 16}), GridShape{1, 2, 2});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  // Pairs (0,1), (2,3): the only cut is at 2.
  EXPECT_EQ(part->stage_begin, (std::vector<int>{0, 2, 4}));
}

TEST(Partition, StagesAreBalancedByCost) {
  // Layer costs: 8*64, 64*8, 8*8, 8*8, 8*4: the first two dominate.
  auto part = PartitionModel(Mlp({64, 8, 8, 8}), GridShape{1, 2, 1});
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->stage_begin, (std::vector<int>{0, 1, 5}));
}

// A layer costs forward, weight and input gradient; the first one has no
// input gradient. Widths 2560 -> 1024 x 3 -> 1024: in units of 1024 x 1024
// products the layers cost 5, 3, 3, 3, so the stages are {0, 1} and {2, 3}
// (8 and 6). Counting in x out alone (2.5, 1, 1, 1) would cut after layer 0
// and leave the second stage 9 against 5.
TEST(Partition, TheFirstLayerCostsNoInputGradient) {
  auto part = PartitionModel(Mlp({1024, 1024, 1024}, 2560, 1024), GridShape{1, 2, 1});
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->stage_begin, (std::vector<int>{0, 2, 4}));
}

TEST(Partition, RejectsTensorParallelismThatDoesNotDivideAWidth) {
  auto part = PartitionModel(Mlp({15, 16}), GridShape{1, 1, 2});
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("--tp 2 does not divide the width 15"), std::string::npos)
      << part.status().message();
}

TEST(Partition, RejectsMoreStagesThanLayers) {
  auto part = PartitionModel(Mlp({16}), GridShape{1, 3, 1});
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("--pp 3"), std::string::npos) << part.status().message();
  // With tp = 2, four layers form two pairs: three stages do not fit.
  EXPECT_FALSE(PartitionModel(Mlp({16, 16, 16}), GridShape{1, 3, 2}).ok());
  EXPECT_TRUE(PartitionModel(Mlp({16, 16, 16}), GridShape{1, 4, 1}).ok());
}

TEST(Partition, RejectsBadModelConfig) {
  EXPECT_FALSE(PartitionModel(Mlp({16}, 0), GridShape{}).ok());
  EXPECT_FALSE(PartitionModel(Mlp({0}), GridShape{}).ok());
  EXPECT_FALSE(PartitionModel(Mlp({16}, 8, 1), GridShape{}).ok());  // cross-entropy needs 2 classes
}

TEST(Partition, PartitionByCostMinimisesTheLargestRun) {
  EXPECT_EQ(PartitionByCost({1, 1, 1, 1}, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(PartitionByCost({4, 1, 1, 1, 1}, 2), (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(PartitionByCost({1, 2, 3}, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(PartitionByCost({5}, 1), (std::vector<int>{0, 1}));
}

TEST(Partition, ParsesNames) {
  EXPECT_EQ(*ParseActivation("gelu"), Activation::kGelu);
  EXPECT_EQ(*ParseLoss("mse"), LossKind::kMse);
  EXPECT_EQ(*ParseSchedule("1f1b"), ScheduleKind::k1F1B);
  EXPECT_FALSE(ParseActivation("sigmoid").ok());
  EXPECT_FALSE(ParseLoss("l1").ok());
  EXPECT_FALSE(ParseSchedule("zb").ok());
}

// Every microbatch runs forward once and backward once, forward first, and
// backwards in microbatch order.
void CheckScheduleWellFormed(const std::vector<PipeOp>& ops, int m) {
  ASSERT_EQ(ops.size(), static_cast<size_t>(2 * m));
  std::set<int> fwd;
  int next_bwd = 0;
  for (const PipeOp& op : ops) {
    if (op.forward) {
      EXPECT_TRUE(fwd.insert(op.microbatch).second);
    } else {
      EXPECT_TRUE(fwd.count(op.microbatch));
      EXPECT_EQ(op.microbatch, next_bwd++);
    }
  }
}

TEST(Schedule, GpipeRunsAllForwardsFirst) {
  auto ops = BuildSchedule(ScheduleKind::kGpipe, 4, 1, 3);
  CheckScheduleWellFormed(ops, 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ops[static_cast<size_t>(i)].forward);
}

TEST(Schedule, OneFOneBLimitsMicrobatchesInFlight) {
  for (int p : {1, 2, 4}) {
    for (int s = 0; s < p; ++s) {
      for (int m : {1, 2, 3, 8}) {
        auto ops = BuildSchedule(ScheduleKind::k1F1B, p, s, m);
        CheckScheduleWellFormed(ops, m);
        int in_flight = 0, peak = 0;
        for (const PipeOp& op : ops) {
          in_flight += op.forward ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        EXPECT_LE(peak, std::min(p - s, m)) << "p=" << p << " s=" << s << " m=" << m;
      }
    }
  }
  // Last stage alternates strictly: F0 B0 F1 B1.
  EXPECT_EQ(BuildSchedule(ScheduleKind::k1F1B, 2, 1, 2),
            (std::vector<PipeOp>{{true, 0}, {false, 0}, {true, 1}, {false, 1}}));
  // First of two stages: one warm-up forward.
  EXPECT_EQ(BuildSchedule(ScheduleKind::k1F1B, 2, 0, 2),
            (std::vector<PipeOp>{{true, 0}, {true, 1}, {false, 0}, {false, 1}}));
}

TEST(Schedule, IdealBubble) {
  EXPECT_DOUBLE_EQ(IdealBubble(1, 4), 0.0);
  EXPECT_DOUBLE_EQ(IdealBubble(4, 4), 3.0 / 7.0);
}

}  // namespace
}  // namespace hpcml::trainer
