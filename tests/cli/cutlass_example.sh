#!/usr/bin/env bash
# The CUTLASS example (examples/cutlass_gemm, docs/cutlass.md) without a GPU: its host library
# and program built with the toolkit's nvcc, its kernel compiled through kjit from the test
# data's CUTLASS 4.7, the kernel's parameter (read from the compiled code) checked against
# the host's sizeof/alignof(Params) by the program itself, and a second run in a new process a
# cache hit. On a machine with a GPU the program also launches the kernel and compares it
# with cuBLASLt. Skips (exit 0, with the reason) without nvcc or the test data.
# Usage: cutlass_example.sh PATH-TO-libkjit.so INCLUDE-DIR SOURCE-DIR
set -eu
lib=$1 inc=$2 root=$3
. "$(dirname "$0")/lib.sh" "$(dirname "$lib")/src/cli/kjit"
nvcc=${CUDA_NVCC:-/usr/local/cuda/bin/nvcc}
tgz=${KJIT_CUTLASS_TGZ:-$root/../shared/testdata/cutlass-4.7.tgz}
if [ ! -x "$nvcc" ]; then echo "skipped: no nvcc at $nvcc"; exit 0; fi
if [ ! -f "$tgz" ] && [ -z "${KJIT_CUTLASS_DIR:-}" ]; then echo "skipped: no CUTLASS test data ($tgz)"; exit 0; fi
cutlass=${KJIT_CUTLASS_DIR:-$TMP/cutlass}
if [ -z "${KJIT_CUTLASS_DIR:-}" ]; then mkdir -p "$cutlass" && tar -xzf "$tgz" -C "$cutlass" include; fi
ex=$root/examples/cutlass_gemm
"$nvcc" -std=c++17 -arch=sm_90a -O2 -shared -Xcompiler -fPIC -I"$ex" -I"$cutlass/include" \
  "$ex/gemm_host.cu" -o "$TMP/libgemm_host.so"
"$nvcc" -std=c++17 -arch=sm_90a -O2 -I"$ex" -I"$inc" -DEXAMPLE_DIR="\"$ex\"" \
  "$ex/main.cu" -o "$TMP/cutlass_gemm" -L"$TMP" -lgemm_host -L"$(dirname "$lib")" -lkjit \
  -Xlinker -rpath -Xlinker "$TMP:$(dirname "$lib")"
export KJIT_CACHE_DIR=$TMP/cache
expect_rc 0 "$TMP/cutlass_gemm" "$cutlass/include" || { finish; exit 1; }
expect_grep 'compile: miss (compiled)' "$TMP/out" "the first run"
expect_grep 'Params: host \([0-9]*\) bytes aligned to \([0-9]*\), kernel \1 aligned to \2' "$TMP/out" \
  "the parameter check"
expect_rc 0 "$TMP/cutlass_gemm" "$cutlass/include"
expect_grep 'compile: hit' "$TMP/out" "the run in a new process"
sed 's/^/  /' "$TMP/out"
finish
