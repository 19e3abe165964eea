#!/usr/bin/env bash
# The man pages of this build (man/): each renders without a groff warning,
# has a NAME section, and each section-1 page names every option of its
# command's --help and of each subcommand's --help (so the page is the
# binary's own text) and has its "Exit status:" section (the convention of
# docs/architecture.md); every command's --version is "<name> <version>".
#   test_man_pages.sh MAN_DIR VERSION HELP_ALL BINARY...
set -euo pipefail
man_dir=${1:?usage: test_man_pages.sh MAN_DIR VERSION HELP_ALL BINARY...}
version=${2:?}
help_all=${3:?}
shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fails=0
bad() {
  echo "FAIL: man_pages: $*" >&2
  fails=$((fails + 1))
}

pages=$(ls "$man_dir"/*.[158])
for page in $pages; do
  # -rcR=1: continuous rendering, as on a terminal (no page breaks to warn about).
  warnings=$(groff -t -man -Tutf8 -ww -rcR=1 -z "$page" 2>&1)
  [ -z "$warnings" ] || bad "$(basename "$page"): groff warns: $warnings"
  grep -q '^\.SH "\?NAME' "$page" || bad "$(basename "$page"): no NAME section"
  text=$(MANWIDTH=80 man -l "$page" 2>/dev/null) || bad "$(basename "$page"): man -l fails"
  [ -n "$text" ] || bad "$(basename "$page"): renders empty"
done
for want in hpcml_guard.8 hpcml-policy.toml.5 hpcml-prices.toml.5; do
  [ -f "$man_dir/$want" ] || bad "$want was not made"
done

# The page's source as plain text: fonts dropped, "\-" as "-".
plain() {
  sed -e 's/\\f[BIRP]//g' -e 's/\\f\[[A-Z]*\]//g' -e 's/\\-/-/g' -e 's/\\[,/]//g' "$1"
}
for bin in "$@"; do
  name=$(basename "$bin")
  page=$man_dir/$name.1
  [ -f "$page" ] || { bad "$name: no page $page"; continue; }
  got=$("$bin" --version 2>&1) || bad "$name --version exits non-zero"
  [ "$got" = "$name $version" ] || bad "$name --version: expected '$name $version', got '$got'"
  # Options: the first column of each option line (-h,--help  --model TEXT ...).
  options=$("$help_all" "$bin" --help | sed -n 's/^ \{1,\}\(-[^ ]*\).*/\1/p' | tr ',' '\n' |
    sed -n 's/^\(--\?[A-Za-z0-9][-A-Za-z0-9_]*\).*/\1/p' | sort -u)
  [ -n "$options" ] || bad "$name: no options found in its --help"
  source_text=$(plain "$page")
  missing=""
  for o in $options; do
    grep -qe "$o\b" <<<"$source_text" || missing="$missing $o"
  done
  [ -z "$missing" ] || bad "$name.1 lacks options of $name --help:$missing"
  grep -q '^\.SS "Exit status:"' "$page" || bad "$name.1 has no Exit status section"
  echo "$name.1: $(wc -w <<<"$options") options, all in the page"
done
[ $fails -eq 0 ] || exit 1
echo "PASS: man_pages: $(wc -w <<<"$pages") pages render without warnings"
