#include "external_sort.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

struct Rec {
  std::array<uint64_t, 2> key;
  uint32_t payload;
  bool operator<(const Rec& o) const { return key < o.key; }
};

// Keys (rng() % first_range, i) by default; `wide`: both words over all 64
// bits (too wide for the packed radix sort: the comparison sort).
void Check(uint64_t n, uint64_t budget, size_t expect_min_runs, uint64_t first_range = 1000,
           bool wide = false) {
  testing::TempDir dir;
  std::mt19937_64 rng(n);
  std::vector<Rec> recs(n);
  ExternalSorter s(2, sizeof(uint32_t), budget, dir.path());
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t first = first_range == 0 ? rng() : rng() % first_range;
    recs[i] = {{first, wide ? rng() : i}, static_cast<uint32_t>(rng())};
    ASSERT_TRUE(s.Add(recs[i].key.data(), &recs[i].payload).ok());
  }
  ASSERT_TRUE(s.Finish().ok());
  EXPECT_GE(s.runs(), expect_min_runs);
  EXPECT_EQ(s.count(), n);
  std::sort(recs.begin(), recs.end());
  const uint64_t* k = nullptr;
  const uint8_t* p = nullptr;
  for (uint64_t i = 0; i < n; ++i) {
    auto more = s.Next(&k, &p);
    ASSERT_TRUE(more.ok() && *more) << i;
    ASSERT_EQ(k[0], recs[i].key[0]);
    ASSERT_EQ(k[1], recs[i].key[1]);
    uint32_t payload;
    std::memcpy(&payload, p, sizeof payload);
    ASSERT_EQ(payload, recs[i].payload);
  }
  auto end = s.Next(&k, &p);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  // Spill files are anonymous: nothing is left in the directory.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(ExternalSort, InMemory) {
  Check(10000, 64 << 20, 0);
}
TEST(ExternalSort, ManyRuns) {
  Check(300000, 1 << 20, 5);
}
// The packed radix sort: a first word over all 64 bits, or with only high
// bits varying (its low bits are equal in every record and are dropped).
TEST(ExternalSort, FullWidthAndHighBitKeys) {
  Check(20000, 64 << 20, 0, 0);
  Check(20000, 1 << 20, 2, 0);
  testing::TempDir dir;
  ExternalSorter s(1, 0, 64 << 20, dir.path());
  std::vector<uint64_t> keys;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) keys.push_back((rng() % 7) << 58);
  for (uint64_t k : keys) ASSERT_TRUE(s.Add(&k, nullptr).ok());
  std::sort(keys.begin(), keys.end());
  const uint64_t* k = nullptr;
  const uint8_t* p = nullptr;
  for (uint64_t want : keys) {
    auto more = s.Next(&k, &p);
    ASSERT_TRUE(more.ok() && *more);
    ASSERT_EQ(*k, want);
  }
}
// Keys wider than 128 bits: the comparison sort, in memory and in runs.
TEST(ExternalSort, WideKeysFallBack) {
  Check(20000, 64 << 20, 0, 0, true);
  Check(20000, 1 << 20, 2, 0, true);
}
TEST(ExternalSort, Empty) {
  Check(0, 1 << 20, 0);
}

TEST(ExternalSort, OrderedKeysKeepSignedOrder) {
  std::vector<int64_t> v = {-5, 3, INT64_MIN, 0, INT64_MAX, -1};
  std::vector<uint64_t> k;
  for (auto x : v) k.push_back(OrderedKey(x));
  std::sort(v.begin(), v.end());
  std::sort(k.begin(), k.end());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(FromOrderedKey(k[i]), v[i]);
}

TEST(ExternalSort, AddAfterFinishFails) {
  ExternalSorter s(1, 0, 1 << 20, "");
  uint64_t key = 1;
  ASSERT_TRUE(s.Add(&key, nullptr).ok());
  ASSERT_TRUE(s.Finish().ok());
  EXPECT_FALSE(s.Add(&key, nullptr).ok());
}

}  // namespace
}  // namespace hpcml::featurecache
