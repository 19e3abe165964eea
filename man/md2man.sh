#!/usr/bin/env bash
# Makes a man page (section 5 or 8) from a part of a page in docs/, with
# pandoc, so the man page and the documentation are one text.
#   md2man.sh DOC.md FROM TO SHIFT NAME SECTION DESCRIPTION SEE_ALSO VERSION OUT
# The part runs from the line FROM (a heading, exactly) up to the line TO
# (exclusive; "-" for the end of the file). Its headings move up SHIFT levels
# (outside code blocks), so its top headings become the page's sections.
# Writes OUT and OUT.gz (gzip -9n).
set -euo pipefail
[ $# -eq 10 ] || { echo "usage: md2man.sh DOC FROM TO SHIFT NAME SECTION DESCRIPTION SEE_ALSO VERSION OUT" >&2; exit 2; }
doc=$1 from=$2 to=$3 shift_by=$4 name=$5 section=$6 description=$7 see_also=$8 version=$9 out=${10}
[ -r "$doc" ] || { echo "md2man.sh: $doc: not readable" >&2; exit 1; }
part=$(awk -v from="$from" -v to="$to" -v k="$shift_by" '
  $0 == from { on = 1 }
  on && to != "-" && $0 == to { exit }
  on {
    if ($0 ~ /^```/) fence = !fence
    if (!fence && $0 ~ /^#+ /) {
      match($0, /^#+/)
      n = RLENGTH - k
      if (n < 1) n = 1
      $0 = substr("######", 1, n) substr($0, RLENGTH + 1)
    }
    print
  }' "$doc")
[ -n "$part" ] || { echo "md2man.sh: $doc: no line '$from'" >&2; exit 1; }
{
  printf -- '---\ntitle: %s\nsection: %s\nheader: hpcml\nfooter: hpcml %s\n---\n\n' \
    "${name^^}" "$section" "$version"
  printf '# NAME\n\n%s \\- %s\n\n' "$name" "$description"
  printf '%s\n\n' "$part"
  printf '# SEE ALSO\n\n%s\n' "$see_also"
} >"$out.md"
# pandoc's tables are 70 ens wide in total; an indented table on an 80-column
# terminal has 71 for columns and their gaps: scale the widths to 88%.
pandoc --standalone --from=markdown --to=man "$out.md" |
  perl -pe 's/lw\(([0-9.]+)n\)/sprintf("lw(%.1fn)", $1 * 0.88)/ge' |
  sed '/^\.TH /a .ad l' >"$out.tmp"   # ragged right: narrow table columns need no stretching
rm -f "$out.md"
mv -f "$out.tmp" "$out"
gzip -9n -c "$out" >"$out.gz"
