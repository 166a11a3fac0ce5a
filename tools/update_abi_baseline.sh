#!/usr/bin/env bash
# Writes the ABI baseline abi/libkjit.abi (abidw XML) from a built libkjit.so with debug
# information (RelWithDebInfo or Debug), restricted to the types of the public headers.
#   tools/update_abi_baseline.sh BUILD/libkjit.so
# Run it in the release commit (and whenever the soname is bumped), then commit the file:
# tools/check_abi.sh compares every later build against it. Only the exported interfaces
# and the types of the public headers ($KJIT_PUBLIC_HEADERS_DIR, default include/kjit) are
# recorded, with paths made relative to the source tree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:?usage: $0 PATH/TO/libkjit.so}
out=${2:-$root/abi/libkjit.abi}
command -v abidw >/dev/null || { echo "update_abi_baseline: abidw not found (Debian: apt-get install abigail-tools)" >&2; exit 2; }
[ -f "$lib" ] || { echo "update_abi_baseline: no such file: $lib" >&2; exit 2; }
if ! readelf -S -W "$lib" | grep -q '\.debug_info'; then
  echo "update_abi_baseline: $lib has no debug information; build with -g (RelWithDebInfo)" >&2
  exit 2
fi
mkdir -p "$(dirname "$out")"
headers=${KJIT_PUBLIC_HEADERS_DIR:-$root/include/kjit}
abidw --headers-dir "$headers" --drop-private-types --exported-interfaces-only \
  --no-corpus-path --no-show-locs --type-id-style hash --out-file "$out.tmp" "$lib"
# The builder's directories are of no interest to the comparison.
sed -e "s|comp-dir-path='[^']*'|comp-dir-path='.'|g" -e "s|path='$root/|path='|g" "$out.tmp" >"$out"
rm -f "$out.tmp"
echo "wrote $out ($(grep -c '<elf-symbol ' "$out") symbols, soname $(sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$out" | head -1))"
