#!/usr/bin/env bash
# Installs a build into a temporary prefix, checks the installed tree, then builds and
# runs the C examples against that prefix only: examples/c-pkgconfig (pkg-config),
# examples/cmake-consumer (find_package) and examples/dlopen (dlopen + dlsym).
#   tools/test_install.sh BUILD_DIR
# Each example runs twice on a fresh cache: a miss then a disk hit. Their GPU part skips
# itself without a GPU.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kjit-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# Nothing from the environment may point at the build tree or another kjit.
unset PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH KJIT_CACHE_DIR KJIT_CACHE_DISABLE \
  KJIT_CACHE_MAX_SIZE KJIT_REMOTE CPATH C_INCLUDE_PATH LIBRARY_PATH || true
export XDG_CACHE_HOME=$work/xdg

cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }

# ---- the installed tree ---------------------------------------------------------------
lib=$(dirname "$(find "$prefix" -name 'libkjit.so.0' | head -1)")
[ -n "$lib" ] && [ "$lib" != . ] || { echo "FAIL: no libkjit.so.0 installed under $prefix" >&2; exit 1; }
real=$(cd "$lib" && readlink -f libkjit.so.0)
case $(basename "$real") in
  libkjit.so.0.*) ;;
  *) fail "libkjit.so.0 resolves to $(basename "$real"), expected libkjit.so.0.<minor>.<patch>" ;;
esac
[ -L "$lib/libkjit.so.0" ] || fail "$lib/libkjit.so.0 is not a symlink"
[ -L "$lib/libkjit.so" ] && [ "$(readlink "$lib/libkjit.so")" = libkjit.so.0 ] ||
  fail "$lib/libkjit.so is not a symlink to libkjit.so.0"
[ "$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" = libkjit.so.0 ] ||
  fail "installed library's soname is not libkjit.so.0"
for h in "$root"/include/kjit/*.h; do
  cmp -s "$h" "$prefix/include/kjit/$(basename "$h")" || fail "include/kjit/$(basename "$h") not installed"
done
[ -f "$lib/pkgconfig/kjit.pc" ] || fail "no $lib/pkgconfig/kjit.pc"
for f in kjitConfig.cmake kjitConfigVersion.cmake kjitTargets.cmake; do
  [ -f "$lib/cmake/kjit/$f" ] || fail "no $lib/cmake/kjit/$f"
done
[ -x "$prefix/bin/kjit" ] || fail "no $prefix/bin/kjit"
[ -f "$prefix/share/man/man1/kjit.1" ] || fail "no man page at share/man/man1/kjit.1"
if [ -x "$prefix/bin/kjit" ] && [ -f "$prefix/share/man/man1/kjit.1" ]; then
  version=$("$prefix/bin/kjit" --version | cut -d' ' -f2)
  grep -q "^\.TH KJIT 1 .*\"kjit $version\"" "$prefix/share/man/man1/kjit.1" ||
    fail "the installed man page does not name version $version"
fi
if [ -n "$(find "$prefix" -path '*/share/man/man1/kjit.1')" ] && command -v man >/dev/null; then
  MANPATH=$prefix/share/man man -w kjit >/dev/null 2>&1 || fail "man cannot find kjit(1) under the prefix"
fi

# The installed tool runs without LD_LIBRARY_PATH and uses the installed library.
if [ -x "$prefix/bin/kjit" ]; then
  "$prefix/bin/kjit" --cache-dir "$work/tool-cache" info --json >"$work/info.json" ||
    fail "installed kjit info failed"
  python3 - "$work/info.json" "$real" <<'PY' || fail "installed kjit does not use the installed library"
import json, os, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if os.path.realpath(j["library"]["path"]) == sys.argv[2] else 1)
PY
fi

# pkg-config gives paths inside the prefix.
export PKG_CONFIG_PATH=$lib/pkgconfig
cflags=$(pkg-config --cflags kjit) || fail "pkg-config --cflags kjit failed"
libs=$(pkg-config --libs kjit) || fail "pkg-config --libs kjit failed"
# (kjit.pc may locate the prefix relative to itself: compare real paths.)
inc_dir=$(printf '%s\n' $cflags | sed -n 's/^-I//p' | head -1)
lib_dir=$(printf '%s\n' $libs | sed -n 's/^-L//p' | head -1)
[ -n "$inc_dir" ] && [ "$(readlink -f "$inc_dir")" = "$(readlink -f "$prefix/include")" ] ||
  fail "pkg-config --cflags kjit is '$cflags', not the prefix's include directory"
