#!/usr/bin/env bash
# The GPU bundle (scripts/gpu-bundle.sh) on a machine without a GPU: packed
# from this build tree's programs (no rebuild), at most 60 MiB, and its
# programs start with the system's copies of every packed library, Open MPI,
# PMIx and hwloc component, help text and Open MPI daemon hidden (a private
# mount namespace with empty files and directories bound over them). The
# programs that need a GPU must reach the "no GPU on this machine" path
# (exit 77), never fail to load; a CPU training run must work end to end
# (MPI singleton, OpenBLAS, HDF5 output); and the loader's own log must show
# every loaded object coming from the bundle or the CUDA library directory.
# Also the rule "a CUDA error beside a GPU fails, never skips": with the CUDA
# toolkit's stub libcuda, and with a fake /dev/nvidia0, the probe and the
# backend test must exit 1, naming the error.
#
# The timeline library, when given, must load from the bundle (its CUPTI
# beside it) and decline without a driver, and gpu-check.sh's timeline step
# end at "no GPU".
#
#   gpu_bundle_test.sh <gpu-bundle.sh> [--timeline <libhpcml_cuda_timeline.so>]
#                      <hpcml-train> <hpcml-gpu-probe> <trainer_cuda_backend_test>
#                      <hpcml-mpi-probe> <trainer_bench>
set -euo pipefail
script=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "gpu_bundle_test: FAIL: $*" >&2
  exit 1
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
unset LD_LIBRARY_PATH HPCML_GPU_HOME HPCML_GPU_LIBPATH HPCML_REQUIRE_GPU

# 1. Pack and unpack. Compression level 1: faster here; the default level
# only makes the archive smaller.
start=$SECONDS
"$script" --no-build --xz-level 1 --out "$work/hpcml-gpu.tar.xz" "$@"
size=$(stat -c %s "$work/hpcml-gpu.tar.xz")
((size <= 60 << 20)) || fail "archive is $size bytes, over 60 MiB"
mkdir "$work/x"
tar -C "$work/x" -xJf "$work/hpcml-gpu.tar.xz"
B=$work/x/hpcml-gpu
echo "gpu_bundle_test: packed and unpacked in $((SECONDS - start)) s, $((size >> 20)) MiB"

# The timeline library loaded as the driver loads it, into the system's
# Python (outside the namespace below: Python needs libraries it hides):
# it starts, and without a driver it declines, naming CUPTI's error.
if [[ -f $B/lib/libhpcml_cuda_timeline.so ]]; then
  HPCML_TIMELINE=$work/timeline.tsv /usr/bin/python3 -c \
    'import ctypes, sys; r = ctypes.CDLL(sys.argv[1]).InitializeInjection(); print("InitializeInjection", r); print(open("/proc/self/maps").read())' \
    "$B/lib/libhpcml_cuda_timeline.so" >"$work/timeline_lib.out" 2>&1 ||
    { cat "$work/timeline_lib.out" >&2; fail "timeline library: did not load"; }
  grep -q '^InitializeInjection 0$' "$work/timeline_lib.out" &&
    grep -Eq 'hpcml-timeline: cupti[A-Za-z]+: CUPTI_ERROR' "$work/timeline_lib.out" ||
    { cat "$work/timeline_lib.out" >&2; fail "timeline library: must decline, naming CUPTI's error"; }
  # Its CUPTI is the one beside it (RUNPATH $ORIGIN), not the system's.
  grep -q " $B/lib/libcupti.so.13$" "$work/timeline_lib.out" && ! grep -q ' /.*/cuda.*/libcupti' "$work/timeline_lib.out" ||
    { grep cupti "$work/timeline_lib.out" >&2; fail "timeline library: its CUPTI is not the bundle's"; }
  echo "gpu_bundle_test: ok: the timeline library loads and declines without a driver"
fi

# 2. What to hide: the system copy of every packed file (MANIFEST: "path
# origin"), except glibc's (every system program, this script's shell
# included, needs it: the bundle's programs run on the bundle's loader, and
# the loader log below shows that they load glibc from the bundle).
glibc='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2)$'
: >"$work/empty"
mkdir "$work/emptydir"
hide=()
while read -r path origin; do
  [[ $(basename "$path") =~ $glibc ]] && continue
  hide+=("$origin")
done <"$B/MANIFEST"
hide_dirs=()
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
  /usr/lib/x86_64-linux-gnu/hwloc /usr/share/openmpi /etc/openmpi; do
  [[ -d $d ]] && hide_dirs+=("$d")
done
for f in /usr/bin/orted /usr/bin/orterun; do [[ -e $f ]] && hide+=("$(readlink -f "$f")"); done

