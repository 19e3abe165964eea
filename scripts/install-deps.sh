#!/usr/bin/env bash
# Installs every Debian package hpcml needs to build, test and run its local
# Slurm cluster, then ONNX Runtime for the ONNX tests and benchmarks.
# Idempotent and quick when everything is present.
# Debian's archive is used for everything but one npm package:
# onnxruntime-node (no Debian package exists), pinned with its dependencies
# in mpi_trainer/inference/ort/package-lock.json and installed with
# `npm ci --ignore-scripts` into build/ort/ (git-ignored): its Linux x64 CPU
# library is inside the package; its install script would only fetch GPU parts.
#
#   scripts/install-deps.sh            the packages and ONNX Runtime
#   scripts/install-deps.sh --duckdb   also DuckDB (@duckdb/node-api, pinned in
#                                      bench/featurecache/duckdb/package-lock.json,
#                                      into build/duckdb/), for the as-of benchmark
#                                      only (no Debian package exists)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (apt-get installs system packages); try: sudo $0" >&2
  exit 1
fi

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format git
  # clang with its runtimes: libFuzzer targets of the guard
  clang libclang-rt-14-dev
  # Slurm, munge, accounting database
  slurmctld slurmd slurmdbd slurm-client libslurm-dev libpmix-dev munge mariadb-server mariadb-client
  # MPI with PMIx support
  openmpi-bin libopenmpi-dev
  # numeric and I/O libraries
  libhdf5-dev hdf5-tools libblosc-dev hdf5-filter-plugin-blosc-serial libhwloc-dev hwloc libopenblas-dev libdnnl-dev libboost-dev zlib1g-dev
  # gradient-boosted trees (hpcml::trees), and the same library from Python for their
  # tests (its XGBClassifier needs scikit-learn)
  libxgboost-dev python3-xgboost python3-sklearn
  # small libraries
  libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev libpugixml-dev libxxhash-dev nettle-dev
  # tests and benchmarks (numpy/h5py are used through /usr/bin/python3)
  libgtest-dev libgmock-dev libbenchmark-dev python3-numpy python3-h5py python3-pandas
  # the Python package (import hpcml: pybind11 for Debian's /usr/bin/python3) and its
  # tests (pytest); PyTorch (CPU, gloo) for the example DDP job and its cluster test
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-torch
  # ONNX export (protobuf and the checker) and its tests
  libonnx-dev libprotobuf-dev python3-onnx
  # misc tools used by scripts
  procps passwd curl time
  # the monitoring test: node_exporter's textfile collector scraped by Prometheus
  prometheus prometheus-node-exporter
  # the guard's audit collector (rsyslogd's TCP input) in the local cluster and its tests
  rsyslog
  # the local cluster's nodes: network namespaces, veths, a bridge (ip); nsenter,
  # unshare; mount, umount (not in Debian 12's essential set)
  iproute2 util-linux mount
  # man pages (help2man from --help, pandoc from docs/, groff and man to check
  # them) and the Debian packages (cpack runs dpkg-shlibdeps; lintian checks)
  help2man pandoc groff-base man-db dpkg-dev lintian
)

# node and npm run ONNX Runtime. A machine with another npm on PATH (say
# nodesource's node, which bundles npm) keeps it: Debian's npm would conflict.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

install_debian_packages() {
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    return 0
  fi
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start services: the project's own scripts start
  # munge, MariaDB and the Slurm daemons privately.
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    created_policy=1
  fi
  trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# install_npm <dir with package.json and its lock> <dest> <a file the package
# must then hold>: npm ci --ignore-scripts at the versions of the committed
# lock file; skipped when <dest> holds that lock and the file.
install_npm() {
  local src=$1 dst=$2 need=$3
  if cmp -s "$src/package.json" "$dst/package.json" &&
    cmp -s "$src/package-lock.json" "$dst/package-lock.json" && [ -f "$dst/$need" ]; then
    echo "install-deps: $(basename "$dst") present in $dst"
    return 0
  fi
  echo "install-deps: installing $(basename "$src") (npm ci --ignore-scripts) into $dst"
  mkdir -p "$dst"
  cp "$src/package.json" "$src/package-lock.json" "$dst/"
  (cd "$dst" && npm ci --ignore-scripts --no-audit --no-fund)
  if [ ! -f "$dst/$need" ]; then
    echo "install-deps: $dst/$need is missing after npm ci" >&2
    exit 1
  fi
}

install_debian_packages
install_npm "$root/mpi_trainer/inference/ort" "$root/build/ort" \
  node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1
if [ "${1-}" = --duckdb ]; then
  install_npm "$root/bench/featurecache/duckdb" "$root/build/duckdb" \
    node_modules/@duckdb/node-bindings-linux-x64/duckdb.node
fi
echo "install-deps: done"
