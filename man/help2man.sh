#!/usr/bin/env bash
# Makes a section-1 man page from a command's own --help and --version
# (help2man), with each subcommand's --help (help_all.sh), so the page
# cannot drift from the binary.
#   help2man.sh BINARY NAME DESCRIPTION SEE_ALSO OUT.1
# Writes OUT.1 and OUT.1.gz (gzip -9n: no timestamp, as Debian wants).
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: help2man.sh BINARY NAME DESCRIPTION SEE_ALSO OUT.1" >&2; exit 2; }
bin=$1 name=$2 description=$3 see_also=$4 out=$5
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$bin" ] || { echo "help2man.sh: $bin: not an executable" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# help2man runs "<name> --help": a wrapper of that name in front of the binary.
mkdir "$work/bin"
printf '#!/bin/sh\nexec %q %q "$@"\n' "$here/help_all.sh" "$bin" >"$work/bin/$name"
chmod +x "$work/bin/$name"
printf '[SEE ALSO]\n%s\n' "$see_also" >"$work/include.h2m"
# The MPI commands start an Open MPI singleton to print their help.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
help2man --no-info --section=1 --name="$description" --include="$work/include.h2m" \
  --no-discard-stderr --output="$out.tmp" "$work/bin/$name"
mv -f "$out.tmp" "$out"
gzip -9n -c "$out" >"$out.gz"
