#include "hpcml/common/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace hpcml {

unsigned AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

void ParallelFor(unsigned parts, size_t n,
                 const std::function<void(unsigned part, size_t begin, size_t end)>& fn) {
  parts = std::max(1u, parts);
  auto bounds = [&](unsigned p) { return n * p / parts; };
  std::vector<std::thread> workers;
  workers.reserve(parts - 1);
  for (unsigned p = 1; p < parts; ++p)
    workers.emplace_back([&, p] { fn(p, bounds(p), bounds(p + 1)); });
  fn(0, 0, bounds(1));
  for (auto& w : workers) w.join();
}

}  // namespace hpcml
