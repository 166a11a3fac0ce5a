#!/usr/bin/env bash
# Runs the language binding tests against a built kjit tree.
#
#   bindings/test_bindings.sh <part> [build-dir]
#
# part: rust | go | julia-check | crosslang | all
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
  rust|go|julia-check|crosslang|all) ;;
  *) echo "usage: $0 <rust|go|julia-check|crosslang|all> [build-dir]" >&2; exit 2 ;;
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

run_crosslang() {
  command -v cargo >/dev/null || skip "cargo not found (the scenario needs C, Rust and Go)"
  command -v go >/dev/null || skip "go not found (the scenario needs C, Rust and Go)"
  local cc=${CC:-cc}
  local work="$base/crosslang"
  rm -rf "$work"
  mkdir -p "$work"
  echo "== cross-language cache sharing: C, Rust, Go =="
  # shellcheck disable=SC2046
  "$cc" -std=c99 -Wall -Wextra -Werror -o "$work/c" "$src/tests/crosslang/crosslang.c" \
    $(pkg-config --cflags --libs kjit)
  (cd "$src/bindings/rust" && cargo build --offline --example crosslang)
  (cd "$src/bindings/go" && go build -o "$work/go" ./examples/crosslang)
  local c="$work/c" rust="$CARGO_TARGET_DIR/debug/examples/crosslang" go="$work/go"
  local source="$src/tests/crosslang/saxpy.cu"
  local passed=0 failed=0
  # Each language compiles first once; the other two must hit the disk tier and get the
  # same PTX bytes.
  for order in "c rust go" "go c rust" "rust go c"; do
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
  crosslang) run_crosslang ;;
  all)
    rc=0
    for p in rust go julia-check crosslang; do
      "$0" "$p" "$build" || { r=$?; [ "$r" = "$SKIP" ] || rc=1; }
    done
    exit "$rc"
    ;;
esac
