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

# pkg-config gives the prefix's own paths, written plainly (no "..", no "//").
export PKG_CONFIG_PATH=$lib/pkgconfig
cflags=$(pkg-config --cflags kjit) || fail "pkg-config --cflags kjit failed"
libs=$(pkg-config --libs kjit) || fail "pkg-config --libs kjit failed"
[ "$(echo $cflags)" = "-I$prefix/include" ] ||
  fail "pkg-config --cflags kjit is '$cflags', not -I$prefix/include"
[ "$(echo $libs)" = "-L$lib -lkjit" ] || fail "pkg-config --libs kjit is '$libs', not -L$lib -lkjit"
[ "$(pkg-config --variable=libdir kjit)" = "$lib" ] ||
  fail "pkg-config --variable=libdir kjit is '$(pkg-config --variable=libdir kjit)', not $lib"
# A tree moved after installing: pkg-config --define-prefix finds it where it is now.
mkdir -p "$work/moved"
cp -a "$prefix" "$work/moved/prefix"
moved_libdir=$(PKG_CONFIG_PATH=$work/moved/prefix/${lib#"$prefix"/}/pkgconfig \
  pkg-config --define-prefix --variable=libdir kjit) || fail "pkg-config --define-prefix failed"
[ "$moved_libdir" = "$work/moved/prefix/${lib#"$prefix"/}" ] ||
  fail "pkg-config --define-prefix gives libdir '$moved_libdir' for the moved tree"
rm -rf "$work/moved"

# As README says: built with the pkg-config flags alone, a program does not start when
# kjit is outside the dynamic linker's path; with -Wl,-rpath,<libdir> it does.
printf '#include <kjit/kjit.h>\n#include <stdio.h>\nint main(void) { printf("%%s\\n", kjit_version_string()); return 0; }\n' \
  >"$work/version.c"
if cc -o "$work/no-rpath" "$work/version.c" $cflags $libs 2>"$work/cc-rpath.log" &&
   cc -o "$work/rpath" "$work/version.c" $cflags $libs \
     -Wl,-rpath,"$(pkg-config --variable=libdir kjit)" 2>>"$work/cc-rpath.log"; then
  if "$work/no-rpath" >/dev/null 2>"$work/no-rpath.log"; then
    echo "note: $prefix is on the dynamic linker's path here; the failure without rpath is not shown"
  else
    grep -q "libkjit.so.0" "$work/no-rpath.log" ||
      fail "without rpath the program failed for another reason: $(cat "$work/no-rpath.log")"
  fi
  [ "$("$work/rpath" 2>&1)" = "$("$prefix/bin/kjit" --version 2>/dev/null | cut -d' ' -f2)" ] ||
    fail "a program linked with -Wl,-rpath,\$(pkg-config --variable=libdir kjit) does not start: $("$work/rpath" 2>&1)"
else
  fail "cc with the pkg-config flags failed: $(cat "$work/cc-rpath.log")"
fi

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

# 1. pkg-config + Makefile (which adds -Wl,-rpath: the program finds libkjit by itself)
mkdir -p "$work/c-pkgconfig"
if make -s -C "$root/examples/c-pkgconfig" BUILD_DIR="$work/c-pkgconfig" >"$work/make1.log" 2>&1; then
  LD_LIBRARY_PATH=$lib ldd "$work/c-pkgconfig/saxpy" | grep -q "libkjit.so.0 => $lib/" ||
    fail "c-pkgconfig/saxpy does not load libkjit from the prefix"
  ldd "$work/c-pkgconfig/saxpy" | grep -q "libkjit.so.0 => $lib/" ||
    fail "c-pkgconfig/saxpy does not find libkjit without LD_LIBRARY_PATH (no rpath?)"
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

# 4. The tutorial (docs/tutorial.md): a CMake project that builds CUDA code of its own with
#    nvcc (find_package(CUDAToolkit)) and links kjit::kjit. Needs nvcc.
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "--- tutorial: skipped (no nvcc to build its CUDA target)"
elif cmake -S "$root/examples/tutorial" -B "$work/tutorial" -DCMAKE_PREFIX_PATH="$prefix" \
       -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
       -DCMAKE_BUILD_TYPE=Release >"$work/tutorial.log" 2>&1 &&
     cmake --build "$work/tutorial" >>"$work/tutorial.log" 2>&1; then
  grep -q "^kjit_DIR:PATH=$lib/cmake/kjit\$" "$work/tutorial/CMakeCache.txt" ||
    fail "the tutorial found kjit elsewhere: $(grep '^kjit_DIR' "$work/tutorial/CMakeCache.txt")"
  # CMake records the imported library's directory: no LD_LIBRARY_PATH needed.
  for i in 1 2; do
    KJIT_CACHE_DIR=$work/cache-tutorial "$work/tutorial/tutorial" >"$work/tutorial.$i.txt" 2>&1 ||
      { fail "tutorial (run $i) failed:"; sed 's/^/  | /' "$work/tutorial.$i.txt" >&2; }
  done
  t1=$work/tutorial.1.txt t2=$work/tutorial.2.txt
  grep -q '^step 1: scale for .*: compiled (miss)' "$t1" || fail "tutorial: first run did not compile"
  grep -q '^step 1: scale for .*: hit (disk)' "$t2" || fail "tutorial: second run was not a disk hit"
  grep -q '^  scale<float> -> _Z' "$t2" || fail "tutorial: no lowered name for scale<float>"
  grep -q '^  same input: hit (memory)' "$t1" || fail "tutorial: the same input was not a memory hit"
  grep -q '^  tile.h edited: compiled (miss)' "$t1" || fail "tutorial: editing tile.h did not compile again"
  grep -q "^kjit: error: name expression 'scale<float>' names nothing in 'kernel.cu'" "$t1" ||
    fail "tutorial: the misplaced name expression was not reported"
  grep -q '^  saxpy with its own options: ' "$t1" || fail "tutorial: saxpy with its own options failed"
  grep -Eq '^(GPU steps skipped: |step 4: gemm .*results ok)' "$t2" ||
    fail "tutorial: GPU steps neither ran correctly nor skipped"
  ! grep -q 'WRONG RESULTS' "$t1" "$t2" || fail "tutorial: wrong results"
  echo "--- tutorial (second run)"
  cat "$t2"
else
  fail "building examples/tutorial failed"; cat "$work/tutorial.log" >&2
fi

# 5. The tutorial's pkg-config route (docs/tutorial.md, section 7): its sh block, run as it
#    is written in a copy of examples/tutorial, with the toolkit of the nvcc found above.
if [ -n "$nvcc" ]; then
  mkdir -p "$work/tutorial-pc"
  cp "$root"/examples/tutorial/* "$work/tutorial-pc/"
  awk '/^## 7\./ { s = 1 } s && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' \
    "$root/docs/tutorial.md" >"$work/tutorial-pc/build.sh"
  # The toolkit of that nvcc: the first of its real directory (a PATH entry may be a link
  # into the toolkit), the one whose headers CMake found for the tutorial above, and the TOP
  # that nvcc itself reports, that holds cuda_runtime_api.h.
  cmake_inc=$(sed -n 's/^FIND_PACKAGE_MESSAGE_DETAILS_CUDAToolkit:INTERNAL=\[\([^]]*\)\].*/\1/p' \
    "$work/tutorial/CMakeCache.txt" 2>/dev/null | head -n 1)
  nvcc_top=$("$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
  cuda=
  for c in "$(dirname "$(dirname "$(readlink -f "$nvcc")")")" "${cmake_inc:+$(dirname "$cmake_inc")}" \
           "${nvcc_top:+$(readlink -f "$nvcc_top")}"; do
    if [ -n "$c" ] && [ -f "$c/include/cuda_runtime_api.h" ]; then cuda=$c; break; fi
  done
  [ -n "$cuda" ] || cuda=$(dirname "$(dirname "$nvcc")")
  echo "--- tutorial (pkg-config route): nvcc $nvcc, CUDA=$cuda"
  sed -i "s|^CUDA=[^ ]*|CUDA=$cuda|" "$work/tutorial-pc/build.sh"
  if grep -q "^CUDA=$cuda " "$work/tutorial-pc/build.sh" &&
     (cd "$work/tutorial-pc" && PKG_CONFIG_PATH=$lib/pkgconfig KJIT_CACHE_DIR=$work/cache-tutorial-pc \
        bash -eu build.sh >"$work/tutorial-pc.txt" 2>&1); then
    grep -q '^step 1: scale for .*: compiled (miss)' "$work/tutorial-pc.txt" ||
      fail "tutorial (pkg-config route): the program did not compile its kernel"
    echo "--- tutorial (pkg-config route): built and ran"
  else
    fail "the tutorial's pkg-config route failed:"; sed 's/^/  | /' "$work/tutorial-pc.txt" >&2
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "install test passed: $prefix"
