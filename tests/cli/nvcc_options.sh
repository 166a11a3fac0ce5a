#!/usr/bin/env bash
# kjit compile as an nvcc user types it: NVRTC's options in place in either spelling,
# nvcc's spellings of kjit's options, the output kind from -o's extension, a warning for a
# result without a kernel, and name-expression advice in the tool's terms.
set -eu
. "$(dirname "$0")/lib.sh"
C=$TMP/cache
export KJIT_COMPILE_MODE=inprocess
write_saxpy "$TMP/saxpy.cu"
# Needs C++17 (inline variable, if constexpr) and -default-device (an unannotated function).
cat >"$TMP/k.cu" <<'CU'
inline constexpr int kTwo = 2;
float twice(float v) { if constexpr (kTwo == 2) return v * kTwo; else return v; }
extern "C" __global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
CU
cat >"$TMP/t.cu" <<'CU'
template <typename T, int N> __global__ void axpy(T a, T* x) { x[threadIdx.x] *= a * N; }
CU

key() { json_get "$TMP/out" 'j["key"]'; }

# NVRTC's options in place, both spellings; a value as the next argument is folded in.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/k.cu" -std=c++17 -default-device --arch sm_90 -o "$TMP/k.cubin" --json
k1=$(key)
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/k.cu" --std=c++17 --device-as-default-execution-space --arch sm_90 -o "$TMP/k.cubin" --json
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/k.cu" -std c++17 -default-device --arch sm_90 -o "$TMP/k.cubin" --json
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/k.cu" --arch sm_90 -o "$TMP/k.cubin" --json -- -std=c++17 -default-device
[ "$(key)" = "$k1" ] || fail "an option in place and after '--' make different keys"
for opts in "--use_fast_math" "-use_fast_math" "-lineinfo" "--generate-line-info" "-G" \
  "-rdc" "-rdc=true" "-rdc true" "-dopt" "-dopt on" "--dopt=on" "-maxrregcount=32" \
  "-maxrregcount 32" "--maxrregcount=32" "-ftz=true" "-ftz" "-prec-div=false" "-prec-sqrt=true" \
  "-fmad=false" "-extra-device-vectorization" "-w" "--disable-warnings" "-err-no" \
  "-Xptxas -v" "-Xptxas=-v" "--ptxas-options=-v" "-U FOO" "-UFOO" "--undefine-macro=FOO" \
  "-split-compile=0" "-opt-info=inline" "-restrict" "-device-int128" "-Ofc=min" \
  "-diag-suppress=177" "-brief-diag=true" "-no-source-include" "-jtd=50" "-dc" "-dw"; do
  # shellcheck disable=SC2086
  expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" $opts --arch sm_90 -o "$TMP/o.cubin" -q ||
    fail "NVRTC option '$opts' in place"
done
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -time="$TMP/time.csv" --arch sm_90 -o "$TMP/o.cubin" -q
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -include "$TMP/k.cu" -std=c++17 -default-device --arch sm_90 -o "$TMP/o.cubin" -q

# nvcc's spellings of kjit's options.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch=sm_90 -o "$TMP/a.cubin" --json
json_check "$TMP/out" 'j["target"] == "sm_90" and j["kind"] == "cubin" and j["device_ms"] == 0'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch sm_90 -ptx -o "$TMP/a.out" --json
json_check "$TMP/out" 'j["target"] == "sm_90" and j["kind"] == "ptx"'
expect_grep '\.target sm_90' "$TMP/a.out" "-ptx output"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --gpu-architecture=sm_80 -cubin -o "$TMP/a.out" --json
json_check "$TMP/out" 'j["target"] == "sm_80" and j["kind"] == "cubin"'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch sm_90 -dlto -o "$TMP/a.out" --json
json_check "$TMP/out" 'j["kind"] == "ltoir"'
# -o after "--" is kjit's, not NVRTC's.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --ptx -- -std=c++17 -o "$TMP/dd.ptx"
expect_grep '\.entry saxpy' "$TMP/dd.ptx" "-o after --"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --ptx -- --use_fast_math -o /dev/null

# An option neither kjit, NVRTC nor nvcc knows: a usage error that says what '--' is for.
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --no-such-flag
expect_grep "unknown option '--no-such-flag'" "$TMP/err"
expect_grep "after '--' goes to NVRTC" "$TMP/err"

# nvcc's options that NVRTC lacks, each said for what it is. Host-only ones are ignored
# with a warning (the key is the one without them; a value of theirs is consumed).
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/p.cubin" --json
plain=$(key)
for opts in "-O3" "-O0" "-Xcompiler -fPIC" "-Xcompiler=-Wall" "--compiler-options -fPIC" \
  "-ccbin g++" "-c" "-g" "-m64" "-x cu" "--extended-lambda" "--expt-extended-lambda"; do
  # shellcheck disable=SC2086
  expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" $opts --arch sm_90 -o "$TMP/p.cubin" --json ||
    fail "nvcc option '$opts'"
  expect_grep "kjit compile: warning: ignoring '$opts': " "$TMP/err" "warning for '$opts'"
  [ "$(key)" = "$plain" ] || fail "the ignored option '$opts' changed the key"
