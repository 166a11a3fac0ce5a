#!/usr/bin/env bash
# Runs the language binding tests against a built kjit tree.
#
#   bindings/test_bindings.sh <part> [build-dir]
#
# part: rust | go | julia-check | python | crosslang | all
# build-dir: the CMake build directory (default: $KJIT_BUILD_DIR, else ./build).
#
# The built tree is installed into <build-dir>/bindings-test/prefix with
# `cmake --install`, and every language finds it the way a user would: through
# PKG_CONFIG_PATH (cargo's build.rs, cgo, the C program) and LD_LIBRARY_PATH (at run time).
# Exit status: 0 passed, 77 skipped (a toolchain is missing: the message says which),
# anything else failed.
set -euo pipefail

SKIP=77
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")
part=${1:-}
build=${2:-${KJIT_BUILD_DIR:-$src/build}}

die() { echo "test_bindings: $*" >&2; exit 1; }
# rustup installs cargo under ~/.cargo/bin, which a non-login shell may not have on PATH.
if ! command -v cargo >/dev/null && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
  PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
skip() { echo "SKIPPED ($part): $*"; exit "$SKIP"; }

case "$part" in
  rust|go|julia-check|python|crosslang|all) ;;
  *) echo "usage: $0 <rust|go|julia-check|python|crosslang|all> [build-dir]" >&2; exit 2 ;;
esac
[ -d "$build" ] || die "build directory $build does not exist (configure and build kjit first)"
build=$(cd "$build" && pwd)
base="$build/bindings-test"
mkdir -p "$base"
prefix="$base/prefix"
libbuild=${KJIT_LIB_BUILD_DIR:-$build}
[ -e "$libbuild/libkjit.so" ] || die "no libkjit.so in $libbuild: build the kjit target first"

# ---- install (once per library build; parts may run in parallel under ctest -j) ---------
install_prefix() {
  exec 9>"$base/install.lock"
  flock 9
  local stamp="$prefix/.installed-from"
  local lib_real
  lib_real=$(readlink -f "$libbuild/libkjit.so")
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lib_real" ] || [ "$lib_real" -nt "$stamp" ]; then
    rm -rf "$prefix"
    if ! cmake --install "$build" --prefix "$prefix" >"$base/install.log" 2>&1; then
      # A partial build (only the kjit target) cannot be installed whole: install the
      # library, its headers and kjit.pc the same way the install rules lay them out.
      echo "note: 'cmake --install' failed (see $base/install.log); installing libkjit only"
      rm -rf "$prefix"
      mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
      cp -P "$libbuild"/libkjit.so* "$prefix/lib/"
      cp -r "$src/include/kjit" "$prefix/include/"
      cp "$build/kjit.pc" "$prefix/lib/pkgconfig/"
    fi
    local pc
    pc=$(find "$prefix" -path '*/pkgconfig/kjit.pc' | head -n1)
    [ -n "$pc" ] || die "kjit.pc was not installed under $prefix"
    # kjit.pc carries the prefix chosen at configure time; point it at this prefix.
    sed -i "s|^prefix=.*|prefix=$prefix|" "$pc"
    echo "$lib_real" >"$stamp"
  fi
  flock -u 9
  exec 9>&-
  local pc
  pc=$(find "$prefix" -path '*/pkgconfig/kjit.pc' | head -n1)
  export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  command -v pkg-config >/dev/null || die "pkg-config is required (Debian: pkg-config)"
  libdir=$(pkg-config --variable=libdir kjit)
  includedir=$(pkg-config --variable=includedir kjit)
  [ -e "$libdir/libkjit.so.0" ] || die "pkg-config says libdir=$libdir but libkjit.so.0 is not there"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  unset KJIT_LIB_DIR
  # Tests that open the default cache location must not touch the user's cache.
  export KJIT_CACHE_DIR="$base/default-cache-$part"
  export CARGO_TARGET_DIR="$base/cargo-target"
  export GOCACHE="$base/go-cache" GOPATH="$base/gopath" GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=1
}

