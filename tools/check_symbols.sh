#!/usr/bin/env bash
# ABI guard, part 1: the symbols libkjit exports.
#   tools/check_symbols.sh BUILD/libkjit.so
# Fails when the library
#   - exports a symbol that is not kjit_* (nm -D --defined-only),
#   - exports a symbol that is not versioned with the node of src/kjit.map (readelf),
#   - lacks a function some public header declares (tools/api_functions.sh),
#   - has no soname of the form libkjit.so.N.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:?usage: $0 PATH/TO/libkjit.so}
[ -f "$lib" ] || { echo "check_symbols: no such file: $lib" >&2; exit 2; }
map=$root/src/kjit.map
node=$(sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_.]*\)[[:space:]]*{.*/\1/p' "$map" | tail -1)
[ -n "$node" ] || { echo "check_symbols: no version node found in $map" >&2; exit 2; }
status=0

# 1. Only kjit_* (the version node itself appears as an absolute symbol named after it).
bad=$(nm -D --defined-only "$lib" | awk -v node="$node" '
  { name = $NF; sub(/@.*/, "", name) }
  $(NF-1) == "A" && name == node { next }
  name !~ /^kjit_/ { print "  " $0 }')
if [ -n "$bad" ]; then
  echo "check_symbols: $lib exports symbols outside the kjit_ namespace:" >&2
  echo "$bad" >&2
  status=1
fi

# 2. Every exported symbol carries the version node as its default version: readelf shows
#    defined symbols as name@@NODE (name@NODE for a hidden one, a bare name if unversioned).
exported=$(readelf --dyn-syms -W "$lib" | awk '
  $1 ~ /^[0-9]+:$/ && $7 != "UND" && $7 != "ABS" && $5 != "LOCAL" {
    name = $8; ver = "(none)"
    if (index(name, "@@")) { ver = substr(name, index(name, "@@") + 2); name = substr(name, 1, index(name, "@@") - 1) }
    else if (index(name, "@")) { ver = "hidden " substr(name, index(name, "@") + 1); name = substr(name, 1, index(name, "@") - 1) }
    print ver "\t" name
  }')
unversioned=$(printf '%s\n' "$exported" | awk -F'\t' -v node="$node" 'NF == 2 && $1 != node { print "  " $2 " (version " $1 ")" }')
if [ -n "$unversioned" ]; then
  echo "check_symbols: exported symbols not versioned $node:" >&2
  echo "$unversioned" >&2
  status=1
fi
count=$(printf '%s\n' "$exported" | awk -F'\t' -v node="$node" '$1 == node' | wc -l)
if [ "$count" -eq 0 ]; then
  echo "check_symbols: $lib exports no symbol versioned $node" >&2
  status=1
fi

# 3. Every function the public headers declare is exported.
missing=$(comm -23 <("$root/tools/api_functions.sh") \
                   <(printf '%s\n' "$exported" | awk -F'\t' -v node="$node" '$1 == node { print $2 }' | sort -u))
if [ -n "$missing" ]; then
  echo "check_symbols: functions declared in include/kjit/*.h but not exported by $lib:" >&2
  printf '  %s\n' $missing >&2
  status=1
fi

# 4. A real soname.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case "$soname" in
  libkjit.so.[0-9]*) ;;
  *) echo "check_symbols: soname is '$soname', expected libkjit.so.N" >&2; status=1 ;;
esac

if [ "$status" -eq 0 ]; then
  echo "check_symbols: $count symbols, all kjit_* and versioned $node; soname $soname"
fi
exit "$status"
