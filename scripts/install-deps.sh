#!/usr/bin/env bash
# Installs every Debian package hpcml needs to build, test and run its local
# Slurm cluster. Idempotent: packages already present are skipped by apt-get.
# Only Debian's archive is used; nothing else is downloaded.
set -euo pipefail

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
  libhdf5-dev hdf5-tools libhwloc-dev hwloc libopenblas-dev libdnnl-dev libboost-dev zlib1g-dev
  # small libraries
  libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev libpugixml-dev libxxhash-dev nettle-dev
  # tests and benchmarks (numpy/h5py are used through /usr/bin/python3)
  libgtest-dev libgmock-dev libbenchmark-dev python3-numpy python3-h5py
  # misc tools used by scripts
  procps passwd curl time
  # the local cluster's nodes: network namespaces, veths, a bridge (ip); nsenter, unshare
  iproute2 util-linux
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
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
echo "install-deps: done"