run_rust() {
  command -v cargo >/dev/null || skip "cargo not found (install Rust to run the Rust binding tests)"
  echo "== Rust: cargo test --offline (kjit, kjit-sys) =="
  (cd "$src/bindings/rust" && cargo test --offline --workspace --all-targets -- --nocapture)
  (cd "$src/bindings/rust" && cargo test --offline --doc)
}

run_go() {
  command -v go >/dev/null || skip "go not found (Debian: golang-go)"
  echo "== Go: go vet ./... && go test ./... =="
  (cd "$src/bindings/go" && go vet ./... && go test -count=1 -v ./...)
}

run_julia_check() {
  command -v node >/dev/null || skip "node not found (Debian: nodejs npm)"
  command -v npm >/dev/null || skip "npm not found (Debian: npm)"
  command -v nm >/dev/null || die "nm is required (Debian: binutils)"
  local dir="$src/tools/julia_check"
  if [ ! -d "$dir/node_modules/tree-sitter-julia" ] || [ ! -d "$dir/node_modules/tree-sitter" ]; then
    echo "== npm ci (tree-sitter, tree-sitter-julia) =="
    local extra=()
    [ -f /usr/include/node/node_api.h ] && extra=(--nodedir=/usr)
    (cd "$dir" && npm ci --legacy-peer-deps --no-audit --no-fund "${extra[@]}")
  fi
  echo "== Julia static checks =="
  node "$dir/check.js" --headers "$includedir/kjit" --lib "$libdir/libkjit.so" \
    --src "$src/bindings/julia"
}

# The Python interpreter of the Python part and leg: $KJIT_PYTHON, else Debian's
# /usr/bin/python3 (whose python3-numpy tools/deps.sh --test installs), else python3.
find_python() {
  if [ -n "${KJIT_PYTHON:-}" ]; then
    echo "$KJIT_PYTHON"
  elif [ -x /usr/bin/python3 ]; then
    echo /usr/bin/python3
  else
    command -v python3 || true
  fi
}

