#include "hpcml/common/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hpcml {
namespace {

TEST(Parallel, PartsCoverTheRangeOnceInOrder) {
  for (unsigned parts : {0u, 1u, 2u, 3u, 7u}) {
    for (size_t n : {0u, 1u, 5u, 1000u}) {
      std::vector<int> hits(n, 0);
      std::vector<std::pair<size_t, size_t>> seen(std::max(1u, parts));
      ParallelFor(parts, n, [&](unsigned p, size_t b, size_t e) {
        seen[p] = {b, e};
        for (size_t i = b; i < e; ++i) ++hits[i];
      });
      for (int h : hits) EXPECT_EQ(h, 1) << parts << " parts of " << n;
      for (size_t p = 1; p < seen.size(); ++p) EXPECT_EQ(seen[p].first, seen[p - 1].second);
      EXPECT_EQ(seen.back().second, n);
    }
  }
}

TEST(Parallel, PartsRunOnTheirOwnThreadsAndZeroOnTheCaller) {
  std::vector<std::thread::id> ids(3);
  ParallelFor(3, 3, [&](unsigned p, size_t, size_t) { ids[p] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[1]);
}

TEST(Parallel, AvailableCpusIsAtLeastOne) {
  EXPECT_GE(AvailableCpus(), 1u);
}

}  // namespace
}  // namespace hpcml
