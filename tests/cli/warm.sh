#!/usr/bin/env bash
# kjit warm: a manifest with one failing kernel; the others are compiled and cached, the
# failure is listed, the exit status reports it; JSON, dry run, progress bar, bad manifests.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
M=$TMP/m
mkdir -p "$M/kernels/include"
write_saxpy "$M/kernels/saxpy.cu"
echo '#define FACTOR 2' >"$M/kernels/include/factor.h"
cat >"$M/kernels/scale.cu" <<'CU'
#include "factor.h"
template <typename T> __global__ void scale(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= T(FACTOR);
}
CU
cat >"$M/manifest.json" <<'JSON'
{
  "version": 1,
  "defaults": { "targets": ["sm_80", "sm_90"], "options": ["-std=c++17"] },
  "kernels": [
    { "name": "saxpy", "file": "kernels/saxpy.cu" },
    { "name": "scale", "file": "kernels/scale.cu", "include_paths": ["kernels/include"],
      "name_expressions": ["scale<float>", "scale<double>"], "defines": { "UNUSED": 1 } },
    { "name": "broken", "source": "__global__ void broken( { this is not C++ }", "targets": ["sm_90"] },
    { "name": "inline", "source": "extern \"C\" __global__ void k(int* p) { *p = TILE; }",
      "defines": ["TILE=64"], "headers": { "x.h": "// unused\n" }, "outputs": ["ptx"],
      "targets": "compute_90" }
  ]
}
JSON

# Not a terminal: one plain line per kernel, a summary, the failure with its log.
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/manifest.json" -j 2
expect_grep '^\[1/6\] ' "$TMP/out" "warm progress lines"
expect_grep '^\[6/6\] ' "$TMP/out" "warm progress lines"
expect_grep 'FAILED   broken (sm_90): compilation failed' "$TMP/out" "warm failure line"
expect_grep '^warmed 6 kernels in .*: 5 compiled, 0 already cached, 1 failed$' "$TMP/out" "warm summary"
expect_grep '^failures:$' "$TMP/out" "warm failure list"
expect_grep '^  broken (sm_90): compilation failed$' "$TMP/out" "warm failure list"
expect_grep 'error' "$TMP/out" "warm failure log"
[ "$(grep -c '^\[./6\] compiled ' "$TMP/out")" = 5 ] || fail "expected 5 'compiled' lines"
cp "$TMP/out" "$TMP/warm1.txt"

# The five good kernels are in the cache, and apart from them the dependency records of the
# two compiles of the program that includes a header (what NVRTC read for it,
# docs/cache-keys.md).
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["entries"] == 5 and j["targets"]["sm_80"]["entries"] == 2 and j["targets"]["sm_90"]["entries"] == 2 and j["targets"]["compute_90"]["entries"] == 1 and "manifest" not in j["targets"] and j["dependency_records"]["entries"] == 2'

# Warm again, as JSON: everything good is cached now; the failure is reported again.
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/manifest.json" -j 3 --json
json_check "$TMP/out" 'j["kernels"] == 6 and j["compiled"] == 0 and j["cached"] == 5 and j["failed"] == 1 and j["jobs"] == 3'
json_check "$TMP/out" '[r["name"] for r in j["results"] if not r["ok"]] == ["broken"]'
json_check "$TMP/out" 'all(r["tier"] in ("disk", "memory") and len(r["key"]) == 64 for r in j["results"] if r["ok"])'
json_check "$TMP/out" '[r for r in j["results"] if not r["ok"]][0]["status_name"] == "KJIT_ERROR_COMPILE" and "error" in [r for r in j["results"] if not r["ok"]][0]["log"]'

# The keys warm stored are the ones `kjit compile` computes for the same input: warm works
# in the manifest's directory, so the program name is the file's path as written there.
expect_rc 0 sh -c "cd \"$M\" && \"$KJIT\" --cache-dir \"$C\" compile kernels/saxpy.cu --arch sm_90 -o /dev/null --json -- -std=c++17"
json_check "$TMP/out" 'j["tier"] == "disk"'
cp "$TMP/out" "$TMP/compile.json"

