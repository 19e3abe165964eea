#!/usr/bin/env bash
# scripts/gpu-bundle.sh: hpcml's GPU programs for a bare GPU machine (no
# Slurm, HDF5 or MPI packages, no network), packed into one archive.
#
#   scripts/gpu-bundle.sh [--build-dir DIR] [--no-build] [--out FILE] [--xz-level N]
#                         [--timeline LIB] [PROGRAM...]
#
# Builds hpcml-train, hpcml-gpu-probe, trainer_cuda_backend_test,
# hpcml-mpi-probe, trainer_bench and the timeline library
# (libhpcml_cuda_timeline.so, where the build found CUPTI) in DIR (default
# build/gpu-bundle, RelWithDebInfo; CUDA code for sm_90, H100/H200) unless
# --no-build, or packs the PROGRAMs given (and the --timeline LIB given). The archive (default build/hpcml-gpu.tar.xz; an
# --out name ending in .tar.gz gives gzip, for machines without xz; at most
# 60 MiB either way) unpacks to hpcml-gpu/:
#   bin/<program>   wrappers: run the program on the bundle's own dynamic
#                   loader and libraries (glibc included, so an older or
#                   newer distribution does not matter)
#   libexec/        the programs, stripped
#   lib/            every shared library they need except the ones the GPU
#                   machine provides: the NVIDIA driver (libcuda), the CUDA
#                   runtime, cuBLAS/cuBLASLt and NCCL; lib/openmpi, lib/pmix,
#                   lib/hwloc: Open MPI, PMIx and hwloc components
#   share/, etc/    Open MPI's and PMIx's help texts and Open MPI's defaults
#   env.sh          finds the machine's CUDA and NCCL libraries and sets the
#                   Open MPI variables (the wrappers source it themselves);
#                   a single rank runs without mpirun (singleton, no daemon)
#   MANIFEST        each packed file and where it came from
#   gpu-check.sh    the checks to run there, in one command, with one table
#                   (scripts/gpu-check.sh; pytorch_cuda_peer.py and
#                   timeline_summary.py beside it)
#   lib/libhpcml_cuda_timeline.so, lib/libcupti.so.13
#                   the timeline library and its CUPTI (gpu-check.sh timeline)
# The GPU machine needs a driver for CUDA 13 (>= 580) and the CUDA 13
# runtime, cuBLAS 13 and NCCL 2 libraries (see env.sh for where it looks).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build/gpu-bundle
out=$top/build/hpcml-gpu.tar.xz
do_build=1
xz_level=6  # tests pass 1: faster, and the archive only gets smaller at 6
programs=()
timeline=
while (($#)); do
  case $1 in
  --build-dir) build=$2; shift 2 ;;
  --no-build) do_build=0; shift ;;
  --out) out=$2; shift 2 ;;
  --xz-level) xz_level=$2; shift 2 ;;
  --timeline) timeline=$2; shift 2 ;;
  -h | --help) sed -n '/^set -euo/q; 2,$p' "$0"; exit 0 ;;
  -*) echo "gpu-bundle: unknown option $1" >&2; exit 2 ;;
  *) programs+=("$1"); shift ;;
  esac
done
say() { echo "gpu-bundle: $*" >&2; }
die() { say "error: $*"; exit 1; }
max_bytes=$((60 << 20))
unset LD_LIBRARY_PATH LD_PRELOAD

