package kjit

// Compile and cache paths: these run without a GPU (explicit targets, no driver needed).

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const saxpySource = `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
`

const testTarget = "sm_80"

func testOptions(t *testing.T) *Options {
	t.Helper()
	o, err := NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	must(t, o.SetTarget(testTarget))
	must(t, o.Add("-std=c++17"))
	return o
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newCompiler(t *testing.T, cache *Cache) *Compiler {
	t.Helper()
	c, err := NewCompiler(cache, 0)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func openCache(t *testing.T, opts *CacheOptions) *Cache {
	t.Helper()
	c, err := OpenCache(opts)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func compile(t *testing.T, c *Compiler, src string, o *Options) *Binary {
	t.Helper()
	b, err := c.Compile(src, o)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func wantStatus(t *testing.T, err error, want Status) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("want %v, got %v", want, err)
	}
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func TestVersionMatchesHeaders(t *testing.T) {
	if Version() != HeaderVersion {
		t.Fatalf("library %d, headers %d", Version(), HeaderVersion)
	}
	if VersionString() != "0.3.0" {
		t.Fatal(VersionString())
	}
	if !strings.Contains(StatusCompile.Error(), "KJIT_ERROR_COMPILE") {
		t.Fatal(StatusCompile.Error())
	}
	v, err := NVRTCVersion()
	must(t, err)
	if !strings.Contains(v, ".") {
		t.Fatal(v)
	}
}

func TestCompileWithoutCache(t *testing.T) {
	c := newCompiler(t, nil)
	o := testOptions(t)
	b := compile(t, c, saxpySource, o)
	if b.Tier() != TierCompiled || b.Status() != StatusOK {
		t.Fatal(b.Tier(), b.Status())
	}
	if b.Target() != testTarget || !isHex64(b.Key()) {
		t.Fatal(b.Target(), b.Key())
	}
	key, err := ComputeKey(saxpySource, o)
	must(t, err)
	if key != b.Key() {
		t.Fatalf("ComputeKey %s, binary %s", key, b.Key())
	}
	if !strings.Contains(b.PTX(), ".entry saxpy") {
		t.Fatal(b.PTX())
	}
	if cubin := b.CUBIN(); len(cubin) < 4 || string(cubin[:4]) != "\x7fELF" {
		t.Fatal("no CUBIN")
	}
	if b.LTOIR() != nil {
		t.Fatal("unexpected LTO-IR")
	}
	if names := b.KernelNames(); len(names) != 1 || names[0] != "saxpy" {
		t.Fatal(names)
	}
	if !strings.HasPrefix(strings.TrimSpace(b.MetadataJSON()), "{") || b.CompileMS() <= 0 {
		t.Fatal(b.MetadataJSON(), b.CompileMS())
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	c := newCompiler(t, nil)
	_, err := c.Compile("extern \"C\" __global__ void broken(int* p) { p[0] = undefined_thing; }\n", testOptions(t))
	wantStatus(t, err, StatusCompile)
	if !errors.Is(err, &Error{Status: StatusCompile}) {
		t.Fatal("errors.Is with *Error target")
	}
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Log, "undefined_thing") {
		t.Fatalf("log: %v", err)
	}
	if !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatal(err.Error())
	}
}

// NVRTC 13.0 dies with SIGSEGV on this source with this name expression
// (fuzz/nvrtc-crash/): the compile worker, the default mode, turns that into a status for
// this compile, and this process lives on.
func TestNvrtcCrashIsAStatusNotADeadProcess(t *testing.T) {
	c := newCompiler(t, nil)
	o := testOptions(t)
	if err := o.SetTarget("sm_90"); err != nil {
		t.Fatal(err)
	}
	if err := o.AddNameExpression("t<int>"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Compile("template <typename ~> __global__ void t(T* p) { *p = T(1); }\n", o)
	wantStatus(t, err, StatusNVRTC)
	if !strings.Contains(err.Error(), "crashed") {
		t.Fatal(err)
	}
	if _, err := c.Compile(saxpySource, testOptions(t)); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputsAreReported(t *testing.T) {
	c := newCompiler(t, nil)
	_, err := c.Compile("", testOptions(t))
	wantStatus(t, err, StatusInvalidSource)

	bad := testOptions(t)
	must(t, bad.Add("--definitely-not-an-nvrtc-option"))
	_, err = c.Compile(saxpySource, bad)
	wantStatus(t, err, StatusInvalidOption)
	if err.(*Error).Message == "" {
		t.Fatal("empty message")
	}

	closed, err := NewOptions()
	must(t, err)
	closed.Close()
	closed.Close()
	_, err = c.Compile(saxpySource, closed)
	wantStatus(t, err, StatusInvalidHandle)

	dead, err := NewCompiler(nil, 0)
	must(t, err)
	dead.Close()
	_, err = dead.Compile(saxpySource, testOptions(t))
	wantStatus(t, err, StatusInvalidHandle)
}

// Go strings may hold NUL bytes, which C reads as the end of the string: C.CString would
// cut the text there and C would compile, name or look up what precedes it. The bindings
// refuse such text before calling C: code (sources, header contents) with
// StatusInvalidSource, any other text with StatusInvalidArgument.
func TestNULBytesAreRefusedBeforeC(t *testing.T) {
	refused := func(what string, err error, want Status) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Status != want || !strings.Contains(e.Message, "NUL byte") {
			t.Errorf("%s: want %v about a NUL byte, got %v", what, want, err)
		}
	}
	c := newCompiler(t, nil)
	o := testOptions(t)
	// What precedes the NUL is a valid program: cut there, it would compile.
	src := saxpySource + "\x00 garbage that is not CUDA"
	_, err := c.Compile(src, o)
	refused("source", err, StatusInvalidSource)
	_, err = c.CompileAsync(src, o)
	refused("async source", err, StatusInvalidSource)
	_, _, err = c.CompileMany([]string{saxpySource, src}, nil)
	refused("one of many sources", err, StatusInvalidSource)
	_, err = ComputeKey(src, o)
	refused("source of a key", err, StatusInvalidSource)
	_, err = c.Kernel(src, "saxpy", o, 0, KernelDefault)
	refused("kernel source", err, StatusInvalidSource)
	_, err = c.Kernel(saxpySource, "saxpy\x00", o, 0, KernelDefault)
	refused("kernel name", err, StatusInvalidArgument)

	p := testOptions(t)
	refused("target", p.SetTarget("sm_90\x00"), StatusInvalidArgument)
	refused("program name", p.SetName("k.cu\x00x"), StatusInvalidArgument)
	refused("option", p.Add("-DX=1\x00-DY"), StatusInvalidArgument)
	refused("define name", p.AddDefine("X\x00", "1"), StatusInvalidArgument)
	refused("define value", p.AddDefine("X", "1\x00"), StatusInvalidArgument)
	refused("include path", p.AddIncludePath("/tmp\x00/x"), StatusInvalidArgument)
	refused("header name", p.AddHeader("h.h\x00", "#define V 1\n"), StatusInvalidArgument)
	refused("header contents", p.AddHeader("h.h", "#define V 1\n\x00junk"), StatusInvalidSource)
	refused("name expression", p.AddNameExpression("scale<float>\x00"), StatusInvalidArgument)
	_, err = HashOptions([]string{"-DX", "-DY\x00"})
	refused("hashed option", err, StatusInvalidArgument)
	// Nothing was added: the options still give saxpy's key.
	got, err := ComputeKey(saxpySource, p)
	must(t, err)
	want, err := ComputeKey(saxpySource, testOptions(t))
	must(t, err)
	if got != want {
		t.Error("a refused setter changed the options")
	}

	dir := t.TempDir()
	_, err = OpenCache(&CacheOptions{Dir: dir + "\x00x"})
	refused("cache directory", err, StatusInvalidArgument)
	_, err = OpenCache(&CacheOptions{Dir: dir, RemoteURL: "redis://127.0.0.1:1\x00"})
	refused("remote URL", err, StatusInvalidArgument)
	cache := openCache(t, &CacheOptions{Dir: dir})
	key := compile(t, newCompiler(t, cache), saxpySource, testOptions(t)).Key()
	_, err = cache.Get(key + "\x00")
	refused("key to get", err, StatusInvalidArgument)
	refused("key to remove", cache.Remove(key+"\x00"), StatusInvalidArgument)
	_, err = cache.Export(filepath.Join(dir, "x\x00y"))
	refused("export path", err, StatusInvalidArgument)
	_, _, err = cache.Import(filepath.Join(dir, "x\x00y"))
	refused("import path", err, StatusInvalidArgument)
	if _, err := cache.Get(key); err != nil {
		t.Error("the entry is gone:", err)
	}
}

func TestCacheTiersAndIdenticalBytes(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t)

	cache1, err := OpenCache(&CacheOptions{Dir: dir})
	must(t, err)
	if cache1.Dir() != dir {
		t.Fatal(cache1.Dir())
	}
	c1, err := NewCompiler(cache1, 0)
	must(t, err)
	first := compile(t, c1, saxpySource, o)
	second := compile(t, c1, saxpySource, o)
	if first.Tier() != TierCompiled || second.Tier() != TierMemory {
		t.Fatal(first.Tier(), second.Tier())
	}
	s, err := cache1.Stats()
	must(t, err)
	if s.DiskState != DiskOK || s.Compiles != 1 || s.MemoryHits < 1 || s.Stores < 1 {
		t.Fatalf("%+v", s)
	}
	// The cache refuses to close under an open compiler.
	wantStatus(t, cache1.Close(), StatusInvalidArgument)
	must(t, c1.Close())
	must(t, cache1.Close())

	cache2 := openCache(t, &CacheOptions{Dir: dir})
	c2 := newCompiler(t, cache2)
	hit := compile(t, c2, saxpySource, o)
	if hit.Tier() != TierDisk || hit.Key() != first.Key() || hit.PTX() != first.PTX() ||
		string(hit.CUBIN()) != string(first.CUBIN()) {
		t.Fatal("disk hit differs", hit.Tier())
	}
	// The totals count every handle that used the database: the first one's compile and
	// memory hit, this one's disk hit.
	s, err = cache2.Stats()
	must(t, err)
	if s.Compiles != 0 || s.DiskHits != 1 || s.TotalCompiles != 1 || s.TotalMemoryHits < 1 ||
		s.TotalDiskHits != 1 || s.TotalRemoteClaims != 0 {
		t.Fatalf("%+v", s)
	}

	got, err := cache2.Get(first.Key())
	must(t, err)
	defer got.Close()
	if got.PTX() != first.PTX() {
		t.Fatal("Get returned other bytes")
	}
	entries, err := cache2.List()
	must(t, err)
	found := false
	for _, e := range entries {
		if e.Key == first.Key() {
			found = true
			if e.Target != testTarget || len(e.Kernels) != 1 || e.Kernels[0] != "saxpy" || e.Bytes == 0 {
				t.Fatalf("%+v", e)
			}
		}
	}
	if !found {
		t.Fatal("entry not listed")
	}
	checked, bad, err := cache2.Verify()
	must(t, err)
	if checked < 1 || bad != 0 {
		t.Fatal(checked, bad)
	}
	must(t, cache2.Remove(first.Key()))
	_, err = cache2.Get(first.Key())
	wantStatus(t, err, StatusNotFound)
	wantStatus(t, cache2.Remove(first.Key()), StatusNotFound)
}

func TestClearMemoryFallsBackToDisk(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	o := testOptions(t)
	compile(t, c, saxpySource, o)
	must(t, cache.ClearMemory())
	if b := compile(t, c, saxpySource, o); b.Tier() != TierDisk {
		t.Fatal(b.Tier())
	}
	must(t, cache.Clear())
	if b := compile(t, c, saxpySource, o); b.Tier() != TierCompiled {
		t.Fatal(b.Tier())
	}
}

func TestReadOnlyCacheRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	rw := openCache(t, &CacheOptions{Dir: dir})
	bin := compile(t, newCompiler(t, rw), saxpySource, testOptions(t))
	ro := openCache(t, &CacheOptions{Dir: dir, ReadOnly: true})
	s, err := ro.Stats()
	must(t, err)
	if s.DiskState != DiskReadOnly {
		t.Fatal(s.DiskState, s.Message)
	}
	wantStatus(t, ro.Put(bin), StatusReadOnly)
	wantStatus(t, ro.Clear(), StatusReadOnly)
	if b := compile(t, newCompiler(t, ro), saxpySource, testOptions(t)); b.Tier() != TierDisk {
		t.Fatal(b.Tier())
	}
}

func TestExportImport(t *testing.T) {
	a := openCache(t, &CacheOptions{Dir: t.TempDir()})
	bin := compile(t, newCompiler(t, a), saxpySource, testOptions(t))
	file := filepath.Join(t.TempDir(), "entries.kjit")
	n, err := a.Export(file)
	must(t, err)
	if n != 1 {
		t.Fatal(n)
	}
	b := openCache(t, &CacheOptions{Dir: t.TempDir()})
	_, err = b.Get(bin.Key())
	wantStatus(t, err, StatusNotFound)
	imported, rejected, err := b.Import(file)
	must(t, err)
	if imported != 1 || rejected != 0 {
		t.Fatal(imported, rejected)
	}
	got, err := b.Get(bin.Key())
	must(t, err)
	got.Close()
	removed, err := b.Prune(0)
	must(t, err)
	if removed < 1 {
		t.Fatal(removed)
	}
}

func TestMemoryOnlyCache(t *testing.T) {
	cache := openCache(t, &CacheOptions{MemoryOnly: true})
	if cache.Dir() != "" {
		t.Fatal(cache.Dir())
	}
	c := newCompiler(t, cache)
	o := testOptions(t)
	if b := compile(t, c, saxpySource, o); b.Tier() != TierCompiled {
		t.Fatal(b.Tier())
	}
	if b := compile(t, c, saxpySource, o); b.Tier() != TierMemory {
		t.Fatal(b.Tier())
	}
}

func TestNameExpressions(t *testing.T) {
	o := testOptions(t)
	must(t, o.AddNameExpression("scale<float>"))
	b := compile(t, newCompiler(t, nil), "template <typename T> __global__ void scale(T* x, T a) { x[threadIdx.x] *= a; }\n", o)
	lowered, ok := b.LoweredName("scale<float>")
	if !ok || !strings.HasPrefix(lowered, "_Z") {
		t.Fatal(lowered, ok)
	}
	if _, ok := b.LoweredName("scale<double>"); ok {
		t.Fatal("unexpected lowered name")
	}
	if _, ok := b.LoweredName("scale<float>\x00junk"); ok {
		t.Fatal("a name expression cut at its NUL byte was found")
	}
	ne := b.NameExpressions()
	if len(ne) != 1 || ne[0] != (NameExpression{"scale<float>", lowered}) {
		t.Fatal(ne)
	}
}

func TestHeadersDefinesAndIncludesAreInTheKey(t *testing.T) {
	src := "#include \"factor.h\"\n#include \"val.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = FACTOR * SCALE * VAL; }\n"
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "val.h"), []byte("#define VAL 1\n"), 0o600))
	opts := func(factor, scale string) *Options {
		o := testOptions(t)
		must(t, o.AddHeader("factor.h", "#define FACTOR "+factor+"\n"))
		must(t, o.AddDefine("SCALE", scale))
		must(t, o.AddIncludePath(dir))
		return o
	}
	key := func(o *Options) string {
		k, err := ComputeKey(src, o)
		must(t, err)
		return k
	}
	base := key(opts("2", "3"))
	if base != key(opts("2", "3")) || base == key(opts("4", "3")) || base == key(opts("2", "5")) {
		t.Fatal("key does not follow headers and defines")
	}
	o := opts("2", "3")
	clone, err := o.Clone()
	must(t, err)
	defer clone.Close()
	o.Close()
	if key(clone) != base {
		t.Fatal("clone differs")
	}
	if b := compile(t, newCompiler(t, nil), src, clone); b.Key() != base {
		t.Fatal("compiled key differs")
	}
	must(t, os.WriteFile(filepath.Join(dir, "val.h"), []byte("#define VAL 2\n"), 0o600))
	if key(clone) == base {
		t.Fatal("editing an included file did not change the key")
	}
}

