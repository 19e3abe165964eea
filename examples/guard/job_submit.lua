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

function slurm_job_submit(job_desc, part_list, submit_uid)
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
    -- Kept with the user's own constraint: a contradiction (zone-ae and
    -- zone-eu) then matches no node and sbatch says so.
    job_desc.features = "(" .. features .. ")&" .. want
  end
  slurm.log_info("hpcml-guard: job of uid %u routed to %s", submit_uid, want)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
