package kjit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowSource takes NVRTC about a second per kernel on a server CPU (a fully unrolled loop
// of 2000 steps in each of three kernels): far longer than the contexts below allow.
// seed makes each test's program its own cache key.
func slowSource(seed int) string {
	var b strings.Builder
	for k := 0; k < 3; k++ {
		fmt.Fprintf(&b, `extern "C" __global__ void slow%d(float* p) {
  float acc = p[0];
#pragma unroll
  for (int i = 0; i < 2000; ++i) acc = acc * p[i %% 7] + __sinf(acc + i);
  p[1] = acc + %d;
}
`, k, seed)
	}
	return b.String()
}

func TestCompileContextCompilesLikeCompile(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	o := testOptions(t)
	bin, err := c.CompileContext(context.Background(), saxpySource, o)
	must(t, err)
	defer bin.Close()
	want := compile(t, c, saxpySource, o)
	if bin.Tier() != TierCompiled || want.Tier() != TierMemory || bin.Key() != want.Key() {
		t.Fatalf("tiers %v then %v, keys %s %s", bin.Tier(), want.Tier(), bin.Key(), want.Key())
	}
	// A compile error keeps its status and log.
	_, err = c.CompileContext(context.Background(), "extern \"C\" __global__ void k() { nope; }", o)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusCompile || !strings.Contains(e.Log, "nope") {
		t.Fatalf("compile error: %v", err)
	}
}

func TestCompileContextThatEndedCompilesNothing(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	bin, err := c.CompileContext(ctx, saxpySource, testOptions(t))
	if bin != nil || !errors.Is(err, context.Canceled) || !errors.Is(err, StatusCancelled) {
		t.Fatalf("want a cancelled error, got %v, %v", bin, err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusCancelled {
		t.Fatalf("not an *Error with StatusCancelled: %#v", err)
	}
	st, err := cache.Stats()
	must(t, err)
	if st.Misses != 0 || st.Compiles != 0 {
		t.Fatalf("a cancelled context reached the cache: %+v", st)
	}
}

func TestCompileContextDeadlineCancelsTheCompile(t *testing.T) {
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c, err := NewCompiler(cache, 0)
	must(t, err)
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	bin, err := c.CompileContext(ctx, slowSource(1), o)
	if bin != nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, StatusTimeout) {
		t.Fatalf("want a deadline error, got %v, %v", bin, err)
	}
	// The compile was cancelled, not left to finish and fill the cache: Close waits for
	// the compiler's pending compiles, after which nothing was stored.
	must(t, c.Close())
	st, err := cache.Stats()
	must(t, err)
	if st.Stores != 0 {
		t.Fatalf("the abandoned compile was stored: %+v", st)
	}
}

// A compile that runs past its own time limit (worker mode) fails with StatusTimeout: that
// is the compile's result, not the context's deadline, which has not passed.
func TestCompileContextReportsTheCompilesOwnTimeLimit(t *testing.T) {
	t.Setenv("KJIT_COMPILE_TIMEOUT_S", "0.3") // read when the compiler is created
	t.Setenv("KJIT_COMPILE_MODE", "worker")
	c := newCompiler(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := c.CompileContext(ctx, slowSource(3), testOptions(t))
	if bin != nil || !errors.Is(err, StatusTimeout) {
		t.Fatalf("want the compile's time limit, got %v, %v", bin, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("the context's deadline was blamed: %v", err)
	}
	if !strings.Contains(err.Error(), "KJIT_COMPILE_TIMEOUT_S") {
		t.Fatalf("the message does not name the limit: %v", err)
	}
}

func TestWaitContextCancelsAndLeavesTheFutureToTheCaller(t *testing.T) {
	c := newCompiler(t, nil)
	f, err := c.CompileAsync(slowSource(2), testOptions(t))
	must(t, err)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	bin, err := f.WaitContext(ctx)
	if bin != nil || !errors.Is(err, context.Canceled) || !errors.Is(err, StatusCancelled) {
		t.Fatalf("want a cancelled error, got %v, %v", bin, err)
	}
	// The future is still the caller's: waiting again reports the cancelled compile.
	if _, err := f.Wait(-1); !errors.Is(err, StatusCancelled) {
		t.Fatalf("after WaitContext: %v", err)
	}
}

func TestWaitContextReturnsAResultThatIsReady(t *testing.T) {
	c := newCompiler(t, nil)
	f, err := c.CompileAsync(saxpySource, testOptions(t))
	must(t, err)
	defer f.Close()
	for !f.Ready() {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	bin, err := f.WaitContext(ctx)
	must(t, err)
	defer bin.Close()
	if bin.PTX() == "" {
		t.Fatal("no PTX")
	}
}

func TestEveryEnumHasAName(t *testing.T) {
	cases := []struct {
		v    fmt.Stringer
		want string
	}{
		{DiskOK, "ok"}, {DiskReadOnly, "read-only"}, {DiskDisabled, "disabled"},
		{DiskUnavailable, "unavailable"}, {DiskState(9), "DiskState(9)"},
		{TierCompiled, "compiled"}, {TierMemory, "memory"}, {TierDisk, "disk"},
		{TierRemote, "remote"}, {Tier(9), "Tier(9)"},
		{LoadCUBIN, "cubin"}, {LoadPTX, "ptx"}, {LoadPath(9), "LoadPath(9)"},
		{LogDebug, "debug"}, {LogInfo, "info"}, {LogWarn, "warn"}, {LogError, "error"},
		{LogLevel(9), "LogLevel(9)"},
		{OutputDefault, "default"}, {OutputPTX, "ptx"}, {OutputCUBIN, "cubin"},
		{OutputLTOIR, "ltoir"}, {OutputPTX | OutputCUBIN, "ptx|cubin"}, {Outputs(0x10), "0x10"},
		{KernelDefault, "default"}, {KernelNoReload, "no-reload"}, {KernelForcePTX, "force-ptx"},
		{KernelNoReload | KernelForcePTX | 8, "no-reload|force-ptx|0x8"},
	}
	for _, c := range cases {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T(%d).String() = %q, want %q", c.v, c.v, got, c.want)
		}
		// fmt uses it too (DiskState printed as 0 before).
		if got := fmt.Sprint(c.v); got != c.want {
			t.Errorf("fmt.Sprint(%T) = %q, want %q", c.v, got, c.want)
		}
	}
	// Status names come from kjit_status_string.
	for _, st := range []Status{StatusOK, StatusCompile, StatusTimeout, StatusInternal} {
		if got := fmt.Sprint(st); got != st.Error() || !strings.HasPrefix(got, "KJIT_") {
			t.Errorf("fmt.Sprint(Status(%d)) = %q", int(st), got)
		}
	}
	if s := fmt.Sprintf("%+v", CacheStats{DiskState: DiskUnavailable}); !strings.Contains(s, "DiskState:unavailable") {
		t.Errorf("CacheStats prints %s", s)
	}
}

// A program outside this directory uses the module through its published path and a
// replace directive pointing at this tree, as a build-tree user does.
func TestModuleResolvesThroughReplace(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH:", err)
	}
	here, err := os.Getwd()
	must(t, err)
	mod, err := os.ReadFile("go.mod")
	if errors.Is(err, os.ErrNotExist) {
		// go test runs in the package directory; a copied test binary may not.
		t.Skip("not run from the module's directory:", here)
	}
	must(t, err)
	if !strings.HasPrefix(string(mod), "module "+ModulePath+"\n") {
		t.Fatalf("go.mod does not declare %s:\n%s", ModulePath, mod)
	}
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/kjituser\n\ngo 1.19\n\nrequire %s v0.0.0\n\nreplace %s => %s\n",
		ModulePath, ModulePath, here)
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(`package main

import (
	"fmt"

	kjit "`+ModulePath+`"
)

func main() { fmt.Println(kjit.VersionString()) }
`), 0o644))
	cmd := exec.Command(goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run through replace: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != VersionString() {
		t.Fatalf("printed %q, want %q", got, VersionString())
	}
}