func TestHashes(t *testing.T) {
	h, err := HashSource([]byte("abc"))
	must(t, err)
	if h != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatal(h)
	}
	abc, err := HashOptions([]string{"ab", "c"})
	must(t, err)
	a_bc, err := HashOptions([]string{"a", "bc"})
	must(t, err)
	ab, err := HashOptions([]string{"a", "b"})
	must(t, err)
	ba, err := HashOptions([]string{"b", "a"})
	must(t, err)
	if !isHex64(abc) || abc == a_bc || ab == ba {
		t.Fatal(abc, a_bc, ab, ba)
	}
}

func TestAsyncCompile(t *testing.T) {
	c, err := NewCompiler(nil, 2)
	must(t, err)
	defer c.Close()
	f, err := c.CompileAsync(saxpySource, testOptions(t))
	must(t, err)
	defer f.Close()
	b, err := f.Wait(-1)
	must(t, err)
	defer b.Close()
	if !f.Ready() || !strings.Contains(b.PTX(), ".entry saxpy") {
		t.Fatal("async result")
	}
	_, err = f.Wait(0)
	wantStatus(t, err, StatusInvalidArgument)

	bad, err := c.CompileAsync("__global__ void f() { nope }", testOptions(t))
	must(t, err)
	defer bad.Close()
	_, err = bad.Wait(time.Minute)
	wantStatus(t, err, StatusCompile)
	if err.(*Error).Log == "" {
		t.Fatal("no log")
	}
}

