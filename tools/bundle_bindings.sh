#!/usr/bin/env bash
# Adds the Rust and Go GPU test binaries and launch-overhead programs to bundle/bindings/
# (after tools/make_bundle.sh), with bundle/run_bindings.sh to run them on a GPU host.
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
    print(m["executable"])' | while read -r exe; do cp "$exe" "$out/rust_test_$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done )

( cd "$root/bindings/go"
  export GOFLAGS=-mod=mod GOCACHE=${GOCACHE:-$build/go-cache} GOPATH=${GOPATH:-$build/go-path}
  go test -c -o "$out/go_kjit.test" .
  go build -o "$out/go_launch_overhead" ./examples/launchoverhead )

cat > "$root/bundle/run_bindings.sh" <<'EOS'
#!/usr/bin/env bash
# Runs the Rust and Go binding tests (GPU paths included) and their launch-overhead programs.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/bin:$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
for t in "$here"/bindings/rust_test_*; do
  echo "== $(basename "$t")"; "$t" --test-threads=1 2>&1 | grep -E "^test |test result|SKIPPED|panicked" | tail -40 || rc=1
  "$t" --test-threads=1 >/dev/null 2>&1 || rc=1
done
echo "== go_kjit.test"; "$here/bindings/go_kjit.test" -test.v 2>&1 | grep -E "^(--- |ok|FAIL|PASS)|SKIP" | tail -60
"$here/bindings/go_kjit.test" >/dev/null 2>&1 || rc=1
echo "== rust launch overhead"; "$here/bindings/rust_launch_overhead" 200000 || rc=1
echo "== go launch overhead"; "$here/bindings/go_launch_overhead" -n 200000 || rc=1
exit $rc
EOS
chmod +x "$root/bundle/run_bindings.sh"
ls -la "$out"
