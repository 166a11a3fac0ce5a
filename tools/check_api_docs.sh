#!/usr/bin/env bash
# Fails unless docs/api.md documents every function the public headers declare, each in a
# heading ("### `kjit_name`", several names may share one heading), and documents no
# function that the headers no longer declare; and unless its "## Status codes" table has
# one row per kjit_status value of include/kjit/common.h, with the same number, a meaning
# and typical causes, and no other row.
#   tools/check_api_docs.sh [API.md]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
doc=${1:-$root/docs/api.md}
[ -f "$doc" ] || { echo "check_api_docs: no such file: $doc" >&2; exit 1; }
declared=$("$root/tools/api_functions.sh")
[ -n "$declared" ] || { echo "check_api_docs: found no function in the headers" >&2; exit 1; }
documented=$(grep -E '^#{2,4} ' "$doc" | grep -oE '\bkjit_[A-Za-z0-9_]+' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$documented"))
stale=$(comm -13 <(echo "$declared") <(echo "$documented"))
status=0
if [ -n "$missing" ]; then
  echo "check_api_docs: functions declared in include/kjit/*.h but not documented in $doc:" >&2
  printf '  %s\n' $missing >&2
  status=1
fi
if [ -n "$stale" ]; then
  echo "check_api_docs: $doc documents functions the headers do not declare:" >&2
  printf '  %s\n' $stale >&2
  status=1
fi

# Status codes: "KJIT_NAME = N" in the enum against "| N | `KJIT_NAME` | meaning | causes |".
header_codes=$(perl -0777 -ne '
  s{/\*.*?\*/}{}gs;
  /typedef\s+enum\s+kjit_status\s*\{(.*?)\}/s or die "no kjit_status enum\n";
  my $body = $1;
  while ($body =~ /\b(KJIT_\w+)\s*=\s*(\d+)/g) { print "$2 $1\n"; }
' "$root/include/kjit/common.h" | sort)
doc_rows=$(awk '/^## Status codes/{on=1; next} on && /^## /{on=0} on && /^\| *[0-9]+ *\|/' "$doc")
doc_codes=$(printf '%s\n' "$doc_rows" | sed -n 's/^| *\([0-9]*\) *| *`\(KJIT_[A-Z_]*\)` *|.*/\1 \2/p' | sort)
if [ -z "$header_codes" ]; then
  echo "check_api_docs: found no status in include/kjit/common.h" >&2
  status=1
elif [ "$header_codes" != "$doc_codes" ]; then
  echo "check_api_docs: the status table of $doc differs from include/kjit/common.h" >&2
  echo "  (- header only, + table only)" >&2
  diff <(echo "$header_codes") <(echo "$doc_codes") | sed -n 's/^</  -/p; s/^>/  +/p' >&2
  status=1
fi
empty=$(printf '%s\n' "$doc_rows" | awk -F'|' 'NF < 6 || $4 ~ /^ *$/ || $5 ~ /^ *$/ {print}')
if [ -n "$empty" ]; then
  echo "check_api_docs: status rows without a meaning or typical causes:" >&2
  printf '  %s\n' "$empty" >&2
  status=1
fi

[ "$status" -ne 0 ] || echo "check_api_docs: all $(echo "$declared" | wc -l) functions and $(echo "$header_codes" | wc -l) status codes documented"
exit "$status"