# 3. The checks, run in the namespace (or, where one cannot be made, as
# they are, with only the loader audit).
cat >"$work/inner.sh" <<'EOF'
set -uo pipefail
B=$1 work=$2
fail() { echo "gpu_bundle_test: FAIL: $*" >&2; exit 1; }
# run <want rc> <pattern> <name> cmd...: the exit code and a line of output.
run() {
  local want=$1 pattern=$2 name=$3
  shift 3
  "$@" >"$work/$name.out" 2>&1
  local rc=$?
  if [[ $rc != "$want" ]] || ! grep -Eq -- "$pattern" "$work/$name.out"; then
    cat "$work/$name.out" >&2
    fail "$name: exit $rc (want $want), output must match '$pattern'"
  fi
  if grep -Eq 'error while loading shared libraries|cannot open shared object|unable to be opened|version .GLIBC' \
    "$work/$name.out"; then
    cat "$work/$name.out" >&2
    fail "$name: a library or component failed to load"
  fi
  echo "gpu_bundle_test: ok: $name (exit $rc)"
}
nogpu='no (CUDA device|GPU) on this machine: cudaGetDeviceCount: cudaError[A-Za-z]+'
run 77 "$nogpu" probe "$B/bin/hpcml-gpu-probe" --require-gpu
run 77 "$nogpu" backend_test "$B/bin/trainer_cuda_backend_test"
run 77 "skipped: $nogpu" bench "$B/bin/trainer_bench" cuda
run 0 'hpcml-mpi-probe: ok' mpi_probe "$B/bin/hpcml-mpi-probe"
run 1 'no GPU visible: cudaGetDeviceCount: cudaError[A-Za-z]+' train_cuda \
  "$B/bin/hpcml-train" --backend cuda --synthetic --steps 2
train=(--backend cpu --synthetic --steps 3 --hidden 16 --log-interval 1 --output "$work/model.h5")
run 0 'step 3/3' train_cpu "$B/bin/hpcml-train" "${train[@]}"
[[ -s $work/model.h5 ]] || fail "train_cpu: no model written"

# The same run under the loader's log, started the way the wrapper starts it
# (through the wrapper, its shell's own loading would be logged too). Every
# object initialised comes from the bundle or from a CUDA library directory
# env.sh found (the libraries the GPU machine provides).
. "$B/env.sh"
rm -f "$work/model.h5"
LD_DEBUG=libs LD_DEBUG_OUTPUT=$work/ld "$B/lib/ld-linux-x86-64.so.2" \
  --library-path "$HPCML_GPU_LIBPATH" "$B/libexec/hpcml-train" "${train[@]}" \
  >"$work/audit.out" 2>&1 || { cat "$work/audit.out" >&2; fail "audit run failed"; }
