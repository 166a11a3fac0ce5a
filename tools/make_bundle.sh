#!/usr/bin/env bash
# Build kjit (Release, with tests and benchmarks) and assemble a self-contained folder,
# bundle/, that runs on a GPU host that has the CUDA driver and toolkit runtime but no
# build tools, SQLite headers or cJSON:
#
#   bundle/bin/      test_* and bench_* programs, libkjit.so*
#   bundle/lib/      the non-system shared libraries they need (cJSON, SQLite, OpenSSL...)
#   bundle/bench/    cupy_bench.py
#   bundle/run_gpu.sh  sets LD_LIBRARY_PATH, runs the GPU tests and benchmarks, prints a
#                      short table last
#
# Usage: tools/make_bundle.sh [cmake targets...]   (default: everything)
# Environment: KJIT_BUNDLE_BUILD_DIR (default build-bundle), JOBS (default nproc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${KJIT_BUNDLE_BUILD_DIR:-$root/build-bundle}
out=$root/bundle
jobs=${JOBS:-$(nproc)}

generator=()
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DKJIT_BUILD_TESTS=ON -DKJIT_BUILD_BENCH=ON
else
  cmake "$build" > /dev/null
fi
if [ $# -gt 0 ]; then
  cmake --build "$build" -j"$jobs" --target "$@"
else
  cmake --build "$build" -j"$jobs"
fi

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/bench"

shopt -s nullglob
for f in "$build"/tests/test_* "$build"/bench/bench_* "$build"/src/cli/kjit; do
  if [ -f "$f" ] && [ -x "$f" ]; then cp "$f" "$out/bin/"; fi
done
for f in "$build"/libkjit.so*; do cp -P "$f" "$out/bin/"; done
cp "$root/bench/cupy_bench.py" "$out/bench/"

# Shared libraries that are not part of the base system or of the CUDA installation on
# the GPU host: glibc, the GCC runtime, the driver and the CUDA toolkit stay where they are.
is_system() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*|libcuda.so*|libnvrtc*|libcudart*|libcublas*) return 0 ;;
  esac
  case "$1" in
    /usr/local/cuda*) return 0 ;;
  esac
  return 1
}
for f in "$out"/bin/*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  while read -r name path; do
    [ -n "$path" ] && [ -f "$path" ] || continue
    if is_system "$path"; then continue; fi
    case "$path" in "$out"/*) continue ;; esac
    if [ ! -e "$out/lib/$name" ]; then cp -L "$path" "$out/lib/$name"; fi
  done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done

cat > "$out/run_gpu.sh" <<'EOF'
#!/usr/bin/env bash
# Run the GPU tests and benchmarks of this bundle. Prints a short table last.
#   KJIT_GPU_TESTS   test programs to run (default: every bin/test_*_gpu, then test_kernel_cpu)
#   KJIT_BENCHES     benchmark programs (default: bench_launch)
#   RESULTS_DIR      where logs go (default: ./results next to this script, or $OUT)
set -u
here=$(cd "$(dirname "$0")" && pwd)
orig_ld=${LD_LIBRARY_PATH:-}
bundle_ld="$here/lib:$here/bin:/usr/local/cuda/lib64${orig_ld:+:$orig_ld}"
results=${RESULTS_DIR:-${OUT:-$here/results}}
mkdir -p "$results"
export TMPDIR=${TMPDIR:-/tmp}

echo "== host"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
date -u '+%Y-%m-%d %H:%M UTC'

tests=${KJIT_GPU_TESTS:-}
if [ -z "$tests" ]; then
  for t in "$here"/bin/test_*_gpu; do tests="$tests $(basename "$t")"; done
  [ -x "$here/bin/test_kernel_cpu" ] && tests="$tests test_kernel_cpu"
fi
summary=""
overall=0
for t in $tests; do
  [ -x "$here/bin/$t" ] || { summary+="| $t | missing | | | |"$'\n'; overall=1; continue; }
  echo "== $t"
  LD_LIBRARY_PATH="$bundle_ld" "$here/bin/$t" --gtest_output="xml:$results/$t.xml" \
    > "$results/$t.log" 2>&1
  rc=$?
  grep -E '^\[  (FAILED|SKIPPED) |^\[==========\]|^\[  PASSED  \]|Failure|error:' \
    "$results/$t.log" | head -60
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$results/$t.log" | grep -oE '[0-9]+$' || true)
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$results/$t.log" | grep -oE '[0-9]+' || true)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$results/$t.log" | grep -oE '[0-9]+' || true)
  summary+="| $t | rc $rc | ${passed:-0} | ${failed:-0} | ${skipped:-0} |"$'\n'
  [ $rc -eq 0 ] || overall=1
done

benches=${KJIT_BENCHES:-bench_launch}
bench_tables=""
for b in $benches; do
  [ -x "$here/bin/$b" ] || continue
  extra=()
  if [ "$b" = bench_launch ] && [ -f "$here/bench/cupy_bench.py" ]; then
    echo "== cupy_bench.py"
    LD_LIBRARY_PATH="$orig_ld" python3 "$here/bench/cupy_bench.py" \
      --out "$results/cupy.json" > "$results/cupy.log" 2>&1
    tail -8 "$results/cupy.log"
    [ -s "$results/cupy.json" ] && extra=(--cupy "$results/cupy.json")
  fi
  echo "== $b"
  LD_LIBRARY_PATH="$bundle_ld" "$here/bin/$b" "${extra[@]}" > "$results/$b.md" \
    2> "$results/$b.err"
  rc=$?
  [ $rc -eq 0 ] || { overall=1; tail -20 "$results/$b.err"; }
  bench_tables+="$(cat "$results/$b.md")"$'\n'
done

echo
echo "== summary"
echo "| program | exit | passed | failed | skipped |"
echo "| --- | --- | ---: | ---: | ---: |"
printf '%s' "$summary"
printf '%s\n' "$bench_tables"
exit $overall
EOF
chmod +x "$out/run_gpu.sh"

echo "bundle ready: $out ($(du -sh "$out" | cut -f1))"
ls -la "$out/bin" "$out/lib"
