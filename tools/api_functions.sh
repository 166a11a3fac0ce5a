#!/usr/bin/env bash
# Prints the name of every function the public headers declare, one per line, sorted:
# the headers given as arguments, else $KJIT_PUBLIC_HEADERS_DIR/*.h, else include/kjit/*.h.
# Used by check_api_docs.sh and check_symbols.sh.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  set -- "${KJIT_PUBLIC_HEADERS_DIR:-$root/include/kjit}"/*.h
fi
# Comments are removed first; a declaration is "KJIT_EXPORT <type> kjit_name(".
perl -0777 -ne '
  s{/\*.*?\*/}{}gs;
  s{//[^\n]*}{}g;
  while (/\bKJIT_EXPORT\b[^;{}#]*?\b(kjit_\w+)\s*\(/gs) { print "$1\n"; }
' "$@" | sort -u
