#!/usr/bin/env bash
# ABI guard, part 2: compare a built libkjit.so with the committed baseline abi/libkjit.abi
# (abidw XML) using abidiff from abigail-tools.
#   tools/check_abi.sh BUILD/libkjit.so [BASELINE]
# Passes when the library is unchanged, when functions were only added, or when public
# kjit_* structs only grew at their end (they start with struct_size). Fails on any other
# change (removed or changed function, changed type layout, moved or retyped member...)
# unless the library's soname differs from the baseline's: the soname was bumped in the
# same change. Refresh the baseline with tools/update_abi_baseline.sh at each release.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:?usage: $0 PATH/TO/libkjit.so [BASELINE]}
baseline=${2:-$root/abi/libkjit.abi}
suppr=$root/abi/growable-structs.suppr
for tool in abidiff abidw; do
  command -v $tool >/dev/null || { echo "check_abi: $tool not found (Debian: apt-get install abigail-tools)" >&2; exit 2; }
done
[ -f "$lib" ] || { echo "check_abi: no such file: $lib" >&2; exit 2; }
[ -f "$baseline" ] || { echo "check_abi: no baseline $baseline; create it with tools/update_abi_baseline.sh" >&2; exit 1; }
if ! readelf -S -W "$lib" | grep -q '\.debug_info'; then
  echo "check_abi: $lib has no debug information, so types cannot be compared; build with -g (RelWithDebInfo)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

base_soname=$(sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$baseline" | head -1)
lib_soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')

# abidiff's status is a bit field: 1 error, 2 usage error, 4 ABI change, 8 incompatible.
diff_rc() {
  local rc=0
  abidiff --exported-interfaces-only "$@" "$baseline" "$lib" >"$work/report" 2>&1 || rc=$?
  if [ $((rc & 3)) -ne 0 ]; then
    echo "check_abi: abidiff failed (status $rc):" >&2
    cat "$work/report" >&2
    exit 1
  fi
  echo "$rc"
}

incompatible() {
  if [ -n "$base_soname" ] && [ "$base_soname" != "$lib_soname" ]; then
    echo "check_abi: incompatible ABI changes, allowed because the soname was bumped ($base_soname -> $lib_soname);"
    echo "check_abi: regenerate the baseline with tools/update_abi_baseline.sh in the release commit."
    cat "$1"
    exit 0
  fi
  echo "check_abi: INCOMPATIBLE ABI change against $baseline (soname still $lib_soname)." >&2
  echo "check_abi: keep the ABI, or bump the soname (KJIT_SOVERSION in CMakeLists.txt and the version node in src/kjit.map)." >&2
  cat "$1" >&2
  exit 1
}

rc=$(diff_rc --no-added-syms)
cp "$work/report" "$work/full"
if [ "$rc" -ne 0 ]; then
  [ $((rc & 8)) -eq 0 ] || incompatible "$work/full"
  # Changes other than struct growth?
  rc2=$(diff_rc --no-added-syms --suppressions "$suppr")
  [ "$rc2" -eq 0 ] || incompatible "$work/full"
  # Only kjit_* struct size changes are left: check that they only appended members.
  abidw --exported-interfaces-only --no-show-locs --type-id-style hash --out-file "$work/current.abi" "$lib"
  if ! python3 "$root/tools/abi_struct_check.py" "$baseline" "$work/current.abi" >"$work/structs" 2>&1; then
    { echo "public structs changed in place, not only at their end:"; cat "$work/structs"; cat "$work/full"; } >"$work/both"
    incompatible "$work/both"
  fi
  echo "check_abi: public structs grew at their end (compatible):"
  cat "$work/full"
fi
rc=$(diff_rc)
if [ $((rc & 4)) -ne 0 ]; then
  echo "check_abi: functions were added (compatible); refresh the baseline at the next release:"
  cat "$work/report"
fi
echo "check_abi: $lib is compatible with the baseline ($lib_soname)"
