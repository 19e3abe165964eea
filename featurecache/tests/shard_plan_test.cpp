#include "hpcml/featurecache/shard_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace hpcml::featurecache {
namespace {

ShardPlan Make(uint64_t n, uint64_t r, uint32_t rank, uint32_t world, uint64_t b, uint64_t window,
               bool shuffle, bool drop_last, uint64_t seed = 1) {
  ShardSpec s;
  s.rows = n;
  s.chunk_rows = r;
  s.rank = rank;
  s.world = world;
  s.batch_rows = b;
  s.window_rows = window;
  s.shuffle = shuffle;
  s.drop_last = drop_last;
  s.seed = seed;
  auto p = ShardPlan::Make(s);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

struct Case {
  uint64_t n, r, b, window;
  uint32_t world;
};

TEST(ShardPlan, DisjointCompleteAndLockStep) {
  for (Case c : {Case{1000, 64, 32, 100, 1}, Case{1000, 64, 32, 100, 3}, Case{1001, 100, 7, 1, 4},
                 Case{10, 3, 4, 8, 4}, Case{5, 2, 1, 1, 8}, Case{12345, 1000, 128, 2000, 6},
                 Case{9, 4, 2, 2, 2}}) {
    for (bool shuffle : {false, true}) {
      for (uint64_t epoch : {0, 1, 5}) {
        std::vector<uint64_t> all;
        uint64_t steps = 0;
        for (uint32_t rank = 0; rank < c.world; ++rank) {
          ShardPlan p = Make(c.n, c.r, rank, c.world, c.b, c.window, shuffle, false);
          if (rank == 0) steps = p.batches_per_epoch();
          EXPECT_EQ(p.batches_per_epoch(), steps) << "every rank the same number of batches";
          auto rows = p.EpochRows(epoch);
          uint64_t sum = 0;
          for (uint64_t s = 0; s < p.batches_per_epoch(); ++s) {
            EXPECT_LE(p.batch_size(s), c.b);
            if (s + 1 < p.batches_per_epoch() && p.batch_size(s + 1) > 0) {
              EXPECT_EQ(p.batch_size(s), c.b);
            }
            sum += p.batch_size(s);
          }
          EXPECT_EQ(sum, rows.size());
          all.insert(all.end(), rows.begin(), rows.end());
        }
        std::sort(all.begin(), all.end());
        ASSERT_EQ(all.size(), c.n) << "n=" << c.n << " world=" << c.world;
        for (uint64_t i = 0; i < c.n; ++i) ASSERT_EQ(all[i], i) << "every row exactly once";
      }
    }
  }
}

TEST(ShardPlan, DropLastGivesEqualFullBatches) {
  const uint64_t n = 1003;
  const uint32_t world = 4;
  std::set<uint64_t> seen;
  for (uint32_t rank = 0; rank < world; ++rank) {
    ShardPlan p = Make(n, 50, rank, world, 16, 64, true, true);
    EXPECT_EQ(p.batches_per_epoch(), (n / world) / 16);
    for (uint64_t s = 0; s < p.batches_per_epoch(); ++s) EXPECT_EQ(p.batch_size(s), 16u);
    for (uint64_t r : p.EpochRows(0)) EXPECT_TRUE(seen.insert(r).second) << "disjoint";
  }
  EXPECT_EQ(seen.size(), world * (n / world / 16) * 16);
  ShardSpec tiny;
  tiny.rows = 10;
  tiny.chunk_rows = 4;
  tiny.world = 4;
  tiny.batch_rows = 4;
  tiny.drop_last = true;
  EXPECT_FALSE(ShardPlan::Make(tiny).ok()) << "less than one batch per rank";
}

TEST(ShardPlan, UnevenRuleAsDocumented) {
  // 10 rows, 4 ranks: shards of 3, 3, 2, 2 rows; batches of 2 give 2 steps on
  // every rank: 2 + 1 rows on ranks 0 and 1, 2 + 0 (an empty batch keeps them
  // in step) on ranks 2 and 3.
  for (uint32_t rank = 0; rank < 4; ++rank) {
    ShardPlan p = Make(10, 10, rank, 4, 2, 2, false, false);
    EXPECT_EQ(p.batches_per_epoch(), 2u);
    EXPECT_EQ(p.rows_per_epoch(), rank < 2 ? 3u : 2u);
    EXPECT_EQ(p.shard_begin(), std::vector<uint64_t>({0, 3, 6, 8})[rank]);
    EXPECT_EQ(p.batch_size(0), 2u);
    EXPECT_EQ(p.batch_size(1), rank < 2 ? 1u : 0u);
  }
}

TEST(ShardPlan, OrderDependsOnSeedAndEpochOnly) {
  ShardPlan a = Make(5000, 100, 1, 3, 10, 200, true, false, 42);
  ShardPlan b = Make(5000, 100, 1, 3, 10, 200, true, false, 42);
  ShardPlan c = Make(5000, 100, 1, 3, 10, 200, true, false, 43);
  EXPECT_EQ(a.EpochRows(3), b.EpochRows(3));
  EXPECT_NE(a.EpochRows(3), a.EpochRows(4));
  EXPECT_NE(a.EpochRows(3), c.EpochRows(3));
  ShardPlan plain = Make(5000, 100, 1, 3, 10, 200, false, false, 42);
  auto rows = plain.EpochRows(7);
  for (size_t i = 0; i < rows.size(); ++i)
    ASSERT_EQ(rows[i], plain.shard_begin() + i) << "unshuffled: in order";
}

TEST(ShardPlan, ShuffleIsChunkOrderPlusWindowShuffle) {
  ShardPlan p = Make(4000, 100, 0, 1, 50, 200, true, false, 9);
  auto order = p.Order(2);
  std::vector<Piece> pieces;
  std::vector<uint32_t> perm;
  p.Window(*order, 0, &pieces, &perm);
  // Window 0 = the first 200 positions = the first two chunks of the order.
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].row, order->chunks[0] * 100);
  EXPECT_EQ(pieces[0].count, 100u);
  EXPECT_EQ(pieces[1].row, order->chunks[1] * 100);
  ASSERT_EQ(perm.size(), 200u);
  std::vector<uint32_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(perm, sorted);
}