# ... and do not depend on how the manifest is named or where warm starts; a relative
# --cache-dir is relative to where warm starts.
expect_rc 1 sh -c "cd \"$M/kernels\" && \"$KJIT\" --cache-dir ../../cache warm ../manifest.json --json"
json_check "$TMP/out" 'j["compiled"] == 0 and j["cached"] == 5 and j["failed"] == 1 and j["cache"] == "'"$M/kernels/../../cache"'"'
[ ! -e "$M/cache" ] && [ ! -e "$M/kernels/cache" ] || fail "warm created a cache relative to the manifest's directory"

# Dry run: keys and cached state, nothing compiled.
expect_rc 0 "$KJIT" --cache-dir "$C" cache rm "$(json_get "$TMP/compile.json" 'j["key"]')"
cat >"$M/good.json" <<'JSON'
[ { "name": "saxpy", "file": "kernels/saxpy.cu", "targets": ["sm_80", "sm_90"], "options": ["-std=c++17"] } ]
JSON
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$M/good.json" --dry-run
expect_grep '^[0-9a-f]\{64\}  cached  saxpy (sm_80)$' "$TMP/out" "warm --dry-run"
expect_grep '^[0-9a-f]\{64\}  missing saxpy (sm_90)$' "$TMP/out" "warm --dry-run"
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$M/good.json" --dry-run --json
json_check "$TMP/out" '[(r["target"], r["cached"]) for r in j["results"]] == [("sm_80", True), ("sm_90", False)]'
# A kernel that may read files has no key before it is compiled: listed as unknown, and
# nothing is compiled to learn it.
cat >"$M/reads.json" <<'JSON'
[ { "name": "inc", "source": "#include <x.h>\nextern \"C\" __global__ void k() {}\n", "targets": ["sm_90"] } ]
JSON
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
BEFORE=$(json_get "$TMP/out" 'j["totals"]["compiles"]')
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$M/reads.json" --dry-run
expect_grep '^- *unknown inc (sm_90): reads files' "$TMP/out" "warm --dry-run of a kernel that reads files"
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$M/reads.json" --dry-run --json
json_check "$TMP/out" '[(r["ok"], r["key"], r["cached"]) for r in j["results"]] == [(True, None, None)]'
expect_rc 0 "$KJIT" --cache-dir "$C" cache stats --json
json_check "$TMP/out" 'j["totals"]["compiles"] == '"$BEFORE"

# --arch replaces the manifest's targets; a good manifest exits 0.
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$M/good.json" --arch sm_90 -q
expect_grep '^warmed 1 kernels .*: 1 compiled, 0 already cached, 0 failed$' "$TMP/out" "warm --arch"

# On a terminal: a progress bar with count, rate, ETA on stderr.
if command -v script >/dev/null 2>&1; then
  script -qec "\"$KJIT\" --cache-dir \"$C\" warm \"$M/manifest.json\" -j 2" /dev/null >"$TMP/tty.txt" 2>&1 || true
  expect_grep 'ETA' "$TMP/tty.txt" "progress bar"
  expect_grep '6/6' "$TMP/tty.txt" "progress bar"
  expect_grep '/s' "$TMP/tty.txt" "progress bar"
  expect_grep 'FAILED broken (sm_90)' "$TMP/tty.txt" "failure above the progress bar"
fi

# A source file that cannot be read fails that kernel only.
cat >"$M/missing.json" <<'JSON'
{ "defaults": { "targets": ["sm_90"] },
  "kernels": [ { "file": "kernels/saxpy.cu" }, { "file": "kernels/gone.cu" } ] }
JSON
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/missing.json"
expect_grep 'gone.cu (sm_90): cannot read .*gone.cu' "$TMP/out" "missing source file"
expect_grep '^warmed 2 kernels .* 1 failed$' "$TMP/out" "missing source file summary"

