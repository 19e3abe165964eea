#include "tres.hpp"

#include <gtest/gtest.h>

namespace hpcml::accounting {
namespace {

TEST(AcctTres, TypedAndUntypedEntriesOfOneJobCountOnce) {
  // As sacct prints it with AccountingStorageTRES=gres/gpu,gres/gpu:h100.
  Result<Tres> t = ParseTres("billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,node=1");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(t->gpu_total(), 2);
  EXPECT_DOUBLE_EQ(t->gpus_of("h100"), 2);
  EXPECT_DOUBLE_EQ(t->gpus_of(""), 0);
  EXPECT_DOUBLE_EQ(t->cpus, 2);
  EXPECT_DOUBLE_EQ(t->billing, 2);
  EXPECT_DOUBLE_EQ(t->nodes, 1);
}

TEST(AcctTres, OrderDoesNotMatter) {
  Result<Tres> t = ParseTres("gres/gpu=2,cpu=2,gres/gpu:h100=2");
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->gpu_total(), 2);
  EXPECT_DOUBLE_EQ(t->gpus_of("h100"), 2);
}

TEST(AcctTres, UntypedOnlyIsKeptWithEmptyType) {
  Result<Tres> t = ParseTres("cpu=4,gres/gpu=3,node=1");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->gpus.size(), 1u);
  EXPECT_EQ(t->gpus[0].first, "");
  EXPECT_DOUBLE_EQ(t->gpus[0].second, 3);
}

TEST(AcctTres, TwoTypesAndTheirUntypedSum) {
  Result<Tres> t = ParseTres("cpu=2,gres/gpu:a100=1,gres/gpu:h100=1,gres/gpu=2");
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->gpu_total(), 2);
  EXPECT_DOUBLE_EQ(t->gpus_of("a100"), 1);
  EXPECT_DOUBLE_EQ(t->gpus_of("h100"), 1);
  EXPECT_DOUBLE_EQ(t->gpus_of(""), 0);
}

TEST(AcctTres, UntypedBeyondTypedIsTheRemainder) {
  // 3 GPUs, of which only 1 was allocated by type.
  Result<Tres> t = ParseTres("gres/gpu:h100=1,gres/gpu=3");
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->gpu_total(), 3);
  EXPECT_DOUBLE_EQ(t->gpus_of("h100"), 1);
  EXPECT_DOUBLE_EQ(t->gpus_of(""), 2);
}

TEST(AcctTres, MemoryUnits) {
  EXPECT_DOUBLE_EQ(ParseTres("mem=64G")->mem_mib, 64 * 1024);
  EXPECT_DOUBLE_EQ(ParseTres("mem=16000M")->mem_mib, 16000);
  EXPECT_DOUBLE_EQ(ParseTres("mem=1T")->mem_mib, 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseTres("mem=512K")->mem_mib, 0.5);
  EXPECT_DOUBLE_EQ(ParseTres("mem=1.5G")->mem_mib, 1536);
  EXPECT_DOUBLE_EQ(ParseTres("mem=0")->mem_mib, 0);
  EXPECT_DOUBLE_EQ(ParseTres("mem=2048")->mem_mib, 2048);  // bare = MiB
  EXPECT_DOUBLE_EQ(*ParseMemoryMiB("1P"), 1024.0 * 1024 * 1024);
}

TEST(AcctTres, IgnoresOtherKinds) {
  Result<Tres> t = ParseTres("cpu=1,energy=100,fs/disk=2000,license/matlab=1,gres/shard=4");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(t->gpu_total(), 0);
  EXPECT_DOUBLE_EQ(t->cpus, 1);
}

TEST(AcctTres, EmptyIsNothing) {
  Result<Tres> t = ParseTres("");
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->gpu_total(), 0);
  EXPECT_DOUBLE_EQ(t->cpus, 0);
}

TEST(AcctTres, EmptyEntriesAreSkippedAndBlanksTrimmed) {
  Result<Tres> t = ParseTres(",cpu=1,,gres/gpu:h100=2, gres/gpu=2 ,");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(t->cpus, 1);
  EXPECT_DOUBLE_EQ(t->gpu_total(), 2);
}

TEST(AcctTres, Errors) {
  EXPECT_FALSE(ParseTres("cpu").ok());
  EXPECT_FALSE(ParseTres("=2").ok());
  Result<Tres> bad = ParseTres("cpu=1,gres/gpu=lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gres/gpu=lots"), std::string::npos);
  EXPECT_FALSE(ParseTres("cpu=-1").ok());
  EXPECT_FALSE(ParseTres("gres/gpu:=1").ok());
  Result<Tres> unit = ParseTres("mem=4X");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.status().message().find("unknown unit"), std::string::npos);
  EXPECT_FALSE(ParseTres("mem=G").ok());
}

}  // namespace
}  // namespace hpcml::accounting
