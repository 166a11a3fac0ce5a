#!/usr/bin/env bash
# Adds the Rust and Go GPU test binaries (the two-device tests included) and
# launch-overhead programs to bundle/bindings/ (after tools/make_bundle.sh), with
# bundle/run_bindings.sh to run them on a GPU host; bundle/run_gpu.sh runs it too.
# It also runs bundle/run_python.sh (the Python binding's tests and benchmark) when there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KJIT_BUNDLE_BUILD_DIR:-$root/build-bundle}
out=$root/bundle/bindings
prefix=$build/bindings-prefix
rm -rf "$out" "$prefix"
mkdir -p "$out"
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then PATH=$HOME/.cargo/bin:$PATH; fi

( cd "$root/bindings/rust"
  cargo build --offline --release --example launch_overhead -q
  cp target/release/examples/launch_overhead "$out/rust_launch_overhead"
  cargo test --offline --release --no-run --message-format=json -q 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
  m=json.loads(l)
  if m.get("reason")=="compiler-artifact" and m.get("executable") and m["profile"]["test"]:
    print(m["executable"])' | while read -r exe; do
      # kjit-sys's layout test compares the headers with a C compiler's view of them: a
      # build-machine check, with no headers or compiler on the GPU host.
      case "$(basename "$exe")" in layout-*) continue ;; esac
      cp "$exe" "$out/rust_test_$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done )

( cd "$root/bindings/go"
  export GOFLAGS=-mod=mod GOCACHE=${GOCACHE:-$build/go-cache} GOPATH=${GOPATH:-$build/go-path}
  go test -c -o "$out/go_kjit.test" .
  go build -o "$out/go_launch_overhead" ./examples/launchoverhead )

cat > "$root/bundle/run_bindings.sh" <<'EOS'
#!/usr/bin/env bash
# Runs the Rust and Go binding tests (GPU paths included; the two-device tests skip with
# the reason on one GPU) and their launch-overhead programs. Logs go to $RESULTS_DIR
# (default: ./results next to this script); $RESULTS_DIR/bindings.rows gets summary table
# rows (run_gpu.sh prints them).
# Then the Python binding's tests and benchmark (run_python.sh).
here=$(cd "$(dirname "$0")" && pwd)
orig_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$here/bin:$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
results=${RESULTS_DIR:-$here/results}
mkdir -p "$results"
rows="$results/bindings.rows"
: > "$rows"
limit() { if command -v timeout > /dev/null; then timeout -k 10 180 "$@"; else "$@"; fi; }
count() { grep -cE -- "$1" "$2" || true; }
rc=0
for t in "$here"/bindings/rust_test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  log="$results/$name.log"
  echo "== $name"
  # --nocapture: a Rust test that skips says so on stderr, which libtest otherwise hides.
  limit "$t" --test-threads=1 --nocapture > "$log" 2>&1
  r=$?
  grep -E "^test |test result|SKIPPED|panicked" "$log" | tail -40
  passed=$(grep -oE '[0-9]+ passed' "$log" | awk '{ s += $1 } END { print s + 0 }')
  failed=$(grep -oE '[0-9]+ failed' "$log" | awk '{ s += $1 } END { print s + 0 }')
  skipped=$(count 'SKIPPED [a-z_0-9]+:' "$log")  # Rust tests that skip pass after saying so
  echo "| $name | rc $r | $((passed - skipped)) | $failed | $skipped |" >> "$rows"
  [ $r -eq 0 ] || rc=1
done
log="$results/go_kjit.test.log"
echo "== go_kjit.test"
limit "$here/bindings/go_kjit.test" -test.v > "$log" 2>&1
r=$?
grep -E "^(--- |ok|FAIL|PASS)|SKIP" "$log" | tail -60
echo "| go_kjit.test | rc $r | $(count '^--- PASS' "$log") | $(count '^--- FAIL' "$log") | $(count '^--- SKIP' "$log") |" >> "$rows"
[ $r -eq 0 ] || rc=1
# The two-device tests by name.
rust_log="$results/rust_test_multi_gpu.log"
if [ -f "$rust_log" ]; then
  if grep -q 'SKIPPED two_devices' "$rust_log"; then
    state="skipped:$(grep -m1 -o 'SKIPPED two_devices.*' "$rust_log" | cut -d: -f2-)"
  elif grep -q '^test result: ok. 1 passed' "$rust_log"; then
    state=passed
  else
    state=FAILED
  fi
  echo "| rust two_devices_compile_once_and_launch_on_both | $state | | | |" >> "$rows"
fi
state=$(grep -m1 -E '^ *--- (PASS|FAIL|SKIP): TestTwoDevicesCompileOnceLaunchOnBoth' "$log" |
        awk '{ print $2 }' | tr -d :)
why=$(grep -B1 -E '^ *--- SKIP: TestTwoDevicesCompileOnceLaunchOnBoth' "$log" | sed -n 1p |
      sed 's/^ *//')
echo "| go TestTwoDevicesCompileOnceLaunchOnBoth | ${state:-FAILED (not run)}${why:+: $why} | | | |" >> "$rows"
echo "== rust launch overhead"; limit "$here/bindings/rust_launch_overhead" 200000 || rc=1
echo "== go launch overhead"; limit "$here/bindings/go_launch_overhead" -n 200000 || rc=1
if [ -x "$here/run_python.sh" ]; then
  # The caller's library path: run_python.sh sets up its own for python3.
  LD_LIBRARY_PATH="$orig_ld" "$here/run_python.sh" || rc=1
fi
exit $rc
EOS
chmod +x "$root/bundle/run_bindings.sh"
ls -la "$out"