# A NUL byte in a source fails that kernel like invalid UTF-8, naming the source and the
# byte offset, whether the source is a file or inline (JSON "\u0000"); the source is not cut
# at the NUL and compiled.
printf 'extern "C" __global__ void k(int* p) { *p = 1; }\n\0 garbage(\n' >"$M/kernels/nul.cu"
cat >"$M/nul.json" <<'JSON'
{ "defaults": { "targets": ["sm_90"] },
  "kernels": [ { "file": "kernels/saxpy.cu" }, { "name": "nulfile", "file": "kernels/nul.cu" },
               { "name": "nulinline", "source": "extern \"C\" __global__ void k() {}\u0000 garbage(" },
               { "name": "nulheader", "source": "#include \"h.h\"\nextern \"C\" __global__ void k() {}",
                 "headers": { "h.h": "// h\u0000 garbage(" } } ] }
JSON
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/nul.json" -j 1
expect_grep 'FAILED   nulfile (sm_90): .*kernels/nul.cu.*NUL byte at byte offset 49' "$TMP/out" "NUL byte in a source file"
expect_grep 'FAILED   nulinline (sm_90): inline source .*NUL byte at byte offset 33' "$TMP/out" "NUL byte in an inline source"
expect_grep "FAILED   nulheader (sm_90): header 'h.h' .*NUL byte at byte offset 4" "$TMP/out" "NUL byte in a header"
expect_grep '^warmed 4 kernels .*, 3 failed$' "$TMP/out" "NUL byte summary"
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/nul.json" --json
json_check "$TMP/out" '[r["status_name"] for r in j["results"] if not r["ok"]] == ["KJIT_ERROR_INVALID_SOURCE"] * 3'
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$M/nul.json" --dry-run
expect_grep 'nulinline (sm_90): inline source .*NUL byte' "$TMP/out" "NUL byte in a dry run"
# Elsewhere in a manifest a NUL cannot be passed on: the manifest is malformed.
echo '{ "kernels": [ { "source": "__global__ void k() {}", "targets": ["sm_90"], "options": ["-DX=1\u0000"] } ] }' >"$M/nulopt.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/nulopt.json"
expect_grep "nulopt.json.*kernels\[0\]\.options\[0\].*NUL" "$TMP/err" "NUL in an option"
{ echo '{ "kernels": [ { "source": "__global__ void k() {}", "targets": ["sm_90"] } ] }'; printf '\0'; } >"$M/nulraw.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/nulraw.json"
expect_grep "nulraw.json.*NUL byte at byte offset 80" "$TMP/err" "NUL byte in the manifest"

# Sources and manifests are read only from regular files of at most 64 MiB.
cat >"$M/devzero.json" <<'JSON'
{ "defaults": { "targets": ["sm_90"] },
  "kernels": [ { "file": "kernels/saxpy.cu" }, { "name": "zero", "file": "/dev/zero" } ] }
JSON
expect_rc 1 bounded "$KJIT" --cache-dir "$C" warm "$M/devzero.json" -j 1
expect_grep "FAILED   zero (sm_90): cannot read '/dev/zero': not a regular file (a character device)" "$TMP/out" "/dev/zero as a source"
expect_grep '^warmed 2 kernels .*, 1 failed$' "$TMP/out" "/dev/zero as a source"
expect_rc 3 bounded "$KJIT" --cache-dir "$C" warm /dev/zero
expect_grep "manifest '/dev/zero': not a regular file (a character device)" "$TMP/err" "/dev/zero as the manifest"
truncate -s 65M "$M/big.json"
expect_rc 3 bounded "$KJIT" --cache-dir "$C" warm "$M/big.json"
expect_grep "big.json': larger than 64 MiB (the limit for a manifest)" "$TMP/err" "a 65 MiB manifest"

