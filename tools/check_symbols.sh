#!/usr/bin/env bash
# ABI guard, part 1: the symbols libkjit exports.
#   tools/check_symbols.sh BUILD/libkjit.so [MAP]
# src/kjit.map (or MAP) lists every exported symbol by name under the version node of the
# release that added it (no wildcards in `global:`). Fails when the library
#   - exports a symbol that is not kjit_* (nm -D --defined-only),
#   - exports a kjit_* symbol that the map does not list (it would have joined a version
#     node silently),
#   - exports a symbol under another version node than the one the map lists it in, or
#     unversioned, or not as the default version (readelf),
#   - lacks a symbol the map lists,
#   - lacks a function some public header declares (tools/api_functions.sh),
#   - has no soname of the form libkjit.so.N.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:?usage: $0 PATH/TO/libkjit.so [MAP]}
map=${2:-$root/src/kjit.map}
[ -f "$lib" ] || { echo "check_symbols: no such file: $lib" >&2; exit 2; }
[ -f "$map" ] || { echo "check_symbols: no such file: $map" >&2; exit 2; }
status=0

# The map as "NODE<TAB>symbol" lines: comments removed, symbols of `global:` sections only.
listed=$(perl -0777 -ne '
  s{/\*.*?\*/}{}gs;
  s{#[^\n]*}{}g;
  while (/([A-Za-z_][A-Za-z0-9_.]*)\s*\{(.*?)\}\s*[A-Za-z0-9_.]*\s*;/gs) {
    my ($node, $body) = ($1, $2);
    my $section = "";
    for my $tok (split /;/, $body) {
      $tok =~ s/^\s+|\s+$//g;
      next if $tok eq "";
      if ($tok =~ s/^(global|local)\s*:\s*//) { $section = $1; }
      next if $tok eq "" || $section ne "global";
      print "$node\t$tok\n";
    }
  }' "$map" | sort -u)
[ -n "$listed" ] || { echo "check_symbols: no global symbol found in $map" >&2; exit 2; }
nodes=$(printf '%s\n' "$listed" | cut -f1 | sort -u)

# 0. The map lists names, not patterns.
patterns=$(printf '%s\n' "$listed" | awk -F'\t' '$2 ~ /[*?\[]/ { print "  " $1 ": " $2 }')
if [ -n "$patterns" ]; then
  echo "check_symbols: $map exports by pattern; list each symbol instead:" >&2
  echo "$patterns" >&2
  status=1
fi

# 1. Only kjit_* (each version node also appears as an absolute symbol named after it).
bad=$(nm -D --defined-only "$lib" | awk -v nodes="$(echo $nodes)" '
  BEGIN { n = split(nodes, a, " "); for (i = 1; i <= n; i++) node[a[i]] = 1 }
  { name = $NF; sub(/@.*/, "", name) }
  $(NF-1) == "A" && (name in node) { next }
  name !~ /^kjit_/ { print "  " $0 }')
if [ -n "$bad" ]; then
  echo "check_symbols: $lib exports symbols outside the kjit_ namespace:" >&2
  echo "$bad" >&2
  status=1
fi

# 2. What the library exports, as "VERSION<TAB>name": readelf shows defined symbols as
#    name@@NODE (name@NODE for a non-default one, a bare name if unversioned).
exported=$(readelf --dyn-syms -W "$lib" | awk '
  $1 ~ /^[0-9]+:$/ && $7 != "UND" && $7 != "ABS" && $5 != "LOCAL" {
    name = $8; ver = "(none)"
    if (index(name, "@@")) { ver = substr(name, index(name, "@@") + 2); name = substr(name, 1, index(name, "@@") - 1) }
    else if (index(name, "@")) { ver = "non-default " substr(name, index(name, "@") + 1); name = substr(name, 1, index(name, "@") - 1) }
    print ver "\t" name
  }' | sort -u)

# 3. Every exported kjit_* symbol is listed, under the node it carries.
unlisted=$(join -t $'\t' -1 2 -2 2 -v 1 <(printf '%s\n' "$exported" | sort -t $'\t' -k2,2) \
                                       <(printf '%s\n' "$listed" | sort -t $'\t' -k2,2) | awk -F'\t' '{ print "  " $1 " (version " $2 ")" }')
if [ -n "$unlisted" ]; then
  echo "check_symbols: $lib exports symbols that $map does not list (add each to the node of the next release):" >&2
  echo "$unlisted" >&2
  status=1
fi
mismatch=$(join -t $'\t' -1 2 -2 2 <(printf '%s\n' "$exported" | sort -t $'\t' -k2,2) \
                                   <(printf '%s\n' "$listed" | sort -t $'\t' -k2,2) | awk -F'\t' '
  $2 == "(none)" { print "  " $1 ": not versioned (listed under " $3 ")"; next }
  $2 != $3 { print "  " $1 ": exported as " $2 ", listed under " $3 }')
if [ -n "$mismatch" ]; then
  echo "check_symbols: symbols whose version differs from $map:" >&2
  echo "$mismatch" >&2
  status=1
fi

# 4. Every listed symbol is exported.
absent=$(comm -13 <(printf '%s\n' "$exported" | cut -f2 | sort -u) <(printf '%s\n' "$listed" | cut -f2 | sort -u))
if [ -n "$absent" ]; then
  echo "check_symbols: symbols listed in $map but not exported by $lib:" >&2
  printf '  %s\n' $absent >&2
  status=1
fi

# 5. Every function the public headers declare is exported.
missing=$(comm -23 <("$root/tools/api_functions.sh") <(printf '%s\n' "$exported" | cut -f2 | sort -u))
if [ -n "$missing" ]; then
  echo "check_symbols: functions declared in include/kjit/*.h but not exported by $lib:" >&2
  printf '  %s\n' $missing >&2
  status=1
fi

# 6. A real soname.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case "$soname" in
  libkjit.so.[0-9]*) ;;
  *) echo "check_symbols: soname is '$soname', expected libkjit.so.N" >&2; status=1 ;;
esac

if [ "$status" -eq 0 ]; then
  summary=$(printf '%s\n' "$exported" | cut -f1 | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
  echo "check_symbols: $(printf '%s\n' "$exported" | wc -l) symbols, all kjit_* and listed in the map ($summary); soname $soname"
fi
exit "$status"
