#!/usr/bin/env bash
# The --help text a man page is made from: the command's own --help, then
# each subcommand's --help (CLI11 lists them under "Subcommands:"), so the
# page documents every option the command accepts, read from the binary
# itself; the command's "Exit status:" block (its help's last) goes last.
# help2man runs this through a wrapper named like the command.
#   help_all.sh BINARY --help | --version
set -euo pipefail
bin=${1:?usage: help_all.sh BINARY --help|--version}
shift
case "${1:-}" in
  --version) exec "$bin" --version ;;
  --help) ;;
  *) echo "help_all.sh: expected --help or --version, got '${1:-}'" >&2; exit 2 ;;
esac
top=$("$bin" --help)
printf '%s\n' "$(sed '/^Exit status:$/,$d' <<<"$top")"
# Subcommand names: the first word of each indented line after "Subcommands:".
subs=$(awk '/^Subcommands:/ {on=1; next} on && /^[^ ]/ {on=0} on && /^  [^ ]/ {print $1}' <<<"$top")
for sub in $subs; do
  text=$("$bin" "$sub" --help)
  # help2man makes a section of each unindented "Heading:" line: one per
  # subcommand, its usage and options indented below it.
  printf '\n%s command:\n' "${sub^}"
  # Its description, a blank line, then its usage and options.
  sed -e '/^Options:$/d' -e 's/^\([^ ]\)/  \1/' -e '1a\\' <<<"$text"
done
exit_status=$(sed -n '/^Exit status:$/,$p' <<<"$top")
[ -z "$exit_status" ] || printf '\n%s\n' "$exit_status"