TEST(ShardPlan, PartialLastChunkAnywhereInTheOrder) {
  for (uint64_t epoch = 0; epoch < 20; ++epoch) {
    ShardPlan p = Make(1050, 100, 0, 1, 30, 30, true, false, epoch);
    auto rows = p.EpochRows(epoch);
    std::vector<uint64_t> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < 1050; ++i) ASSERT_EQ(sorted[i], i);
  }
}

TEST(ShardPlan, BadSpecs) {
  ShardSpec s;
  s.rows = 10;
  s.chunk_rows = 2;
  s.batch_rows = 2;
  s.world = 0;
  EXPECT_FALSE(ShardPlan::Make(s).ok());
  s.world = 2;
  s.rank = 2;
  EXPECT_FALSE(ShardPlan::Make(s).ok());
  s.rank = 0;
  s.batch_rows = 0;
  EXPECT_FALSE(ShardPlan::Make(s).ok());
  s.batch_rows = 1;
  s.rows = 0;
  EXPECT_FALSE(ShardPlan::Make(s).ok());
}

TEST(Rng, FixedSequenceAndUnbiasedRange) {
  // Pinned values: the order must not change between builds or platforms.
  Rng a(12345);
  uint64_t first = a.Next();
  Rng b(12345);
  EXPECT_EQ(b.Next(), first);
  EXPECT_EQ(MixSeed(1, 2, 3, 4), MixSeed(1, 2, 3, 4));
  EXPECT_NE(MixSeed(1, 2, 3, 4), MixSeed(1, 2, 4, 3));
  Rng c(1);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[c.Below(6)];
  for (int n : counts) EXPECT_NEAR(n, 10000, 500);
}

}  // namespace
}  // namespace hpcml::featurecache
