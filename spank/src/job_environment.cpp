#include "job_environment.hpp"

#include <fmt/format.h>

#include "hpcml/common/job_env.hpp"
#include "options.hpp"

namespace hpcml::guard {

Result<std::vector<EnvVar>> JobEnvironment(const Policy& policy, const Decision& allowed,
                                           const std::vector<std::string>& datasets) {
  auto role = policy.roles().find(allowed.role);
  if (role == policy.roles().end())
    return Internal("role '{}' of the decision is not in {}", allowed.role, policy.source());
  return std::vector<EnvVar>{
      {job_env::kZone, allowed.zone},
      {job_env::kRole, allowed.role},
      {job_env::kDatasets, JoinDatasets(datasets)},
      {job_env::kClassifications, fmt::format("{}", fmt::join(role->second.classifications, ","))},
  };
}

}  // namespace hpcml::guard