done
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -O3 --arch sm_90 -o "$TMP/p.cubin"
expect_grep "host code; NVRTC compiles device code only" "$TMP/err" "what -O3 is"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -O3 -q --arch sm_90 -o "$TMP/p.cubin"
[ ! -s "$TMP/err" ] || fail "-q printed the warning"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --extended-lambda --arch sm_90 -o "$TMP/p.cubin"
expect_grep "write it without __device__ or __host__" "$TMP/err" "what --extended-lambda is"
# --expt-relaxed-constexpr is NVRTC's -default-device: the same key, and it compiles code
# that calls an unannotated constexpr function.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/k.cu" -std=c++17 --expt-relaxed-constexpr --arch sm_90 -o "$TMP/k.cubin" --json
expect_grep "note: '--expt-relaxed-constexpr' taken as '-default-device'" "$TMP/err"
[ "$(key)" = "$k1" ] || fail "--expt-relaxed-constexpr is not -default-device"
# NVRTC's own refusal of an annotated lambda gets a kjit note in NVRTC's terms.
cat >"$TMP/lambda.cu" <<'CU'
template <class F> __device__ void apply(F f) { f(); }
extern "C" __global__ void k(int* p) { apply([=] __device__ () { p[0] = 1; }); }
CU
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/lambda.cu" --extended-lambda --arch sm_90 -o "$TMP/l.cubin"
expect_grep "kjit: note: NVRTC has no --extended-lambda" "$TMP/err" "annotated lambda note"
# -arch native is --arch auto (no GPU here: the hint to name a target).
expect_rc 3 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch=native -o "$TMP/p.cubin"
expect_grep "note: '-arch native' taken as '--arch auto'" "$TMP/err"
expect_grep "pass an explicit target, e.g. --arch sm_90" "$TMP/err" "-arch native without a GPU"
# Several targets: refused, naming the one target to ask for.
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -gencode arch=compute_90,code=sm_90 -o "$TMP/p.cubin"
expect_grep "'-gencode arch=compute_90,code=sm_90': nvcc builds for several targets.*use --arch sm_90 instead" "$TMP/err"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --generate-code=arch=compute_80,code=[sm_80,compute_80] -o "$TMP/p.cubin"
expect_grep "use --arch sm_80 instead" "$TMP/err" "--generate-code"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch compute_90 -code=sm_90 -o "$TMP/p.cubin"
expect_grep "'-code=sm_90': nvcc's code to embed.*use --arch sm_90 instead" "$TMP/err"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" -arch=all -o "$TMP/p.cubin"
expect_grep "kjit compiles for one target a call: use --arch auto" "$TMP/err" "-arch=all"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -std
expect_grep "needs a value" "$TMP/err"

# The output kind from -o's extension; a contradiction is refused.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" -n 'axpy<float,4>' --arch sm_90 -o "$TMP/out.ptx" --json
json_check "$TMP/out" 'j["kind"] == "ptx"'
expect_grep '\.version' "$TMP/out.ptx" "out.ptx"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/x.ltoir" --json
json_check "$TMP/out" 'j["kind"] == "ltoir"'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch compute_90 -o "$TMP/x.lto" --json
json_check "$TMP/out" 'j["kind"] == "ltoir"'
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/x.cubin" --json
json_check "$TMP/out" 'j["kind"] == "cubin"'
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 --cubin -o "$TMP/y.ptx"
expect_grep "names PTX output, but --cubin asks for CUBIN" "$TMP/err"
[ ! -e "$TMP/y.ptx" ] || fail "a refused compile wrote y.ptx"
expect_rc 2 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch compute_90 -o "$TMP/y.cubin"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/saxpy.cu" --arch sm_90 -o "$TMP/noext" --json
json_check "$TMP/out" 'j["kind"] == "cubin"'

# A template without a name expression compiles to no kernel: warned about.
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" --arch sm_90 -o "$TMP/t.cubin"
expect_grep "holds no kernel entry point" "$TMP/err" "template without -n"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" --arch sm_90 -o "$TMP/t.cubin"
expect_grep "holds no kernel entry point" "$TMP/err" "template without -n (hit)"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" -n 'axpy<float,4>' --arch sm_90 -o "$TMP/t.cubin"
! grep -q "no kernel entry point" "$TMP/err" || fail "warned with a name expression"
expect_rc 0 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" -rdc=true --arch sm_90 -o "$TMP/t.cubin"
! grep -q "no kernel entry point" "$TMP/err" || fail "warned about relocatable code"
KJIT_LOG=warn "$KJIT" --cache-dir "$TMP/c2" compile "$TMP/t.cu" --arch sm_90 -o "$TMP/t.cubin" 2>"$TMP/err" ||
  fail "template without -n, KJIT_LOG=warn"
expect_grep "kjit warning: .*compiled to no kernel entry point" "$TMP/err" "the library's log"

# A name expression that names nothing: advice in the tool's terms.
expect_rc 1 "$KJIT" --cache-dir "$C" compile "$TMP/t.cu" -n 'axpi<float,4>' --arch sm_90 -o "$TMP/t.cubin"
! grep -q "kjit_options_clone" "$TMP/err" || fail "the API's advice in the tool's output"
expect_grep "a name expression (-n, or a manifest entry's" "$TMP/err" "name expression advice"

cat >"$TMP/m.json" <<JSON
{"version": 1, "kernels": [{"file": "$TMP/t.cu", "target": "sm_90", "name_expressions": ["axpi<float,4>"]}]}
JSON
expect_rc 1 "$KJIT" --cache-dir "$C" warm "$TMP/m.json"
! grep -q "kjit_options_clone" "$TMP/out" "$TMP/err" || fail "the API's advice in warm's output"
expect_grep "a name expression (-n, or a manifest entry's" "$TMP/out" "warm: name expression advice"

[ "$FAILURES" = 0 ] || exit 1
echo "all nvcc_options tests passed"
