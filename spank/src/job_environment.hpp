// What an allowed step gets in its environment (the contract:
// hpcml/common/job_env.hpp), as a pure function of the decision, so it is
// unit tested; slurmstepd sets it (node_side.cpp).
#pragma once

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/guard/decision.hpp"
#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

struct EnvVar {
  const char* name;  // a hpcml::job_env constant
  std::string value;
};

// HPCML_ZONE, HPCML_ROLE, HPCML_DATASETS and HPCML_CLASSIFICATIONS for a step
// that `policy` allowed as `allowed` with the canonical `datasets`. The role
// must be one of the policy's (an allowed decision's always is); else
// Internal, and the caller denies.
Result<std::vector<EnvVar>> JobEnvironment(const Policy& policy, const Decision& allowed,
                                           const std::vector<std::string>& datasets);

}  // namespace hpcml::guard