# Waiting for another process's compile is reported apart from compiling. Another process
# holds the claim of the kernel's key (stopped, as a hung one would be); when it goes on and
# stores the entry, warm reports a hit after a wait; when it dies, warm compiles after the
# wait, and "compiled in" is NVRTC's time alone.
write_slow "$M/kernels/slow.cu"
echo '[ { "name": "slow", "file": "kernels/slow.cu", "targets": ["sm_90"] } ]' >"$M/slow.json"
for end in CONT KILL; do
  W=$TMP/wait-$end
  hold_claim "$W" sh -c "cd \"$M\" && exec \"$KJIT\" --cache-dir \"$W\" compile kernels/slow.cu --arch sm_90 -o /dev/null"
  flag=; [ $end = KILL ] && flag=--json
  "$KJIT" --cache-dir "$W" warm "$M/slow.json" $flag >"$TMP/wait.out" 2>"$TMP/wait.err" &
  WAITER=$!
  sleep 1.5
  { kill -$end "$HOLDER" && wait "$HOLDER"; } 2>/dev/null || true
  wait "$WAITER" || fail "warm that waited failed: $(cat "$TMP/wait.out" "$TMP/wait.err")"
  if [ $end = CONT ]; then
    expect_grep '^\[1/1\] cached   slow (sm_90), saves [0-9.]* m*s, after waiting [0-9.]* m*s for another process$' "$TMP/wait.out" "warm hit after a wait"
  else
    json_check "$TMP/wait.out" 'j["results"][0]["tier"] == "compiled" and j["results"][0]["wait_ms"] >= 1000'
    json_check "$TMP/wait.out" 'abs(j["results"][0]["elapsed_ms"] - j["results"][0]["wait_ms"] - j["results"][0]["compile_ms"]) < 1'
  fi
done
expect_rc 0 "$KJIT" --cache-dir "$TMP/wait-none" warm "$M/slow.json"
expect_grep '^\[1/1\] compiled slow (sm_90) in [0-9.]* m*s$' "$TMP/out" "warm without a wait"

# Malformed manifests stop before compiling anything, naming the file and the problem.
echo '{ "kernels": [ { "name": "x", ' >"$M/bad1.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/bad1.json"
expect_grep 'bad1.json.*invalid JSON' "$TMP/err" "invalid JSON"
echo '{ "kernels": [ { "name": "x", "source": "y", "targets": ["sm_90"], "optoins": [] } ] }' >"$M/bad2.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/bad2.json"
expect_grep "kernels\[0\]: unknown field 'optoins'; did you mean 'options'?" "$TMP/err" "unknown field"
# Unknown fields name the closest known one, at every level, or list the known ones.
echo '{ "kernel": [ { "name": "x", "source": "y", "targets": ["sm_90"] } ] }' >"$M/typo1.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/typo1.json"
expect_grep "top level: unknown field 'kernel'; did you mean 'kernels'?" "$TMP/err" "unknown top-level field"
echo '{ "defaults": { "taregts": ["sm_90"] }, "kernels": [ { "source": "y" } ] }' >"$M/typo2.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/typo2.json"
expect_grep "defaults: unknown field 'taregts'; did you mean 'targets'?" "$TMP/err" "unknown field in defaults"
echo '{ "defaults": { "file": "a.cu" }, "kernels": [ { "source": "y" } ] }' >"$M/typo3.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/typo3.json"
expect_grep "defaults: 'file' belongs to a kernel, not to the defaults" "$TMP/err" "kernel field in defaults"
echo '[ { "source": "y", "targets": ["sm_90"], "defnes": { "N": 1 }, "include_path": ["."] } ]' >"$M/typo4.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/typo4.json"
expect_grep "kernels\[0\]: unknown field 'defnes'; did you mean 'defines'?" "$TMP/err" "unknown field (a letter missing)"
echo '[ { "source": "y", "targets": ["sm_90"], "colour": "blue" } ]' >"$M/typo5.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/typo5.json"
expect_grep "unknown field 'colour' (known fields: name, file, source, program_name, targets" "$TMP/err" "unknown field, nothing close"
echo '{ "kernels": [ { "name": "x", "source": "y" } ] }' >"$M/bad3.json"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/bad3.json"
expect_grep 'no target' "$TMP/err" "missing targets"
expect_rc 3 "$KJIT" --cache-dir "$C" warm "$M/none.json"
expect_grep 'none.json' "$TMP/err" "missing manifest"
expect_rc 2 "$KJIT" --cache-dir "$C" warm "$M/good.json" -j 0
expect_rc 2 "$KJIT" --cache-dir "$C" warm

