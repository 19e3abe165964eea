#!/usr/bin/env bash
# Jobs run as the test users show those users and their accounts in sacct.
source "$(dirname "$0")/lib.sh"
dir=$(job_dir)
cd "$dir"
for u in hpcml-alice:hpcml-ml hpcml-bob:hpcml-finance; do
  user=${u%%:*} account=${u#*:}
  out=$(runuser -u "$user" -- timeout 60 srun -n1 id -un) || fail "srun as $user failed"
  assert_eq "$user" "$out" "user inside the job"
  id=$(runuser -u "$user" -- sbatch --parsable --output="$dir/$user.out" --wrap "id -un")
  wait_job "$id" >/dev/null
  assert_eq "$user" "$(sacct_field "$id" User)" "sacct User of job $id"
  assert_eq "$account" "$(sacct_field "$id" Account)" "sacct Account of job $id"
done
# An account the user does not belong to is refused (associations enforced).
if runuser -u hpcml-bob -- sbatch --account=hpcml-ml --wrap true >/dev/null 2>&1; then
  fail "hpcml-bob submitted to an account he has no association with"
fi
pass
