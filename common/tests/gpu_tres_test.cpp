#include "hpcml/common/gpu_tres.hpp"

#include <gtest/gtest.h>

namespace hpcml {
namespace {

double Total(std::string_view tres) {
  auto g = ParseGpuTres(tres);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? g->total() : -1;
}

TEST(GpuTres, TypedAndUntypedCountOnce) {
  EXPECT_EQ(Total("cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2"), 2);
  EXPECT_EQ(Total("cpu=1,gres/gpu:h100=3,gres/gpu=3"), 3);
}

// AccountingStorageTRES=gres/gpu:h100 only: the job record has no untyped
// entry, and its GPUs must still count.
TEST(GpuTres, OnlyTypedEntriesCount) {
  EXPECT_EQ(Total("cpu=2,gres/gpu:h100=3"), 3);
  EXPECT_EQ(Total("gres/gpu:h100=2,gres/gpu:a100=2,node=2"), 4);
}

TEST(GpuTres, TwoTypesOverTwoNodes) {
  auto g = ParseGpuTres("cpu=2,gres/gpu=4,gres/gpu:a100=2,gres/gpu:h100=2,node=2");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->total(), 4);
  EXPECT_EQ(g->of_no_type(), 0);
  ASSERT_EQ(g->typed.size(), 2u);
  EXPECT_EQ(g->typed[0].first, "a100");
}

TEST(GpuTres, UntypedBeyondTheTypedOnesHaveNoType) {
  auto g = ParseGpuTres("gres/gpu:h100=1,gres/gpu=3");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->total(), 3);
  EXPECT_EQ(g->of_no_type(), 2);
}

TEST(GpuTres, NoGpus) {
  EXPECT_EQ(Total("cpu=1,mem=1G"), 0);
  EXPECT_EQ(Total("gres/gpumem=16G,gres/gpuutil=40"), 0);
  EXPECT_EQ(Total(""), 0);
}

TEST(GpuTres, RepeatedTypeReplaces) {
  EXPECT_EQ(Total("gres/gpu:h100=1,gres/gpu:h100=2"), 2);
}

TEST(GpuTres, MalformedCountsAreErrors) {
  for (std::string_view bad : {"gres/gpu=x", "gres/gpu=", "gres/gpu=99999999999", "gres/gpu",
                               "gres/gpu:h100=-1", "gres/gpu:=1", "gres/gpu:h100=1.5"}) {
    EXPECT_FALSE(ParseGpuTres(bad).ok()) << bad;
  }
}

TEST(GpuTres, AddTakesOnlyGpuEntries) {
  GpuTres g;
  EXPECT_FALSE(*g.Add("gres/gpuX", 1));
  EXPECT_FALSE(*g.Add("cpu", 1));
  EXPECT_TRUE(*g.Add("gres/gpu:l40s", 1));
  EXPECT_EQ(g.total(), 1);
}

}  // namespace
}  // namespace hpcml
