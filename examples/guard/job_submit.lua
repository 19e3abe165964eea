-- hpcml guard: routes a job to the nodes of its data's zone at submission.
--
-- Install beside slurm.conf as job_submit.lua, with JobSubmitPlugins=lua in
-- slurm.conf (Debian's slurm-wlm-basic-plugins has job_submit/lua).
--
-- The guard's submit-side check (in srun, sbatch and salloc) resolves the
-- job's --dataset paths and --data-zone against the policy and hands the
-- zones they are in to slurmctld as HPCML_DATA_ZONES in the job's SPANK
-- environment. This script then
--   * refuses a job whose datasets span zones (one job per zone: a node
--     processes only its own zone's data), so users learn at sbatch time;
--   * adds the constraint zone-<zone> (the nodes' Slurm feature), so the job
--     lands on that zone's nodes.
-- Routing is a convenience, not the control: a user can submit without the
-- guard's submit side, and then each node still decides at launch.
--
-- One thing only this script can stop: a batch job whose environment has
-- SLURM_GET_USER_ENV makes slurmd run the user's login shell on the node, as
-- the user, before any step and so before any SPANK callback: outside the
-- guard's dataset view, with anything ~/.bash_profile does. sbatch sets it
-- for --get-user-env, --export=NONE and any --export list other than plain
-- ALL (--export=ALL,VAR=value too); a user can also set it by hand or send
-- a job description of their own. Every such job is refused, guarded or
-- not, at submission and at update. Refused on presence, whatever the value:
-- this script sees only the first entry of a name, slurmd acts on any
-- "SLURM_GET_USER_ENV=1", so rewriting the first could leave a second.

local ZONE_VAR = "^HPCML_DATA_ZONES=(.*)$"

local function data_zones(job_desc)
  local env = job_desc.spank_job_env
  if env == nil then return nil end
  for _, kv in pairs(env) do
    local zones = string.match(kv, ZONE_VAR)
    if zones ~= nil then return zones end
  end
  return nil
end

-- Whether the job asks slurmd for the user's login environment (any value:
-- refused before slurmd's own test for "1" could change).
local function gets_user_env(job_desc)
  local env = job_desc.environment
  return env ~= nil and env.SLURM_GET_USER_ENV ~= nil
end

local GET_USER_ENV_REFUSED = "hpcml-guard: --get-user-env, --export=NONE, --export=<list> " ..
  "(ALL,VAR=value too) and SLURM_GET_USER_ENV are refused on this cluster: slurmd would run " ..
  "your login shell on the node outside the guard's dataset view. Set the variables in the " ..
  "environment you submit from instead: VAR=value sbatch ... (the default --export=ALL)"

function slurm_job_submit(job_desc, part_list, submit_uid)
  if gets_user_env(job_desc) then
    slurm.log_user(GET_USER_ENV_REFUSED)
    slurm.log_info("hpcml-guard: refused a job of uid %u: SLURM_GET_USER_ENV", submit_uid)
    return slurm.ERROR
  end
  local zones = data_zones(job_desc)
  if zones == nil or zones == "" then return slurm.SUCCESS end
  if not string.match(zones, "^[%w._,-]+$") then
    slurm.log_user("hpcml-guard: malformed HPCML_DATA_ZONES '%s'", zones)
    return slurm.ERROR
  end
  if string.find(zones, ",", 1, true) then
    slurm.log_user("hpcml-guard: the job's datasets are in zones %s: a job runs in one zone " ..
                   "(submit one job per zone)", zones)
    return slurm.ERROR
  end
  local want = "zone-" .. zones
  local features = job_desc.features
  if features == nil or features == "" then
    job_desc.features = want
  elseif features ~= want then
    -- A zone of the user's own that is not the data's would match no node:
    -- refused here, saying why, rather than with Slurm's "Requested node
    -- configuration is not available".
    for zone in string.gmatch(features, "zone%-([%w._-]+)") do
      if "zone-" .. zone ~= want then
        slurm.log_user("hpcml-guard: the job's datasets are in zone %s, but its --constraint " ..
                       "asks for zone-%s: a job runs in its data's zone (drop the zone from " ..
                       "--constraint, the guard adds it)", zones, zone)
        return slurm.ERROR
      end
    end
    job_desc.features = "(" .. features .. ")&" .. want
  end
  slurm.log_info("hpcml-guard: job of uid %u routed to %s", submit_uid, want)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if gets_user_env(job_desc) then
    slurm.log_user(GET_USER_ENV_REFUSED)
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
