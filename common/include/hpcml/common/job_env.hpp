// The job environment contract: the HPCML_* variables the guard (spank/)
// sets in a job, and who reads them. One name each, here; nothing else spells
// them out.
//
// The step variables are set by the guard's slurmstepd (spank/src/node_side.cpp,
// values from spank/src/job_environment.cpp) in an *allowed* step's
// environment, before it forks the tasks, so every task of the step inherits
// them; a value the user preset under the same name is replaced. A denied
// step runs no task. They are read inside the job by the feature cache
// (featurecache/src/access.cpp, AccessContext::FromEnvironment), which the
// trainer's loader goes through, and checked again there: HPCML_ZONE being
// present at all means "inside a guarded job" (docs/featurecache.md, "Access
// control inside a guarded job"). Lists are comma-separated with no blanks;
// no item contains a comma.
//
// kDataZones is not a step variable: the guard's srun/sbatch/salloc
// (spank/src/submit_side.cpp) puts it in the job's SPANK job control
// environment, where slurmctld's job_submit/lua reads it
// (examples/guard/job_submit.lua) to route the job.
#pragma once

namespace hpcml::job_env {

// The zone the step was decided in: the node's zone (a policy zone name,
// 1-64 characters of [A-Za-z0-9._-]).
inline constexpr const char* kZone = "HPCML_ZONE";

// The effective role the step was allowed with (a policy role name).
inline constexpr const char* kRole = "HPCML_ROLE";

// The step's datasets: canonical absolute paths (symlinks and '..' resolved
// as the user), in request order, duplicates removed; empty when none. A
// directory covers everything below it. A dataset whose canonical path has a
// comma is refused by the guard, so the list is unambiguous.
inline constexpr const char* kDatasets = "HPCML_DATASETS";

// The classifications the effective role may read (the policy role's
// `classifications`), sorted; empty when the role may read none. The feature
// cache refuses a feature set whose classification is not listed.
inline constexpr const char* kClassifications = "HPCML_CLASSIFICATIONS";

// Submit side, job control environment: the zones of the job's datasets and
// its --data-zone, sorted; set only when there is one or more.
inline constexpr const char* kDataZones = "HPCML_DATA_ZONES";

}  // namespace hpcml::job_env
