#!/usr/bin/env bash
# Checks include/kjit/kjit_typedefs.h and the versioned structs' initialisers:
#  - the header is what tools/gen_typedefs.sh writes from the prototypes;
#  - every function tools/api_functions.sh lists has a PFN_ type, and no PFN_ names a
#    function the headers do not declare;
#  - a C file assigning &kjit_<name> to a PFN_kjit_<name> for every function compiles with
#    -Werror (so each type matches its prototype);
#  - every versioned struct (first field struct_size) has a KJIT_<NAME>_INIT macro that
#    initialises every field (-Wmissing-field-initializers under -Werror).
#   tools/check_typedefs.sh [CC]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${1:-${CC:-cc}}
work=$(mktemp -d "${TMPDIR:-/tmp}/kjit-typedefs.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0

"$root/tools/gen_typedefs.sh" --check || status=1

declared=$("$root/tools/api_functions.sh")
[ -n "$declared" ] || { echo "check_typedefs: found no function in the headers" >&2; exit 1; }
typed=$(grep -oE '\(\*PFN_kjit_[A-Za-z0-9_]+\)' "$root/include/kjit/kjit_typedefs.h" |
  sed 's/^(\*PFN_//; s/)$//' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$typed"))
stale=$(comm -13 <(echo "$declared") <(echo "$typed"))
if [ -n "$missing" ]; then
  echo "check_typedefs: functions without a PFN_ type (run tools/gen_typedefs.sh):" >&2
  printf '  %s\n' $missing >&2
  status=1
fi
if [ -n "$stale" ]; then
  echo "check_typedefs: PFN_ types of functions the headers do not declare:" >&2
  printf '  %s\n' $stale >&2
  status=1
fi

# Versioned structs: "typedef struct kjit_x {" whose first member is "uint32_t struct_size;".
structs=$(perl -0777 -ne '
  s{/\*.*?\*/}{}gs;
  while (/typedef\s+struct\s+(kjit_\w+)\s*\{\s*uint32_t\s+struct_size\s*;/gs) { print "$1\n"; }
' "$root"/include/kjit/*.h | sort -u)
[ -n "$structs" ] || { echo "check_typedefs: found no versioned struct" >&2; exit 1; }

{
  echo '#include <kjit/kjit_typedefs.h>'
  for f in $declared; do echo "PFN_$f check_$f = &$f;"; done
  for s in $structs; do
    init=$(echo "${s}_INIT" | tr '[:lower:]' '[:upper:]')
    if ! grep -qE "^#define $init\b" "$root"/include/kjit/*.h; then
      echo "check_typedefs: versioned struct $s has no $init macro" >&2
      status=1
      continue
    fi
    echo "$s init_$s = $init;"
  done
  echo 'int main(void) { return 0; }'
} >"$work/check.c"
if ! "$cc" -std=c99 -Wall -Wextra -Werror -pedantic -I"$root/include" -c "$work/check.c" \
    -o "$work/check.o" 2>"$work/cc.log"; then
  echo "check_typedefs: a PFN_ type or an _INIT macro does not match its declaration:" >&2
  cat "$work/cc.log" >&2
  status=1
fi
[ "$status" -ne 0 ] ||
  echo "check_typedefs: $(echo "$declared" | wc -l) function types and $(echo "$structs" | wc -l) struct initialisers match"
exit "$status"