func TestCompileMany(t *testing.T) {
	c := newCompiler(t, nil)
	o := testOptions(t)
	bins, errs, err := c.CompileMany([]string{saxpySource, "__global__ void g() { oops }"}, []*Options{o, o})
	must(t, err)
	if errs[0] != nil || !strings.Contains(bins[0].PTX(), "saxpy") {
		t.Fatal(errs[0])
	}
	bins[0].Close()
	wantStatus(t, errs[1], StatusCompile)
	if bins[1] != nil || !strings.Contains(errs[1].(*Error).Log, "oops") {
		t.Fatal(errs[1])
	}
	_, _, err = c.CompileMany([]string{saxpySource}, []*Options{})
	wantStatus(t, err, StatusInvalidArgument)
}

func TestConcurrentCompilesShareOneCompile(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	o := testOptions(t)
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, err := c.Compile(saxpySource, o)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = b.Key()
			b.Close()
		}(i)
	}
	wg.Wait()
	for _, k := range keys {
		if k != keys[0] {
			t.Fatal(keys)
		}
	}
	s, err := cache.Stats()
	must(t, err)
	if s.Compiles != 1 {
		t.Fatal("compiles:", s.Compiles)
	}
}

// Error messages are thread-local in C; each goroutine must get the message of its own
// failed call even while many goroutines fail at once.
func TestErrorMessagesBelongToTheirCall(t *testing.T) {
	c := newCompiler(t, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				opt := "--bogus-option-" + strings.Repeat("x", g+1)
				o, err := NewOptions()
				if err != nil {
					t.Error(err)
					return
				}
				if err := o.SetTarget(testTarget); err != nil {
					t.Error(err)
				}
				if err := o.Add(opt); err != nil {
					t.Error(err)
				}
				_, err = c.Compile(saxpySource, o)
				o.Close()
				var e *Error
				if !errors.As(err, &e) || e.Status != StatusInvalidOption {
					t.Errorf("want invalid option, got %v", err)
					return
				}
				if !strings.Contains(e.Message, opt+" ") && !strings.HasSuffix(e.Message, opt) &&
					!strings.Contains(e.Message, opt+"'") && !strings.Contains(e.Message, opt+"\"") {
					t.Errorf("goroutine %d got a message about another call: %q", g, e.Message)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestLogCallback(t *testing.T) {
	var mu sync.Mutex
	var got []string
	SetLogCallback(func(level LogLevel, msg string) {
		mu.Lock()
		got = append(got, msg)
		mu.Unlock()
	})
	defer SetLogCallback(nil)
	// A cache directory that cannot be created: the library logs why and goes memory-only.
	blocker := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(blocker, []byte("x"), 0o600))
	cache := openCache(t, &CacheOptions{Dir: filepath.Join(blocker, "sub")})
	s, err := cache.Stats()
	must(t, err)
	if s.DiskState != DiskUnavailable || s.Message == "" {
		t.Fatalf("%+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no log message for an unusable cache directory")
	}
}

func TestUnreachableRemoteNeverFailsACompile(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir(), RemoteURL: "redis://127.0.0.1:1", RemoteReadOnly: true})
	c := newCompiler(t, cache)
	if b := compile(t, c, saxpySource, testOptions(t)); b.Tier() != TierCompiled {
		t.Fatal(b.Tier())
	}
	if b := compile(t, c, saxpySource, testOptions(t)); b.Tier() != TierMemory {
		t.Fatal(b.Tier())
	}
}