run_python() {
  local py
  py=$(find_python)
  [ -n "$py" ] || skip "python3 not found (Debian: python3)"
  local cc=${CC:-cc}
  local work="$base/python"
  rm -rf "$work"
  mkdir -p "$work"
  # The C side of the shared-cache test: the C leg of the cross-language scenario.
  # shellcheck disable=SC2046
  "$cc" -std=c99 -Wall -Wextra -Werror -o "$work/crosslang-c" "$src/tests/crosslang/crosslang.c" \
    $(pkg-config --cflags --libs kjit)
  export KJIT_LIBRARY="$libdir/libkjit.so.0" KJIT_CROSSLANG_C="$work/crosslang-c"
  export KJIT_INCLUDE_DIR="$includedir" PYTHONDONTWRITEBYTECODE=1
  if [ -x "$build/src/cli/kjit" ]; then export KJIT_CLI="$build/src/cli/kjit"; fi
  # The compiled launch path (kjit._fastlaunch) where the Python headers are (Debian:
  # python3-dev): built in a copy of the package, whose tests then require it. The launch
  # tests run through it and through ctypes either way.
  local pkg="$src/bindings/python" fast=0
  if "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' &&
    "$py" -c 'import setuptools' 2>/dev/null; then
    pkg="$work/pkg"
    cp -r "$src/bindings/python" "$pkg"
    echo "== Python: build kjit._fastlaunch (-Wall -Wextra -Werror) =="
    (cd "$pkg" && CFLAGS="-Wall -Wextra -Werror" "$py" setup.py -q build_ext --inplace 2>&1 |
      grep -v -e "_BetaConfiguration" -e "warnings.warn(msg" || true)
    fast=1
  else
    echo "note: no Python headers or setuptools for $py: kjit._fastlaunch is not built" \
      "(Debian: python3-dev); the tests run the ctypes path only"
  fi
  echo "== Python: unittest ($("$py" --version 2>&1), $KJIT_LIBRARY, fast path: $fast) =="
  (cd "$work" && KJIT_REQUIRE_FAST=$fast "$py" -m unittest discover -s "$pkg/tests" -v)
  echo "== Python: pip install (builds kjit._fastlaunch where it can) and import the copy =="
  if "$py" -m pip --version >/dev/null 2>&1 && "$py" -c 'import setuptools' 2>/dev/null; then
    # pip builds in the source directory: install from a copy to keep the checkout clean.
    cp -r "$src/bindings/python" "$work/pkg-src"
    "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
      --no-warn-script-location --target "$work/site" "$work/pkg-src" 2>&1 |
      grep -v "Running pip as the 'root' user" || true
    (cd "$work" && PYTHONPATH="$work/site" "$py" -c '
import os, sys, kjit
site, fast = sys.argv[1], sys.argv[2] == "1"
assert kjit.__file__.startswith(site), kjit.__file__
assert os.path.exists(os.path.join(site, "kjit", "py.typed"))
assert kjit.launch_path() == ("fast" if fast else "ctypes"), kjit.launch_path_reason()
print("installed kjit", kjit.__version__, "from", os.path.dirname(kjit.__file__),
      "library", kjit.version_string(), "at", kjit.library_path(),
      "launch path", kjit.launch_path())' "$work/site" "$fast")
  else
    echo "note: pip or setuptools missing for $py: install check skipped"
  fi
}

run_crosslang() {
  command -v cargo >/dev/null || skip "cargo not found (the scenario needs C, Rust and Go)"
  command -v go >/dev/null || skip "go not found (the scenario needs C, Rust and Go)"
  local cc=${CC:-cc}
  local work="$base/crosslang"
  rm -rf "$work"
  mkdir -p "$work"
  echo "== cross-language cache sharing: C, Rust, Go, Python =="
  # shellcheck disable=SC2046
  "$cc" -std=c99 -Wall -Wextra -Werror -o "$work/c" "$src/tests/crosslang/crosslang.c" \
    $(pkg-config --cflags --libs kjit)
  (cd "$src/bindings/rust" && cargo build --offline --example crosslang)
  (cd "$src/bindings/go" && go build -o "$work/go" ./examples/crosslang)
  local c="$work/c" rust="$CARGO_TARGET_DIR/debug/examples/crosslang" go="$work/go"
  local source="$src/tests/crosslang/saxpy.cu"
  local passed=0 failed=0
  local orders=("c rust go" "go c rust" "rust go c")
  local py python="$work/python"
  py=$(find_python)
  if [ -n "$py" ]; then
    printf '#!/bin/sh\nKJIT_LIBRARY=%s exec %s %s "$@"\n' "$libdir/libkjit.so.0" "$py" \
      "$src/bindings/python/examples/crosslang.py" >"$python"
    chmod +x "$python"
    orders=("c rust go python" "go python c rust" "python rust go c" "rust c python go")
  else
    echo "note: python3 not found: the scenario runs without the Python leg"
  fi
  # Each language compiles first once; the others must hit the disk tier and get the
  # same PTX bytes.
  for order in "${orders[@]}"; do
    local cache="$work/cache-${order// /-}"
    local first=1 ref=""
    for lang in $order; do
      local want=disk
      [ "$first" = 1 ] && want=compiled
      local exe=${!lang}
      if "$exe" "$cache" "$source" "$cache.$lang.ptx" "$want"; then
        if [ -z "$ref" ]; then
          ref="$cache.$lang.ptx"
          passed=$((passed + 1))
        elif cmp "$ref" "$cache.$lang.ptx"; then
          passed=$((passed + 1))
        else
          echo "FAIL: $lang PTX differs from $(basename "$ref")"
          failed=$((failed + 1))
        fi
      else
        echo "FAIL: $lang (expected tier $want) in order [$order]"
        failed=$((failed + 1))
      fi
      first=0
    done
  done
  echo "crosslang: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}

install_prefix
case "$part" in
  rust) run_rust ;;
  go) run_go ;;
  julia-check) run_julia_check ;;
  python) run_python ;;
  crosslang) run_crosslang ;;
  all)
    rc=0
    for p in rust go julia-check python crosslang; do
      "$0" "$p" "$build" || { r=$?; [ "$r" = "$SKIP" ] || rc=1; }
    done
    exit "$rc"
    ;;
esac
