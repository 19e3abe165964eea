// Data parallelism on plain threads: no pool, no global state (importing a
// library starts nothing). Work is split into `threads` contiguous parts;
// part 0 runs on the calling thread.
#pragma once

#include <cstddef>
#include <functional>

namespace hpcml {

// The CPUs this process may run on (sched_getaffinity: what taskset, cgroups
// and Slurm's binding allow), at least 1.
unsigned AvailableCpus();

// Calls fn(part, begin, end) for `parts` contiguous parts of [0, n) (part p
// is [n*p/parts, n*(p+1)/parts)), each on its own thread, part 0 on the
// caller's; returns once all have returned. `parts` 0 counts as 1. fn must
// not throw.
void ParallelFor(unsigned parts, size_t n,
                 const std::function<void(unsigned part, size_t begin, size_t end)>& fn);

}  // namespace hpcml
