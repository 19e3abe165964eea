#!/usr/bin/env bash
# The guard plugin exports only slurm_spank_* and plugin_* (version script)
# and leaves the spank_* API to be resolved from srun/sbatch/slurmstepd.
set -euo pipefail
so=${1:?usage: check_symbols.sh hpcml_guard.so}
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | grep -v '^$' | sort -u || true)
bad=$(grep -Ev '^(slurm_spank_|plugin_)' <<<"$exported" || true)
if [ -n "$bad" ]; then
  echo "FAIL: $so exports symbols beyond slurm_spank_*/plugin_*:" >&2
  echo "$bad" | head -20 >&2
  exit 1
fi
for s in slurm_spank_init slurm_spank_init_post_opt slurm_spank_task_init_privileged \
  slurm_spank_job_prolog slurm_spank_job_epilog \
  plugin_name plugin_type plugin_version; do
  grep -qx "$s" <<<"$exported" || { echo "FAIL: $so does not export $s" >&2; exit 1; }
done
undefined=$(nm -D --undefined-only "$so" | awk '{print $2}')
grep -qx spank_option_register <<<"$undefined" || { echo "FAIL: spank_option_register not imported" >&2; exit 1; }
if readelf -d "$so" | grep -q 'libslurm'; then
  echo "FAIL: $so links libslurm; slurmstepd provides it" >&2
  exit 1
fi
# Self-contained: each shared library it needs costs load time in every srun
# and slurmstepd (see spank/CMakeLists.txt).
for lib in $(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  case $lib in
    libc.so.* | libm.so.* | ld-linux*) ;;
    *) echo "FAIL: $so needs $lib; only libc and libm are expected" >&2; exit 1 ;;
  esac
done
echo "PASS: $so exports: $(echo $exported)"
