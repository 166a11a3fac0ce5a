#!/usr/bin/env bash
# Build kjit (Release, with tests and benchmarks) and assemble a self-contained folder,
# bundle/, that runs on a GPU host that has the CUDA driver and toolkit runtime but no
# build tools, SQLite headers or cJSON:
#
#   bundle/bin/      test_* and bench_* programs, libkjit.so*
#   bundle/lib/      the non-system shared libraries they need (cJSON, SQLite, OpenSSL...)
#   bundle/bench/    cupy_bench.py, python_bench.py, torch_gemm.py, torch_multi_gpu.py
#   bundle/python/   the Python binding (package, tests, examples), and python/lib/ with
#                    libkjit.so* and its own non-system dependencies
#   bundle/run_python.sh  runs the Python tests (GPU ones included) and python_bench.py
#                    with the host's python3 (PyTorch, CuPy, cuda.core when installed)
#   bundle/run_gpu.sh  sets LD_LIBRARY_PATH, runs the GPU tests (two-GPU tests included;
#                      they skip with the reason on one GPU), the benchmarks and, when
#                      tools/bundle_bindings.sh added them, the Rust and Go binding tests;
#                      prints a short table last
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
# The compile worker, where the library and the test programs look for it (relative to
# their own directory: ../libexec/kjit/) and where run_gpu.sh points $KJIT_WORKER.
mkdir -p "$out/libexec/kjit"
cp "$build/libexec/kjit/kjit-worker" "$out/libexec/kjit/"
cp "$root"/bench/*.py "$out/bench/"
# The Python binding is pure Python: copied as it is, run by the GPU host's python3.
mkdir -p "$out/python/lib"
(cd "$root/bindings/python" &&
  tar --exclude=__pycache__ --exclude='*.egg-info' --exclude=./build -cf - .) |
  tar -C "$out/python" -xf -
for f in "$build"/libkjit.so*; do cp -P "$f" "$out/python/lib/"; done
mkdir -p "$out/python/libexec/kjit"
cp "$build/libexec/kjit/kjit-worker" "$out/python/libexec/kjit/"

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

# libkjit's own dependencies beside the Python copy of it: python3 gets only these on its
# LD_LIBRARY_PATH, not everything the test programs need (PyTorch and CuPy load their own).
while read -r name path; do
  [ -n "$path" ] && [ -f "$path" ] || continue
  if is_system "$path"; then continue; fi
  if [ ! -e "$out/python/lib/$name" ]; then cp -L "$path" "$out/python/lib/$name"; fi
done < <(ldd "$build/libkjit.so.0" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')

cat > "$out/run_python.sh" <<'EOF'
#!/usr/bin/env bash
# Run the Python binding's tests (the GPU ones included) and bench/python_bench.py with
# this host's python3 ($PYTHON to pick another), which brings PyTorch, CuPy and cuda.core
# when they are installed (their tests and columns are skipped, with the reason, if not).
#   RESULTS_DIR  where logs go (default: ./results next to this script, or $OUT)
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
results=${RESULTS_DIR:-${OUT:-$here/results}}
mkdir -p "$results"
export LD_LIBRARY_PATH="$here/python/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KJIT_LIBRARY="$here/python/lib/libkjit.so.0"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export KJIT_CACHE_DIR="$cache"  # the tests never touch the user's cache
rc=0
echo "== python tests ($("$py" --version 2>&1))"
"$py" -m unittest discover -s "$here/python/tests" -v > "$results/python_tests.log" 2>&1 || rc=1
grep -E " \.\.\. (FAIL|ERROR|skipped)" "$results/python_tests.log" | head -60
tail -n 3 "$results/python_tests.log"
echo "== python_bench.py"
"$py" "$here/bench/python_bench.py" --out "$results/python_bench.json" \
  > "$results/python_bench.md" 2> "$results/python_bench.err" || rc=1
cat "$results/python_bench.md"
tail -n 20 "$results/python_bench.err"
exit $rc
EOF
chmod +x "$out/run_python.sh"

cat > "$out/run_gpu.sh" <<'EOF'
#!/usr/bin/env bash
# Run the GPU tests and benchmarks of this bundle, then the binding tests when present.
# Prints a short table last. Meant to fit one 10-minute run on a two-GPU host; each
# program has its own time limit.
#   KJIT_GPU_TESTS   test programs to run, each "program" or "program:gtest filter"
#                    (default: every bin/test_*_gpu, then test_kernel_cpu, test_link and
#                    test_key's built-in standard library tests on the GPU)
#   KJIT_BENCHES     benchmark programs (default: bench_launch bench_multi_gpu bench_link)
#   KJIT_BINDINGS    0 skips run_bindings.sh (default: run it when present)
#   RESULTS_DIR      where logs go (default: ./results next to this script; with $OUT set,
#                    a temporary folder packed into $OUT/kjit-results.tar.gz at the end)
set -u
here=$(cd "$(dirname "$0")" && pwd)
orig_ld=${LD_LIBRARY_PATH:-}
bundle_ld="$here/lib:$here/bin:/usr/local/cuda/lib64${orig_ld:+:$orig_ld}"
pack=""
if [ -n "${RESULTS_DIR:-}" ]; then
  results=$RESULTS_DIR
elif [ -n "${OUT:-}" ]; then
  results=$(mktemp -d "${TMPDIR:-/tmp}/kjit-results-XXXXXX")
  pack="$OUT/kjit-results.tar.gz"
else
  results=$here/results
fi
mkdir -p "$results"
export TMPDIR=${TMPDIR:-/tmp}
export KJIT_WORKER=${KJIT_WORKER:-$here/libexec/kjit/kjit-worker}
# A hung program must not take the whole run with it.
limit() {
  local seconds=$1
  shift
  if command -v timeout > /dev/null; then timeout -k 10 "$seconds" "$@"; else "$@"; fi
}

echo "== host"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>&1 | head -8
nvidia-smi topo -m 2>/dev/null | head -6
date -u '+%Y-%m-%d %H:%M UTC'

tests=${KJIT_GPU_TESTS:-}
if [ -z "$tests" ]; then
  for t in "$here"/bin/test_*_gpu; do tests="$tests $(basename "$t")"; done
  for t in test_kernel_cpu test_link "test_key:BuiltinStdGpu.*"; do
    [ -x "$here/bin/${t%%:*}" ] && tests="$tests $t"
  done
fi
summary=""
overall=0
for spec in $tests; do
  t=${spec%%:*}
  filter=("--gtest_filter=*")
  [ "$spec" = "$t" ] || filter=("--gtest_filter=${spec#*:}")
  [ -x "$here/bin/$t" ] || { summary+="| $t | missing | | | |"$'\n'; overall=1; continue; }
  echo "== $spec (at ${SECONDS} s)"
  LD_LIBRARY_PATH="$bundle_ld" limit 240 "$here/bin/$t" "${filter[@]}" \
    --gtest_output="xml:$results/$t.xml" > "$results/$t.log" 2>&1
  rc=$?
  grep -E '^\[  (FAILED|SKIPPED) |^\[==========\]|^\[  PASSED  \]|Failure|error:|^note:' \
    "$results/$t.log" | head -60
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$results/$t.log" | grep -oE '[0-9]+$' || true)
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$results/$t.log" | grep -oE '[0-9]+' || true)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$results/$t.log" | grep -oE '[0-9]+' || true)
  summary+="| $t | rc $rc | ${passed:-0} | ${failed:-0} | ${skipped:-0} |"$'\n'
  [ $rc -eq 0 ] || overall=1
done

benches=${KJIT_BENCHES:-bench_launch bench_multi_gpu bench_link}
bench_tables=""
for b in $benches; do
  [ -x "$here/bin/$b" ] || continue
  extra=()
  if [ "$b" = bench_launch ] && [ -f "$here/bench/cupy_bench.py" ]; then
    echo "== cupy_bench.py"
    LD_LIBRARY_PATH="$orig_ld" limit 180 python3 "$here/bench/cupy_bench.py" \
      --out "$results/cupy.json" > "$results/cupy.log" 2>&1
    tail -8 "$results/cupy.log"
    [ -s "$results/cupy.json" ] && extra=(--cupy "$results/cupy.json")
  fi
  if [ "$b" = bench_gemm ] && [ -f "$here/bench/torch_gemm.py" ]; then
    extra=(--torch "$here/bench/torch_gemm.py")
  fi
  if [ "$b" = bench_multi_gpu ] && [ -f "$here/bench/torch_multi_gpu.py" ]; then
    extra=(--torch "$here/bench/torch_multi_gpu.py")
  fi
  echo "== $b (at ${SECONDS} s)"
  # Python children (torch) get the caller's library path, not the bundle's.
  KJIT_PYTHON_LD_LIBRARY_PATH="$orig_ld" LD_LIBRARY_PATH="$bundle_ld" \
    limit 240 "$here/bin/$b" "${extra[@]}" > "$results/$b.md" 2> "$results/$b.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    overall=1
    tail -20 "$results/$b.err"
    printf '\n%s exited with %d (see %s)\n' "$b" "$rc" "$results/$b.err" >> "$results/$b.md"
  fi
  bench_tables+="$(cat "$results/$b.md")"$'\n'
done

if [ "${KJIT_BINDINGS:-1}" != 0 ] && [ -x "$here/run_bindings.sh" ]; then
  echo "== bindings (run_bindings.sh, at ${SECONDS} s)"
  RESULTS_DIR="$results" LD_LIBRARY_PATH="$orig_ld" limit 300 "$here/run_bindings.sh" \
    > "$results/bindings.log" 2>&1
  rc=$?
  tail -40 "$results/bindings.log"
  [ -f "$results/bindings.rows" ] && summary+="$(cat "$results/bindings.rows")"$'\n'
  summary+="| run_bindings.sh | rc $rc | | | |"$'\n'
  [ $rc -eq 0 ] || overall=1
fi

[ -n "$pack" ] && tar -C "$results" -czf "$pack" . 2> /dev/null

echo
echo "== summary (${SECONDS} s; logs in ${pack:-$results})"
echo "| program | exit | passed | failed | skipped |"
echo "| --- | --- | ---: | ---: | ---: |"
printf '%s' "$summary"
printf '%s\n' "$bench_tables"
exit $overall
EOF
chmod +x "$out/run_gpu.sh"

echo "bundle ready: $out ($(du -sh "$out" | cut -f1))"
ls -la "$out/bin" "$out/lib"
