#include "job_environment.hpp"

#include <gtest/gtest.h>

#include "hpcml/common/job_env.hpp"
#include "test_policy.hpp"

namespace hpcml::guard {
namespace {

Policy TestPolicy() {
  auto p = ParsePolicy(testing::kPolicy, "test.toml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

std::string Value(const std::vector<EnvVar>& env, const char* name) {
  for (const EnvVar& v : env)
    if (std::string_view(v.name) == name) return v.value;
  ADD_FAILURE() << name << " not set";
  return "";
}

TEST(JobEnvironment, SetsTheDecisionTheDatasetsAndTheRolesClassifications) {
  Policy policy = TestPolicy();
  Decision d{true, "fraud-analyst", "ae", "allowed", ""};
  auto env = JobEnvironment(policy, d, {"/data/ae/x.h5", "/data/ae/restricted"});
  ASSERT_TRUE(env.ok()) << env.status().message();
  ASSERT_EQ(env->size(), 4u);
  EXPECT_EQ(Value(*env, job_env::kZone), "ae");
  EXPECT_EQ(Value(*env, job_env::kRole), "fraud-analyst");
  EXPECT_EQ(Value(*env, job_env::kDatasets), "/data/ae/x.h5,/data/ae/restricted");
  EXPECT_EQ(Value(*env, job_env::kClassifications), "internal,restricted");
}

TEST(JobEnvironment, NoDatasetsIsAnEmptyList) {
  Policy policy = TestPolicy();
  auto env = JobEnvironment(policy, Decision{true, "reader", "ae", "", ""}, {});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(Value(*env, job_env::kDatasets), "");
  EXPECT_EQ(Value(*env, job_env::kClassifications), "internal");
}

TEST(JobEnvironment, ARoleThatMayReadNothingListsNothing) {
  auto policy = ParsePolicy(R"(
[zones.ae]
[[roles]]
name = "none"
zones = ["ae"]
max_gpus = 0
[[bindings]]
user = "alice"
roles = ["none"]
)",
                            "none.toml");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  auto env = JobEnvironment(*policy, Decision{true, "none", "ae", "", ""}, {});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(Value(*env, job_env::kClassifications), "");
}

TEST(JobEnvironment, ARoleOutsideThePolicyIsAnError) {
  Policy policy = TestPolicy();
  auto env = JobEnvironment(policy, Decision{true, "admin", "ae", "", ""}, {});
  EXPECT_EQ(env.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace hpcml::guard
