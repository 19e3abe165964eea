// libFuzzer target: the policy parser (TOML text -> Policy or an error) and,
// when a policy parses, dataset matching against paths taken from the input
// and its compiled cache (policy_cache.hpp), which must give the same policy
// back. Any crash, sanitizer report or exception escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hpcml/guard/decision.hpp"
#include "hpcml/guard/policy.hpp"
#include "policy_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = hpcml::guard::ParsePolicy(text, "fuzz.toml");
  if (!policy.ok()) return 0;
  hpcml::guard::Request req;
  req.user = "u";
  req.node_zone = policy->zones().begin()->first;
  for (const auto& e : policy->datasets()) {
    req.datasets.emplace_back(e.path);
    req.datasets.push_back(std::string(e.path) + "/x");
    (void)policy->MatchDataset(std::string(e.path) + "y");
  }
  (void)hpcml::guard::Decide(*policy, req);
  // The compiled form decodes to a policy that encodes the same.
  const std::string bytes = hpcml::guard::EncodePolicyCache(*policy, {}, {});
  auto cached = hpcml::guard::DecodePolicyCache(bytes, nullptr, "fuzz.toml");
  if (!cached.ok() || hpcml::guard::EncodePolicyCache(cached->policy, {}, {}) != bytes)
    __builtin_trap();
  return 0;
}
