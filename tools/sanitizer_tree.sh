#!/usr/bin/env bash
# Configures (once) one of the two clang sanitizer build trees that tools/sanitize.sh and
# tools/fuzz.sh share, at -O1 with line tables only (about four times faster to build than
# gcc at -O2 -g, which matters on CI's two cores; the library in unity batches, a fifth of
# its compile time again, and each room's test program (tests/<room>/) as one unit, a
# quarter of its compile time):
#
#   tools/sanitizer_tree.sh asan   build-asan: ASan + UBSan, with libFuzzer's coverage
#                                  instrumentation, so the same objects serve the CPU test
#                                  suites and the fuzz targets (KJIT_BUILD_FUZZ)
#   tools/sanitizer_tree.sh tsan   build-tsan: ThreadSanitizer
#
# Prints the tree's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  asan) dir=build-asan sanitizers="address;undefined;fuzzer-no-link" extra=(-DKJIT_BUILD_FUZZ=ON) ;;
  tsan) dir=build-tsan sanitizers="thread" extra=() ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "error: $tool is needed (tools/deps.sh --test installs it)" >&2; exit 1; }
done
cached=$(sed -n 's/^KJIT_SANITIZE:STRING=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
unity=$(sed -n 's/^KJIT_UNITY_BUILD:BOOL=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
if [[ ! -f $dir/build.ninja || $cached != "$sanitizers" || $unity != ON ]]; then
  rm -rf "$dir"
  # --as-needed (Debian's gcc passes it, clang does not): the CUDA driver stub that
  # CUDA::nvrtc brings along would otherwise become a dependency (no driver in CI).
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None \
    "-DCMAKE_C_FLAGS=-O1 -gline-tables-only" "-DCMAKE_CXX_FLAGS=-O1 -gline-tables-only" \
    -DKJIT_SANITIZE="$sanitizers" -DKJIT_BUILD_BENCH=OFF -DKJIT_BUILD_CLI=OFF -DKJIT_UNITY_BUILD=ON \
    "${extra[@]}" -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed >/dev/null
fi
echo "$dir"