# The example manifest in examples/ is valid (dry run: keys only).
EXAMPLES=$(cd "$(dirname "$0")/../../examples" && pwd)
expect_rc 0 "$KJIT" --cache-dir "$C" warm "$EXAMPLES/warm-manifest.json" --dry-run --json
json_check "$TMP/out" 'len(j["results"]) == 5 and all(r["ok"] for r in j["results"])'

# --dry-run knows the key of a kernel that reads files once a compile into this cache has
# recorded what NVRTC read (the key kjit_binary_key() gives), and a source whose only
# "include" is in a comment reads no file at all.
DR=$TMP/dr
mkdir -p "$DR/src"
printf '#define W 5\n' >"$DR/src/w.h"
printf '#include "w.h"\nextern "C" __global__ void inc(float* x) { x[0] = W; }\n' >"$DR/src/inc.cu"
printf '// this kernel does not include anything\nextern "C" __global__ void cmt(float* x) { x[0] = 1; }\n' >"$DR/src/cmt.cu"
printf '{"version": 1, "kernels": [{"file": "src/inc.cu", "target": "sm_90"}, {"file": "src/cmt.cu", "target": "sm_90"}]}\n' >"$DR/m.json"
expect_rc 0 "$KJIT" --cache-dir "$DR/c" warm "$DR/m.json" --dry-run --json
json_check "$TMP/out" 'j["results"][0]["key"] is None and "recorded by its first compile" in j["results"][0]["message"]'
json_check "$TMP/out" 'j["results"][1]["key"] is not None and j["results"][1]["cached"] is False'
expect_rc 0 "$KJIT" --cache-dir "$DR/c" warm "$DR/m.json" --json
warm_keys=$(json_get "$TMP/out" 'sorted(r["key"] for r in j["results"])')
expect_rc 0 "$KJIT" --cache-dir "$DR/c" warm "$DR/m.json" --dry-run --json
json_check "$TMP/out" 'all(r["key"] and r["cached"] for r in j["results"])'
[ "$(json_get "$TMP/out" 'sorted(r["key"] for r in j["results"])')" = "$warm_keys" ] ||
  fail "dry-run keys differ from the keys warm compiled"
(cd "$DR" && "$KJIT" --cache-dir "$DR/c" compile src/inc.cu --arch sm_90 -o "$TMP/inc.cubin" --json >"$TMP/out" 2>"$TMP/err") ||
  fail "compile of src/inc.cu"
json_check "$TMP/out" 'j["hit"]'
printf '#define W 6\n' >"$DR/src/w.h"
expect_rc 0 "$KJIT" --cache-dir "$DR/c" warm "$DR/m.json" --dry-run --json
json_check "$TMP/out" 'j["results"][0]["key"] is None and j["results"][1]["cached"] is True'

# --arch auto without a GPU: the hint to name a target, as kjit compile gives it.
if "$KJIT" info 2>/dev/null | grep -q '^devices  *none'; then
  expect_rc 1 "$KJIT" --cache-dir "$DR/c" warm "$DR/m.json" --arch auto
  expect_grep "no GPU here: pass an explicit target, e.g. --arch sm_90" "$TMP/out" "warm --arch auto without a GPU"
fi

finish