[ -n "$lib_dir" ] && [ "$(readlink -f "$lib_dir")" = "$(readlink -f "$lib")" ] ||
  fail "pkg-config --libs kjit is '$libs', not the prefix's library directory"
printf '%s\n' $libs | grep -qx -- -lkjit || fail "pkg-config --libs kjit lacks -lkjit"

# ---- the examples ---------------------------------------------------------------------
# run_example NAME CMD... : two runs on a fresh cache; checks miss, then disk hit.
run_example() {
  local name=$1 cache=$work/cache-$1 i
  shift
  for i in 1 2; do
    if ! KJIT_CACHE_DIR=$cache LD_LIBRARY_PATH=$lib "$@" >"$work/$name.$i.txt" 2>&1; then
      fail "example $name (run $i) failed:"
      sed 's/^/  | /' "$work/$name.$i.txt" >&2
      return
    fi
  done
  grep -q '^compile 1: miss (compiled by NVRTC)' "$work/$name.1.txt" || fail "$name: first run was not a miss"
  grep -q '^compile 2: hit (memory)' "$work/$name.1.txt" || fail "$name: second compile was not a memory hit"
  grep -q '^compile 1: hit (disk)' "$work/$name.2.txt" || fail "$name: second run was not a disk hit"
  grep -Eq '^(GPU part skipped: |launch: .*results ok)' "$work/$name.2.txt" ||
    fail "$name: GPU part neither ran correctly nor skipped"
  grep -q "^cache: $cache\$" "$work/$name.2.txt" || fail "$name: did not use KJIT_CACHE_DIR"
  echo "--- $name (second run)"
  cat "$work/$name.2.txt"
}

# 1. pkg-config + Makefile
mkdir -p "$work/c-pkgconfig"
if make -s -C "$root/examples/c-pkgconfig" BUILD_DIR="$work/c-pkgconfig" >"$work/make1.log" 2>&1; then
  LD_LIBRARY_PATH=$lib ldd "$work/c-pkgconfig/saxpy" | grep -q "libkjit.so.0 => $lib/" ||
    fail "c-pkgconfig/saxpy does not load libkjit from the prefix"
  run_example c-pkgconfig "$work/c-pkgconfig/saxpy"
else
  fail "make examples/c-pkgconfig failed"; cat "$work/make1.log" >&2
fi

# 2. CMake find_package(kjit)
if cmake -S "$root/examples/cmake-consumer" -B "$work/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake-consumer" >>"$work/cmake.log" 2>&1; then
  grep -q "^kjit_DIR:PATH=$lib/cmake/kjit\$" "$work/cmake-consumer/CMakeCache.txt" ||
    fail "the CMake consumer found kjit elsewhere: $(grep '^kjit_DIR' "$work/cmake-consumer/CMakeCache.txt")"
  run_example cmake-consumer "$work/cmake-consumer/scale"
else
  fail "building examples/cmake-consumer failed"; cat "$work/cmake.log" >&2
fi

# 3. dlopen("libkjit.so.0") + dlsym: headers from the prefix, no link against libkjit.
mkdir -p "$work/dlopen"
if make -s -C "$root/examples/dlopen" BUILD_DIR="$work/dlopen" >"$work/make3.log" 2>&1; then
  if readelf -d "$work/dlopen/kjit-dlopen" | grep -q 'libkjit'; then
    fail "examples/dlopen links against libkjit"
  fi
  run_example dlopen "$work/dlopen/kjit-dlopen"
  # An explicit path works without LD_LIBRARY_PATH.
  KJIT_CACHE_DIR=$work/cache-dlopen "$work/dlopen/kjit-dlopen" "$lib/libkjit.so.0" >"$work/dlopen.3.txt" 2>&1 ||
    fail "kjit-dlopen with an explicit library path failed"
  grep -q '^compile 1: hit (disk)' "$work/dlopen.3.txt" || fail "kjit-dlopen with a path: not a disk hit"
else
  fail "make examples/dlopen failed"; cat "$work/make3.log" >&2
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "install test passed: $prefix"
