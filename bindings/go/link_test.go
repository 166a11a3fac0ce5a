package kjit

// The link step: these run without a GPU (explicit targets).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const linkCaller = `extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
`

const linkCallee = `__device__ float combine(float a, float b) { return a * 3.0f + b * 0.5f; }
`

func rdcBinary(t *testing.T, c *Compiler, src string, outputs Outputs) *Binary {
	t.Helper()
	o, err := NewOptions()
	must(t, err)
	t.Cleanup(func() { o.Close() })
	must(t, o.SetTarget("sm_90"))
	must(t, o.SetOutputs(outputs))
	must(t, o.Add("-rdc=true"))
	return compile(t, c, src, o)
}

func newLinker(t *testing.T, cache *Cache) *Linker {
	t.Helper()
	l, err := NewLinker(cache)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLinkLTOIRThenHit(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	a := rdcBinary(t, c, linkCaller, OutputLTOIR)
	b := rdcBinary(t, c, linkCallee, OutputLTOIR)
	l := newLinker(t, cache)
	must(t, l.AddBinary(a, "caller"))
	must(t, l.AddBinary(b, ""))
	must(t, l.AddOption("-lto"))
	first, err := l.Link()
	must(t, err)
	defer first.Close()
	if first.Tier() != TierCompiled || first.Target() != "sm_90" {
		t.Fatal(first.Tier(), first.Target())
	}
	if cubin := first.CUBIN(); len(cubin) < 4 || string(cubin[:4]) != "\x7fELF" {
		t.Fatal("the link gave no CUBIN")
	}
	if names := first.KernelNames(); len(names) != 1 || names[0] != "apply" {
		t.Fatal(names)
	}
	second, err := l.Link()
	must(t, err)
	defer second.Close()
	if second.Tier() == TierCompiled || string(second.CUBIN()) != string(first.CUBIN()) {
		t.Fatal("the second link was not a hit with the same bytes", second.Tier())
	}
	key, err := l.Key()
	must(t, err)
	if key != first.Key() || !isHex64(key) {
		t.Fatal(key, first.Key())
	}
}

func TestLinkPTXFilesAndData(t *testing.T) {
	c := newCompiler(t, nil)
	a := rdcBinary(t, c, linkCaller, OutputPTX)
	b := rdcBinary(t, c, linkCallee, OutputPTX)
	path := filepath.Join(t.TempDir(), "callee.ptx")
	must(t, os.WriteFile(path, []byte(b.PTX()), 0o600))
	l := newLinker(t, nil)
	must(t, l.SetTarget("sm_90"))
	must(t, l.AddData(LinkInputPTX, []byte(a.PTX()), "caller.ptx"))
	must(t, l.AddFile(LinkInputAuto, path))
	out, err := l.Link()
	must(t, err)
	defer out.Close()
	if names := out.KernelNames(); len(names) != 1 || names[0] != "apply" {
		t.Fatal(names)
	}
}

func TestLinkErrors(t *testing.T) {
	c := newCompiler(t, nil)
	a := rdcBinary(t, c, linkCaller, OutputLTOIR)
	l := newLinker(t, nil)
	must(t, l.AddBinary(a, ""))
	must(t, l.AddOption("-lto"))
	_, err := l.Link()
	wantStatus(t, err, StatusLink)
	if e := err.(*Error); !strings.Contains(e.Log, "Unresolved extern function") {
		t.Fatal(e.Log)
	}
	bad := newLinker(t, nil)
	wantStatus(t, bad.AddData(LinkInputCUBIN, []byte("garbage"), "g"), StatusInvalidArgument)
	wantStatus(t, bad.AddData(LinkInputLTOIR, nil, "g"), StatusInvalidArgument)
	wantStatus(t, bad.AddFile(LinkInputPTX, filepath.Join(t.TempDir(), "missing.ptx")), StatusIO)
	_, err = bad.Link()
	wantStatus(t, err, StatusInvalidArgument) // no inputs
	mismatch := newLinker(t, nil)
	must(t, mismatch.AddBinary(a, ""))
	must(t, mismatch.SetTarget("sm_80"))
	_, err = mismatch.Link()
	wantStatus(t, err, StatusUnsupportedTarget)
	if !strings.Contains(StatusLink.Error(), "KJIT_ERROR_LINK") {
		t.Fatal(StatusLink.Error())
	}
	v, err := NVJitLinkVersion()
	must(t, err)
	if !strings.HasPrefix(v, "nvJitLink 13.") {
		t.Fatal(v)
	}
}
