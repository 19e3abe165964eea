// TRES strings as sacct prints them (AllocTRES, ReqTRES):
//   "billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,mem=16G,node=1"
//
// Slurm records a typed GPU allocation twice: once typed (gres/gpu:h100=2)
// and once untyped (gres/gpu=2) when AccountingStorageTRES lists both. A
// cluster that tracks only gres/gpu shows the untyped entry alone. ParseTres
// counts each GPU once: typed entries are authoritative and the untyped entry
// only adds the GPUs no typed entry covers (recorded with an empty type).
//
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::accounting {

struct Tres {
  double cpus = 0;
  double mem_mib = 0;  // memory in MiB (Slurm's unit); a bare number is MiB
  double billing = 0;
  double nodes = 0;
  // GPUs per type, in the order first seen; type "" = GPUs without a type.
  std::vector<std::pair<std::string, double>> gpus;

  double gpu_total() const;
  // Count for one type ("" = untyped); 0 if absent.
  double gpus_of(std::string_view type) const;
};

// Parses a TRES list. Empty text is an empty allocation (a job that never
// started). Unknown TRES kinds (energy, fs/disk, license/..., other gres) are
// ignored. Errors: an entry without '=', a count that is not a non-negative
// number, a memory unit other than K/M/G/T/P.
Result<Tres> ParseTres(std::string_view text);

// Parses a memory amount with an optional unit suffix (K, M, G, T, P; powers
// of 1024; no suffix = MiB) into MiB.
Result<double> ParseMemoryMiB(std::string_view text);

}  // namespace hpcml::accounting
