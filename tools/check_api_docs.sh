#!/usr/bin/env bash
# Fails unless docs/api.md documents every function the public headers declare, each in a
# heading ("### `kjit_name`", several names may share one heading), and documents no
# function that the headers no longer declare.
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
[ "$status" -ne 0 ] || echo "check_api_docs: all $(echo "$declared" | wc -l) functions documented"
exit "$status"
