// Guard decision throughput: a policy of 10,000 dataset entries and 1,000
// bindings against a baseline policy of 10 entries and 10 bindings, measured
// in the same run. Prints parse time, decisions/s and µs per decision for
// both, and the ratio large/small (the index makes a decision independent of
// the entry count, so the ratio should stay near 1). Also the planning of the
// step's dataset view (enforce=mount, on the same launch path) and how many
// mounts it makes, with the policy's [view] roots (/data/ae, /data/eu) and,
// for the large policy, without them: every entry is then its own data root
// and gets a cover of its own.
//   hpcml-bench-guard [--min-time SECONDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "hpcml/guard/decision.hpp"
#include "hpcml/guard/mount_view.hpp"
#include "hpcml/guard/policy.hpp"

namespace {

using hpcml::guard::Policy;
using hpcml::guard::Request;
using Clock = std::chrono::steady_clock;

// Datasets /data/<zone>/team<i % 100>/set<i>, half in each zone; every
// binding gives user u<j> the ml-engineer role.
std::string MakePolicy(int datasets, int bindings, bool roots) {
  std::string t = "[zones.ae]\n[zones.eu]\n";
  if (roots) t += "[view]\nroots = [\"/data/ae\", \"/data/eu\"]\n";
  t.reserve(static_cast<std::size_t>(datasets) * 100 + static_cast<std::size_t>(bindings) * 60);
  for (int i = 0; i < datasets; ++i) {
    const char* zone = i % 2 == 0 ? "ae" : "eu";
    fmt::format_to(std::back_inserter(t),
                   "[[datasets]]\npath = \"/data/{}/team{}/set{}\"\nzone = \"{}\"\n"
                   "classification = \"{}\"\n",
                   zone, i % 100, i, zone, i % 3 == 0 ? "restricted" : "internal");
  }
  t += "[[roles]]\nname = \"ml-engineer\"\nzones = [\"ae\", \"eu\"]\n"
       "classifications = [\"internal\", \"restricted\"]\nmax_gpus = 8\npartitions = [\"batch\"]\n";
  for (int j = 0; j < bindings; ++j)
    fmt::format_to(std::back_inserter(t),
                   "[[bindings]]\nuser = \"u{}\"\nroles = [\"ml-engineer\"]\n", j);
  return t;
}

struct Figures {
  double parse_ms = 0;
  double decisions_per_s = 0;
  double us_per_decision = 0;
  double us_per_plan = 0;
  std::size_t mounts = 0;  // covers + read-only + exposed
};

Figures Measure(int datasets, int bindings, double min_time_s, bool roots = true) {
  std::string text = MakePolicy(datasets, bindings, roots);
  auto t0 = Clock::now();
  auto policy = hpcml::guard::ParsePolicy(text, "bench.toml");
  auto t1 = Clock::now();
  if (!policy.ok()) {
    fmt::print(stderr, "hpcml-bench-guard: {}\n", policy.status().message());
    std::exit(1);
  }
  // A realistic request: the last-bound user, 4 datasets deep in the tree.
  Request req;
  req.uid = 1000;
  req.user = fmt::format("u{}", bindings - 1);
  req.groups = {"users", "ml"};
  req.account = "hpcml-ml";
  req.partition = "batch";
  req.gpus = 4;
  req.node_zone = "ae";
  req.role = "ml-engineer";
  for (int k = 0; k < 4; ++k) {
    int i = (datasets - 2 - 2 * k) > 0 ? datasets - 2 - 2 * k : 0;  // even: zone ae
    req.datasets.push_back(fmt::format("/data/ae/team{}/set{}/part-{}.h5", i % 100, i, k));
  }
  long n = 0;
  bool all_allowed = true;
  auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < min_time_s) {
    for (int r = 0; r < 1000; ++r) all_allowed &= hpcml::guard::Decide(*policy, req).allow;
    n += 1000;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (!all_allowed) {
    fmt::print(stderr, "hpcml-bench-guard: the benchmark request was denied\n");
    std::exit(1);
  }
  // The view for the same request (no prefix entries: nothing to list).
  auto none = [](const std::string&) -> hpcml::Result<std::vector<std::string>> {
    return std::vector<std::string>{};
  };
  long plans = 0;
  std::size_t mounts = 0;
  auto plan_start = Clock::now();
  double plan_elapsed = 0;
  while (plan_elapsed < min_time_s / 4) {
    auto view = hpcml::guard::PlanDatasetView(*policy, req.datasets, none);
    mounts = view->covers.size() + view->read_only.size() + view->exposed.size();
    ++plans;
    plan_elapsed = std::chrono::duration<double>(Clock::now() - plan_start).count();
  }
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(),
          static_cast<double>(n) / elapsed, 1e6 * elapsed / static_cast<double>(n),
          1e6 * plan_elapsed / static_cast<double>(plans), mounts};
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 1.0;
  if (argc == 3 && std::string_view(argv[1]) == "--min-time") min_time = std::atof(argv[2]);
  Figures small = Measure(10, 10, min_time);
  Figures large = Measure(10000, 1000, min_time);
  Figures flat = Measure(10000, 1000, min_time, false);
  fmt::print(
      "policy                      parse ms   decisions/s   us/decision   us/view plan   mounts\n");
  fmt::print("10 datasets, 10 bindings    {:8.2f}   {:11.0f}   {:11.2f}   {:12.1f}   {:6}\n",
             small.parse_ms, small.decisions_per_s, small.us_per_decision, small.us_per_plan,
             small.mounts);
  fmt::print("10000 datasets, 1000 bind.  {:8.2f}   {:11.0f}   {:11.2f}   {:12.1f}   {:6}\n",
             large.parse_ms, large.decisions_per_s, large.us_per_decision, large.us_per_plan,
             large.mounts);
  fmt::print("  the same, no [view] roots {:8.2f}   {:11.0f}   {:11.2f}   {:12.1f}   {:6}\n",
             flat.parse_ms, flat.decisions_per_s, flat.us_per_decision, flat.us_per_plan,
             flat.mounts);
  fmt::print("ratio us/decision large/small: {:.2f} (target: one decision well under 1000 us)\n",
             large.us_per_decision / small.us_per_decision);
  return 0;
}
