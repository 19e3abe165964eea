#!/usr/bin/env bash
# Runs a command in a fresh Debian 12 root, with this checkout cloned into it
# at /src, so a missing install step fails here as it would on a new machine.
# Root only. .ci/run uses it; so can a developer:
#   scripts/fresh-root.sh CHECKOUT -- COMMAND...   e.g. scripts/fresh-root.sh . -- scripts/test.sh -L unit
#
# The root is `mmdebstrap --variant=apt bookworm`, unpacked anew on every run
# from a tarball cached in $FRESH_ROOT_CACHE (default /var/cache/fresh-root),
# remade when older than a week. Into it come only the machine's ways to its
# registries (apt's settings, npm's global settings, the extra CA
# certificates), never its software; and, shared with the host:
#   - /var/cache/apt/archives: downloaded .deb files, not installed ones;
#   - /usr/local/cuda, read-only, with its loader configuration
#     (/etc/ld.so.conf.d/*cuda*), when the host has it: this machine kind's
#     CUDA toolkit, which Debian does not package (it is not installed by
#     scripts/install-deps.sh on any machine);
#   - with FRESH_ROOT_CCACHE=DIR: a compiler cache, DIR on the host. ccache is
#     installed in the root and used in preprocessor mode, so configure and
#     preprocessing run fresh and only the compiler's output is reused.
# The root lives in mount and PID namespaces of its own: its mounts never
# reach the host and every process it starts dies with it. It shares the
# host's network, to reach the registries; a test phase that starts servers
# runs under `unshare --net` inside it (.ci/run does).
# FRESH_ROOT_KEEP=1 keeps the root's directory afterwards, for a look.
set -euo pipefail
if [ "$(id -u)" -ne 0 ] || [ $# -lt 3 ] || [ "$2" != -- ]; then
  echo "usage (as root): $0 CHECKOUT -- COMMAND..." >&2
  exit 2
fi
src=$(cd "$1" && pwd)
shift 2
cache=${FRESH_ROOT_CACHE:-/var/cache/fresh-root}
ccache_dir=${FRESH_ROOT_CCACHE:-}
mkdir -p "$cache"
base=$cache/bookworm-apt.tar
if [ ! -f "$base" ] || [ -n "$(find "$base" -mtime +7)" ]; then
  command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >/dev/null
  echo "fresh-root: making the base root (mmdebstrap --variant=apt bookworm)"
  mmdebstrap --quiet --variant=apt bookworm "$base.tmp.tar" && mv "$base.tmp.tar" "$base"
fi
root=$(mktemp -d /var/tmp/fresh-root.XXXXXX)
cleanup() {
  if [ "${FRESH_ROOT_KEEP:-0}" = 1 ]; then
    echo "fresh-root: kept $root"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
tar -xf "$base" -C "$root"

# The machine's ways to its registries. ca-certificates, once installed in
# the root, adds the extra certificates to the root's bundle.
rm -f "$root/etc/apt/sources.list"
cp -a /etc/apt/. "$root/etc/apt/"
[ -f /etc/npmrc ] && cp /etc/npmrc "$root/etc/npmrc"
mkdir -p "$root/usr/local/share/ca-certificates"
cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/resolv.conf /etc/hosts "$root/etc/" 2>/dev/null || true
if [ -d /usr/local/cuda/ ]; then
  cp /etc/ld.so.conf.d/*cuda* "$root/etc/ld.so.conf.d/" 2>/dev/null || true
fi
# A root thrown away after the run needs no fsync per unpacked file.
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/fresh-root-unsafe-io"
# Committed files only, as a new clone has them; a tree without git (an
# exported archive) is copied without its build outputs.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git clone -q "$src" "$root/src"
else
  mkdir "$root/src"
  tar -C "$src" --exclude=./build --exclude='./build-*' -cf - . | tar -C "$root/src" -xf -
fi

# A new machine's environment: no PATH entries, Python or settings of the host
# user's, only the proxy and CA variables that reach the registries.
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
  LANG=C.UTF-8 TERM=dumb)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
  NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR; do
  [ -n "${!v:-}" ] && envs+=("$v=${!v}")
done
if [ -n "$ccache_dir" ]; then
  mkdir -p "$ccache_dir"
  envs+=(CCACHE_DIR=/var/cache/hpcml-ccache CCACHE_NODIRECT=1 CCACHE_MAXSIZE=5G
    CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
    CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

export FRESH_ROOT=$root FRESH_ROOT_CCACHE_DIR=$ccache_dir
unshare --mount --pid --fork --propagation private bash -euc '
  r=$FRESH_ROOT
  mount --bind "$r" "$r"            # a mount point, so unshare --mount works inside
  mkdir -p "$r/var/cache/apt/archives"
  mount --bind /var/cache/apt/archives "$r/var/cache/apt/archives"
  if [ -d /usr/local/cuda/ ]; then   # where it really is, and the link to it
    real=$(readlink -f /usr/local/cuda)
    mkdir -p "$r$real"
    mount --bind -o ro "$real" "$r$real"
    [ -L /usr/local/cuda ] && ln -sfn "$(readlink /usr/local/cuda)" "$r/usr/local/cuda"
  fi
  if [ -n "$FRESH_ROOT_CCACHE_DIR" ]; then
    mkdir -p "$r/var/cache/hpcml-ccache"
    mount --bind "$FRESH_ROOT_CCACHE_DIR" "$r/var/cache/hpcml-ccache"
  fi
  mount -t proc proc "$r/proc"; mount --rbind /sys "$r/sys"; mount --rbind /dev "$r/dev"
  mount -t tmpfs tmpfs "$r/run"
  exec chroot "$r" /usr/bin/env -i "$@"' _ "${envs[@]}" /bin/bash -c '
    set -e
    cd /src
    ldconfig
    if [ -n "${CCACHE_DIR:-}" ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ccache >/dev/null
    fi
    exec "$@"' _ "$@"