[[ -s $work/model.h5 ]] || fail "audit run: no model written"
IFS=: read -ra allowed <<<"$HPCML_GPU_LIBPATH"
bad=0
while read -r obj; do
  ok=0
  for a in "$B" "${allowed[@]}"; do [[ $obj == "$a"/* ]] && ok=1; done
  if ((!ok)); then
    echo "gpu_bundle_test: loaded from outside the bundle: $obj" >&2
    bad=1
  elif [[ $obj != "$B"/* && ! $(basename "$obj") =~ ^lib(cudart|cublas|cublasLt|nccl|cuda)\.so ]]; then
    echo "gpu_bundle_test: loaded from a CUDA directory but not a CUDA library: $obj" >&2
    bad=1
  fi
done < <(sed -n 's/.*calling init: //p' "$work"/ld.* | sort -u)
((bad == 0)) || fail "train_cpu: objects loaded from outside the bundle"
grep -q "calling init: $B/lib/libc.so.6" "$work"/ld.* || fail "train_cpu: glibc not the bundle's"
grep -q "calling init: $B/lib/openmpi/" "$work"/ld.* || fail "train_cpu: no Open MPI component loaded"
echo "gpu_bundle_test: ok: every loaded object is the bundle's or a CUDA library"

# The GPU machine's checks (gpu-check.sh), rehearsed: every step reaches its
# "no GPU" end (n/a for a tool this machine lacks), none fails or hangs;
# steps run by name; an unknown one is a usage error.
OUT=$work/gpu-check PYTHON=/usr/bin/python3 "$B/gpu-check.sh" >"$work/gpu_check.out" 2>&1 ||
  { cat "$work/gpu_check.out" >&2; fail "gpu-check: a step failed or timed out"; }
for s in probe backend memcheck agree resume bench pytorch; do
  grep -Eq "^\| $s \| (no GPU|n/a) \|" "$work/gpu-check/summary.md" ||
    { cat "$work/gpu-check/summary.md" >&2; fail "gpu-check: step $s did not end at 'no GPU'"; }
done
grep -Eq '^\| (probe|backend|bench|resume) \| no GPU \|' "$work/gpu-check/summary.md" ||
  fail "gpu-check: no step reached a program's own no-GPU exit"
OUT=$work/gpu-check2 "$B/gpu-check.sh" probe bench >/dev/null 2>&1 || fail "gpu-check probe bench"
[[ $(grep -Ec '^\| [a-z]+ \| (no GPU|n/a|pass|FAIL|TIMEOUT) \|' "$work/gpu-check2/summary.md") == 2 ]] ||
  fail "gpu-check: steps by name"
if [[ -f $B/lib/libhpcml_cuda_timeline.so ]]; then
  OUT=$work/gpu-check4 PYTHON=/usr/bin/python3 "$B/gpu-check.sh" timeline >/dev/null 2>&1 ||
    fail "gpu-check timeline: failed or timed out"
  grep -Eq '^\| timeline \| no GPU \|' "$work/gpu-check4/summary.md" ||
    { cat "$work/gpu-check4/summary.md" >&2; fail "gpu-check: step timeline did not end at 'no GPU'"; }
  echo "gpu_bundle_test: ok: gpu-check.sh timeline at its no-GPU end"
fi
OUT=$work/gpu-check3 "$B/gpu-check.sh" nosuchstep >/dev/null 2>&1
[[ $? == 2 ]] || fail "gpu-check: an unknown step must exit 2"
echo "gpu_bundle_test: ok: gpu-check.sh, every step at its no-GPU end ($(cut -d'|' -f2,3 "$work/gpu-check/summary.md" | tail -n +3 | tr -s ' \n' ' '))"
# A CUDA error beside (what looks like) a GPU fails: the toolkit's stub
# driver library, then no driver but a device node.
stub=
for s in /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so; do
  [[ -f $s ]] && stub=$s && break
done
if [[ -n $stub ]]; then
  mkdir -p "$work/stub"
  cp "$stub" "$work/stub/libcuda.so.1"
  export HPCML_CUDA_LIB_DIRS=$work/stub HPCML_GPU_HOME=
  run 1 'error: cudaGetDeviceCount: cudaErrorStubLibrary' stub_probe "$B/bin/hpcml-gpu-probe" --require-gpu
  run 1 'error: cudaGetDeviceCount: cudaErrorStubLibrary' stub_test "$B/bin/trainer_cuda_backend_test"
  unset HPCML_CUDA_LIB_DIRS
else
  echo "gpu_bundle_test: note: no stub libcuda in the CUDA toolkit; stub check not run"
fi
if [[ ${HIDDEN-0} == 1 ]] && [[ ! -e /dev/nvidia0 ]]; then
  # A private /dev with a fake device node (and the nodes the programs use).
  if unshare --mount --propagation private bash -c '
      mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 &&
      mknod -m 666 /dev/urandom c 1 9 && : >/dev/nvidia0 &&
      "$0/bin/hpcml-gpu-probe" --require-gpu' "$B" >"$work/node.out" 2>&1; then
    cat "$work/node.out" >&2
    fail "fake /dev/nvidia0: the probe passed"
  fi
  grep -q 'device node /dev/nvidia0 exists' "$work/node.out" ||
    { cat "$work/node.out" >&2; fail "fake /dev/nvidia0: no error naming the node"; }
  echo "gpu_bundle_test: ok: fake /dev/nvidia0 fails (exit 1)"
fi
EOF

if unshare --mount --propagation private true 2>/dev/null; then
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --propagation private bash -c '
    set -e
    empty=$1 emptydir=$2 B=$3 work=$4 nfiles=$5
    shift 5
    for ((i = 0; i < nfiles; i++)); do mount --bind "$empty" "$1"; shift; done
    for d in "$@"; do mount --bind "$emptydir" "$d"; done
    echo "gpu_bundle_test: hid $nfiles system files and $# directories"
    HIDDEN=1 exec bash "$work/inner.sh" "$B" "$work"' \
    _ "$work/empty" "$work/emptydir" "$B" "$work" "${#hide[@]}" "${hide[@]}" "${hide_dirs[@]}"
else
  echo "gpu_bundle_test: note: no mount namespace here (not root?): system libraries stay visible;"
  echo "gpu_bundle_test: the loader audit still checks where every object came from"
  bash "$work/inner.sh" "$B" "$work"
fi
echo "gpu_bundle_test: passed in $((SECONDS - start)) s"
