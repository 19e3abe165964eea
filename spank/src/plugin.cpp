// hpcml_guard.so: the thin C-ABI SPANK shim around the policy engine. This
// file holds only the plugin's symbols and the slurm_spank_* callbacks, each
// dispatching on the SPANK context to its part (plugin_parts.hpp):
// - local (srun) and allocator (sbatch, salloc) context: submit_side.cpp, an
//   early advisory check in the user's own process;
// - remote context (slurmstepd, root): node_side.cpp, the authoritative
//   decision, the step's dataset view and environment, the tasks' checks;
// - job script context (slurmd's prolog and epilog): node_side.cpp, the job
//   facts cache's attempts;
// - slurmd context (slurmd starting): plugin_common.cpp, the version and the
//   policy's digest in the slurmd log.
// Where each runs and why (Slurm 22.05): docs/guard.md, "Where it runs".
// Every part catches everything: no exception crosses into Slurm, and in
// remote context every failure becomes a denial, never a drained node.

#include <slurm/slurm.h>

#include "plugin_parts.hpp"

// Everything else is hidden (-fvisibility=hidden, version script).
#define HPCML_GUARD_EXPORT __attribute__((visibility("default")))

extern "C" {
HPCML_GUARD_EXPORT extern const char plugin_name[];
HPCML_GUARD_EXPORT extern const char plugin_type[];
HPCML_GUARD_EXPORT extern const unsigned int plugin_version;
}
const char plugin_name[] = "hpcml_guard";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;

namespace plugin = hpcml::guard::plugin;

extern "C" {

HPCML_GUARD_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return plugin::InitGuard(sp, ac, av, /*submit=*/true);
    case S_CTX_REMOTE:
      return plugin::InitGuard(sp, ac, av, /*submit=*/false);
    case S_CTX_SLURMD:
      return plugin::SlurmdInit(ac, av);
    default:
      return 0;
  }
}

HPCML_GUARD_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return plugin::SubmitInitPostOpt(sp);
    case S_CTX_REMOTE:
      return plugin::NodeInitPostOpt(sp);
    default:
      return 0;
  }
}

HPCML_GUARD_EXPORT int slurm_spank_task_init_privileged(spank_t, int, char**) {
  return spank_context() == S_CTX_REMOTE ? plugin::NodeTaskInitPrivileged() : 0;
}

HPCML_GUARD_EXPORT int slurm_spank_job_prolog(spank_t sp, int ac, char** av) {
  return plugin::NodeJobProlog(sp, ac, av);
}
HPCML_GUARD_EXPORT int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return plugin::NodeJobEpilog(sp, ac, av);
}

}  // extern "C"