targets=(hpcml-train hpcml-gpu-probe trainer_cuda_backend_test hpcml-mpi-probe trainer_bench)
if ((${#programs[@]} == 0)); then
  if ((do_build)); then
    [[ -f $build/CMakeCache.txt ]] ||
      cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    # The timeline library, where the build has it (a toolkit with CUPTI).
    # (The list read whole: `| grep -q` would end the pipe early, a SIGPIPE
    # that pipefail turns into "not there", now and then.)
    known=$(cmake --build "$build" --target help)
    [[ $known == *hpcml_cuda_timeline* ]] && targets+=(hpcml_cuda_timeline)
    cmake --build "$build" -j "${HPCML_JOBS:-$(nproc)}" --target "${targets[@]}"
  fi
  lib=$build/bench/mpi_trainer/libhpcml_cuda_timeline.so
  [[ -z $timeline && -f $lib ]] && timeline=$lib
  programs=("$build/mpi_trainer/trainer/hpcml-train" "$build/mpi_trainer/probes/hpcml-gpu-probe"
    "$build/mpi_trainer/trainer/trainer_cuda_backend_test" "$build/mpi_trainer/probes/hpcml-mpi-probe"
    "$build/bench/mpi_trainer/trainer_bench")
fi
for p in "${programs[@]}"; do
  [[ -x $p ]] || die "$p: not built (a build without the CUDA toolkit and NCCL has no GPU programs)"
done

# What the GPU machine provides (never packed), and transports that need
# hardware and libraries a bare node does not have (their components are left
# out; Open MPI then simply does not see them).
provided='^(libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-|linux-vdso\.so)'
transport='^(libuc[pstm]\.so|libmca_common_(ucx|ofi|verbs)\.so|libfabric\.so|libefa\.so|libpsm|libinfinipath\.so|libibverbs\.so|librdmacm\.so|libhcoll|liboshmem\.so|libxpmem\.so)'
ompi_comp=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
pmix_comp=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
hwloc_comp=/usr/lib/x86_64-linux-gnu/hwloc

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/hpcml-gpu
mkdir -p "$stage"/{bin,libexec,lib/openmpi,lib/pmix,lib/hwloc,share,etc}
: >"$work/manifest"
declare -A packed=()

# ldd's view of an ELF file: "soname path" per dependency ("not found" as path).
deps() {
  ldd "$1" | awk '
    /=>/ { print $1, ($3 == "not" ? "not-found" : $3); next }
    /^[ \t]*\// { n = split($1, a, "/"); print a[n], $1 }'
}
# Exit 1 when the file needs a transport library or one nobody provides.
usable() {
  local name path
  while read -r name path; do
    [[ $name =~ $transport ]] && return 1
    [[ $path == not-found && ! $name =~ $provided ]] && return 1
  done < <(deps "$1")
  return 0
}
# Packs the dependencies of an ELF file into lib/.
pack_deps() {
  local name path
  while read -r name path; do
    [[ $name =~ $provided ]] && continue
    [[ $path == not-found ]] && die "$1 needs $name, which is not installed here"
    [[ -n ${packed[$name]-} ]] && continue
    packed[$name]=1
    cp -L "$path" "$stage/lib/$name"
    echo "lib/$name $(readlink -f "$path")" >>"$work/manifest"
  done < <(deps "$1")
}
strip_copy() {  # src dst
  cp -L "$1" "$2"
  strip --strip-unneeded "$2" 2>/dev/null || true
  chmod 755 "$2"
  echo "${2#"$stage"/} $(readlink -f "$1")" >>"$work/manifest"
}

for p in "${programs[@]}"; do
  name=$(basename "$p")
  strip_copy "$p" "$stage/libexec/$name"
  pack_deps "$p"
  cat >"$stage/bin/$name" <<EOF
#!/bin/sh
# hpcml GPU bundle: runs $name on the bundle's loader and libraries.
here=\$(CDPATH='' cd -- "\$(dirname -- "\$0")/.." && pwd)
if [ "\${HPCML_GPU_HOME-}" != "\$here" ] || [ -z "\${HPCML_GPU_LIBPATH-}" ]; then
  HPCML_GPU_HOME=\$here
  . "\$here/env.sh" || exit 127
fi
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$HPCML_GPU_LIBPATH" --argv0 "\$0" \\
  "\$here/libexec/$name" "\$@"
EOF
  chmod 755 "$stage/bin/$name"
done
[[ -f $stage/lib/ld-linux-x86-64.so.2 ]] || die "no dynamic loader among the dependencies"

# The timeline library: loaded by the driver into any CUDA program (the
# bundle's, or the machine's Python), with its CUPTI beside it (its RUNPATH
# starts at $ORIGIN) and its C++ runtime linked in; it needs only the
# machine's glibc.
if [[ -n $timeline ]]; then
  [[ -f $timeline ]] || die "$timeline: no such timeline library"
  strip_copy "$timeline" "$stage/lib/libhpcml_cuda_timeline.so"
  cupti=$(ldd "$timeline" | awk '$1 == "libcupti.so.13" { print $3 }')
  [[ -f $cupti ]] || die "$timeline: its libcupti.so.13 is not found here"
  cp -L "$cupti" "$stage/lib/libcupti.so.13"
  echo "lib/libcupti.so.13 $(readlink -f "$cupti")" >>"$work/manifest"
  packed[libcupti.so.13]=1
  # What CUPTI needs (glibc's libutil, libgcc_s), for the bundle's programs.
  pack_deps "$timeline"
  pack_deps "$cupti"
fi

# Components the programs may open at run time: Open MPI's (transports that
# need hardware libraries left out), PMIx's, and hwloc's PCI discovery (the
# GL and OpenCL plugins are not needed, and libxml2 would pull in 30 MB of ICU).
for dir in "$ompi_comp:openmpi" "$pmix_comp:pmix"; do
  src=${dir%%:*} dst=$stage/lib/${dir##*:}
  [[ -d $src ]] || die "$src: missing (Debian's Open MPI 4.1 / PMIx)"
  for c in "$src"/*.so; do
    usable "$c" || continue
    strip_copy "$c" "$dst/$(basename "$c")"
    pack_deps "$c"
  done
done
if [[ -f $hwloc_comp/hwloc_pci.so ]]; then
  strip_copy "$hwloc_comp/hwloc_pci.so" "$stage/lib/hwloc/hwloc_pci.so"
  pack_deps "$hwloc_comp/hwloc_pci.so"
fi
cp -r /usr/share/openmpi "$stage/share/openmpi"
[[ -d /usr/lib/x86_64-linux-gnu/pmix2/share/pmix ]] &&
  cp -r /usr/lib/x86_64-linux-gnu/pmix2/share/pmix "$stage/share/pmix"
[[ -f /etc/openmpi/openmpi-mca-params.conf ]] &&
  cp /etc/openmpi/openmpi-mca-params.conf "$stage/etc/"
chmod 755 "$stage"/lib/*.so* 2>/dev/null || true

cat >"$stage/env.sh" <<'EOF'
# hpcml GPU bundle environment. Source it from bash (". hpcml-gpu/env.sh")
# or set HPCML_GPU_HOME first; the bin/ wrappers source it themselves.
#
# Finds the libraries the GPU machine provides: the CUDA 13 runtime,
# cuBLAS/cuBLASLt 13, NCCL 2 and the driver's libcuda.so.1. Searched, first
# match wins: HPCML_CUDA_LIB_DIRS (colon-separated, e.g. a CUDA forward
# compatibility dir /usr/local/cuda-13.0/compat), CUDA_HOME/CUDA_PATH,
# /usr/local/cuda*, pip's nvidia/*/lib packages (virtualenv, conda, the
# python3 on PATH, system and user site-packages), the loader cache
# (ldconfig -p) and the usual system directories. A library that needs a
# newer glibc than the bundle's is passed over (a distribution's own NCCL
# package, say: the programs run on the bundle's glibc). Missing ones are
# named on stderr.
if [ -z "${HPCML_GPU_HOME-}" ]; then
  if [ -n "${BASH_SOURCE-}" ]; then
    HPCML_GPU_HOME=$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE}")" && pwd)
  else
    echo "hpcml-gpu: env.sh: set HPCML_GPU_HOME to the bundle directory" >&2
    # shellcheck disable=SC2317 # exit when run rather than sourced
    return 1 2>/dev/null || exit 1
  fi
fi
_hpcml_dirs=
_hpcml_add() { case ":$_hpcml_dirs:" in *":$1:"*) ;; *) _hpcml_dirs=${_hpcml_dirs:+$_hpcml_dirs:}$1 ;; esac; }
_hpcml_candidates() {
  _IFS=$IFS; IFS=:; for d in ${HPCML_CUDA_LIB_DIRS-}; do echo "$d"; done; IFS=$_IFS
  for r in "${CUDA_HOME-}" "${CUDA_PATH-}" /usr/local/cuda /usr/local/cuda-13* /opt/cuda; do
    [ -n "$r" ] || continue
    for s in lib64 lib targets/x86_64-linux/lib; do echo "$r/$s"; done
  done
  _py=$(command -v python3 2>/dev/null) && _py=$(dirname "$(dirname "$_py")")
  for sp in "${VIRTUAL_ENV-}"/lib/python3*/site-packages "${CONDA_PREFIX-}"/lib/python3*/site-packages \
    "${_py:-/nonexistent}"/lib/python3*/site-packages \
    /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
    /usr/lib/python3*/dist-packages /usr/lib/python3*/site-packages \
    "${HOME-}"/.local/lib/python3*/site-packages; do
    for d in "$sp"/nvidia/*/lib; do echo "$d"; done
  done
  [ -n "${CONDA_PREFIX-}" ] && echo "$CONDA_PREFIX/lib"
  ldconfig -p 2>/dev/null |
    sed -nE 's,^[[:space:]]*lib(cuda|cudart|cublas|cublasLt|nccl)\.so.*x86-64.* => (.*)/[^/]*$,\2,p'
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do echo "$d"; done
}
# Whether library $1 runs on the bundle's glibc (@GLIBC@): the newest
# GLIBC_2.N symbol version it asks for is not newer (the version names sit
# in the dynamic string table, near the start of the file).
_hpcml_glibc_ok() {
  _need=$(head -c 8388608 "$1" 2>/dev/null | grep -ao 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n1)
  [ -z "$_need" ] || [ "$_need" -le "${_hpcml_glibc#2.}" ]
}
_hpcml_glibc=@GLIBC@
_hpcml_missing=
for _lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcuda.so.1; do
  _found=
  for _d in $(_hpcml_candidates); do
    if [ -e "$_d/$_lib" ] && _hpcml_glibc_ok "$_d/$_lib"; then _found=$_d; break; fi
  done
  if [ -n "$_found" ]; then _hpcml_add "$_found"; else _hpcml_missing="$_hpcml_missing $_lib"; fi
done
if [ -n "$_hpcml_missing" ]; then
  echo "hpcml-gpu: not found on this machine:$_hpcml_missing (set HPCML_CUDA_LIB_DIRS)" >&2
fi
HPCML_GPU_LIBPATH=$HPCML_GPU_HOME/lib${_hpcml_dirs:+:$_hpcml_dirs}
export HPCML_GPU_HOME HPCML_GPU_LIBPATH
case ":$PATH:" in *":$HPCML_GPU_HOME/bin:"*) ;; *) PATH=$HPCML_GPU_HOME/bin:$PATH ;; esac
export PATH
# Open MPI, PMIx and hwloc find their components, help texts and defaults in
# the bundle; a lone rank started without mpirun or srun does not try to
# start Open MPI's daemon (it is not in the bundle).
export OPAL_PREFIX="$HPCML_GPU_HOME" OPAL_PKGLIBDIR="$HPCML_GPU_HOME/lib/openmpi"
export OPAL_PKGDATADIR="$HPCML_GPU_HOME/share/openmpi" OPAL_SYSCONFDIR="$HPCML_GPU_HOME/etc"
export OMPI_MCA_mca_base_component_path="$HPCML_GPU_HOME/lib/openmpi"
export OMPI_MCA_ess_singleton_isolated=1
export PMIX_INSTALL_PREFIX="$HPCML_GPU_HOME"
export PMIX_MCA_mca_base_component_path="$HPCML_GPU_HOME/lib/pmix"
export HWLOC_PLUGINS_PATH="$HPCML_GPU_HOME/lib/hwloc"
unset _hpcml_dirs _hpcml_missing _lib _found _d _IFS _py _need _hpcml_glibc
unset -f _hpcml_add _hpcml_candidates _hpcml_glibc_ok
EOF
# (getconf, not `ldd --version | head`: head's early exit is a SIGPIPE that
# pipefail turns into a failure, now and then.)
glibc=$(getconf GNU_LIBC_VERSION)
glibc=${glibc#glibc }
[[ $glibc == 2.* ]] || die "cannot tell this machine's glibc version ($glibc)"
sed -i "s/@GLIBC@/$glibc/" "$stage/env.sh"

# shellcheck disable=SC1091
cat >"$stage/README" <<EOF
hpcml GPU bundle, built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1).

Run the programs in bin/ (they need no installation and no environment):
  hpcml-gpu/bin/hpcml-gpu-probe --require-gpu
  hpcml-gpu/bin/trainer_cuda_backend_test
  hpcml-gpu/bin/hpcml-train --backend cuda --synthetic --steps 100
  hpcml-gpu/bin/trainer_bench cuda
The machine must provide a CUDA 13 driver (>= 580) and the CUDA 13 runtime,
cuBLAS 13 and NCCL 2 libraries; env.sh says where it looks and what it misses.
Several ranks need a launcher (the machine's mpirun or srun --mpi=pmix).
EOF
# The checks to run on the GPU machine (scripts/gpu-check.sh) and PyTorch's
# baseline for its bench step.
install -m 755 "$top/scripts/gpu-check.sh" "$stage/gpu-check.sh"
install -m 644 "$top/bench/mpi_trainer/pytorch_cuda_peer.py" "$stage/pytorch_cuda_peer.py"
install -m 644 "$top/bench/mpi_trainer/timeline_summary.py" "$stage/timeline_summary.py"
sort "$work/manifest" >"$stage/MANIFEST"

mkdir -p "$(dirname "$out")"
case $out in
*.tar.gz | *.tgz) compress=(gzip -9) ;;  # for machines without xz
*) compress=(xz -T0 "-$xz_level") ;;
esac
tar -C "$work" -cf - hpcml-gpu | "${compress[@]}" >"$out.tmp"
size=$(stat -c %s "$out.tmp")
((size <= max_bytes)) || { rm -f "$out.tmp"; die "archive is $size bytes, over 60 MiB"; }
mv "$out.tmp" "$out"
say "$out: $(awk -v s="$size" 'BEGIN { printf "%.1f MiB", s / 1048576 }'), $(wc -l <"$stage/MANIFEST") files"
