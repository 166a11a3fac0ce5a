package kjit

// Header edits and the cache: a hit is never stale after a header changes, and a compile
// that reads a file the cache key does not cover is not stored. These run without a GPU.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const headerKernel = "extern \"C\" __global__ void k(int* out) { out[0] = V; }\n"

// ptxOptions compiles PTX for sm_90 (no GPU needed) with program name name ("" keeps the
// default name).
func ptxOptions(t *testing.T, name string) *Options {
	t.Helper()
	o, err := NewOptions()
	must(t, err)
	t.Cleanup(func() { o.Close() })
	must(t, o.SetTarget("sm_90"))
	must(t, o.SetOutputs(OutputPTX))
	if name != "" {
		must(t, o.SetName(name))
	}
	return o
}

// rewriteKeepingSizeAndMtime rewrites path with contents of the same size and puts its
// modification time back: only the bytes (and the inode's change time) differ afterwards.
func rewriteKeepingSizeAndMtime(t *testing.T, path, contents string) {
	t.Helper()
	before, err := os.Stat(path)
	must(t, err)
	if before.Size() != int64(len(contents)) {
		t.Fatalf("%q is not %d bytes like %s", contents, before.Size(), path)
	}
	must(t, os.WriteFile(path, []byte(contents), 0o600))
	must(t, os.Chtimes(path, before.ModTime(), before.ModTime()))
	after, err := os.Stat(path)
	must(t, err)
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("size or mtime changed: %v %v -> %v %v", before.Size(), before.ModTime(),
			after.Size(), after.ModTime())
	}
}

// wantValue checks that the PTX holds want and none of the other values V takes here.
func wantValue(t *testing.T, b *Binary, want string) {
	t.Helper()
	ptx := b.PTX()
	for _, v := range []string{"111", "222", "33333"} {
		if strings.Contains(ptx, v) != (v == want) {
			t.Fatalf("V = %s expected:\n%s", want, ptx)
		}
	}
}

// checkHeaderEdits compiles source (which includes header) through a fresh cache while the
// header changes: a hit first, then an edit that keeps the size and modification time,
// then one that changes the size. Every edit must be a miss with the new value.
func checkHeaderEdits(t *testing.T, header, source string, o *Options) {
	dir := t.TempDir()
	cache := openCache(t, &CacheOptions{Dir: dir})
	c := newCompiler(t, cache)

	first := compile(t, c, source, o)
	if first.Tier() != TierCompiled {
		t.Fatal("first compile:", first.Tier())
	}
	wantValue(t, first, "111")
	hit := compile(t, c, source, o)
	if hit.Tier() != TierMemory {
		t.Fatal("second compile:", hit.Tier())
	}
	wantValue(t, hit, "111")

	rewriteKeepingSizeAndMtime(t, header, "#define V 222\n")
	edited := compile(t, c, source, o)
	if edited.Tier() != TierCompiled || edited.Key() == first.Key() {
		t.Fatal("same size and mtime: stale hit from", edited.Tier())
	}
	wantValue(t, edited, "222")

	must(t, os.WriteFile(header, []byte("#define V 33333\n"), 0o600))
	resized := compile(t, c, source, o)
	if resized.Tier() != TierCompiled {
		t.Fatal("new size: stale hit from", resized.Tier())
	}
	wantValue(t, resized, "33333")

	s, err := cache.Stats()
	must(t, err)
	if s.Compiles != 3 || s.Stores != 3 || s.NotStored != 0 {
		t.Fatalf("%+v", s)
	}

	// Another handle on the same database: the current header's entry, from disk.
	again := compile(t, newCompiler(t, openCache(t, &CacheOptions{Dir: dir})), source, o)
	if again.Tier() != TierDisk {
		t.Fatal("other handle:", again.Tier())
	}
	wantValue(t, again, "33333")
}

// Not parallel (no t.Parallel here or anywhere in the package): one case changes the
// process's working directory.
func TestHeaderEditsAreNeverServedStale(t *testing.T) {
	root := t.TempDir()
	source := "#include \"h.h\"\n" + headerKernel
	cases := []struct {
		name, dir, source string
		opts              func(t *testing.T, dir string) *Options
		chdir             bool
	}{
		{"absolute program name", "abs", source, func(t *testing.T, dir string) *Options {
			return ptxOptions(t, filepath.Join(dir, "k.cu"))
		}, false},
		{"default name in the working directory", "cwd", source, func(t *testing.T, dir string) *Options {
			return ptxOptions(t, "")
		}, true},
		{"angle include through -I", "inc", "#include <h.h>\n" + headerKernel, func(t *testing.T, dir string) *Options {
			o := ptxOptions(t, "")
			must(t, o.Add("-I"+dir))
			return o
		}, false},
	}
	for _, tc := range cases {
		dir := filepath.Join(root, tc.dir)
		must(t, os.Mkdir(dir, 0o700))
		must(t, os.WriteFile(filepath.Join(dir, "k.cu"), []byte(tc.source), 0o600))
		must(t, os.WriteFile(filepath.Join(dir, "h.h"), []byte("#define V 111\n"), 0o600))
	}
	// kjit remembers a header's contents while stat() says it is unchanged and it was last
	// changed at least 2 s before it was read; let the headers settle so that the first
	// compile leaves such a memo for the same-size, same-mtime edit to fool.
	time.Sleep(2500 * time.Millisecond)
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, tc.dir)
			if tc.chdir {
				wd, err := os.Getwd()
				must(t, err)
				must(t, os.Chdir(dir))
				t.Cleanup(func() { must(t, os.Chdir(wd)) })
			}
			checkHeaderEdits(t, filepath.Join(dir, "h.h"), tc.source, tc.opts(t, dir))
		})
	}
}

// NVRTC looks for ../other/h.h relative to the source's directory, which a computed
// include hides from kjit's scan: the key comes from what NVRTC read, so the result is
// stored, hit next time, and an edit of the header is a miss with the new code.
func TestReadTheScanCannotForeseeIsInTheKey(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "src"), 0o700))
	must(t, os.Mkdir(filepath.Join(root, "other"), 0o700))
	must(t, os.WriteFile(filepath.Join(root, "other", "h.h"), []byte("#define V 111\n"), 0o600))
	source := "#define STR(x) #x\n#include STR(../other/h.h)\n" + headerKernel
	k := filepath.Join(root, "src", "k.cu")
	must(t, os.WriteFile(k, []byte(source), 0o600))
	o := ptxOptions(t, k)

	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	b := compile(t, c, source, o)
	if b.Tier() != TierCompiled {
		t.Fatalf("first compile: %v", b.Tier())
	}
	wantValue(t, b, "111")
	s, err := cache.Stats()
	must(t, err)
	if s.Compiles != 1 || s.NotStored != 0 || s.Stores != 1 {
		t.Fatalf("after the first compile: %+v", s)
	}
	if b = compile(t, c, source, o); b.Tier() == TierCompiled {
		t.Fatalf("the stored result was not used")
	}
	wantValue(t, b, "111")
	must(t, os.WriteFile(filepath.Join(root, "other", "h.h"), []byte("#define V 222\n"), 0o600))
	if b = compile(t, c, source, o); b.Tier() != TierCompiled {
		t.Fatalf("an edit of the header was not seen: %v", b.Tier())
	}
	wantValue(t, b, "222")
}

// The toolkit's headers need no include option; turned off, NVRTC cannot find them.
func TestToolkitHeadersWithoutIncludeOptions(t *testing.T) {
	c := newCompiler(t, nil)
	source := "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half* p) { *p = __float2half(1.0f); }\n"
	on := ptxOptions(t, "")
	must(t, on.SetPCH(false))
	b := compile(t, c, source, on)
	if !strings.Contains(b.PTX(), ".entry k") {
		t.Fatalf("no kernel in the PTX")
	}
	off := ptxOptions(t, "")
	must(t, off.SetToolkit(""))
	if _, err := c.Compile(source, off); err == nil || !strings.Contains(err.Error(), "cuda_fp16.h") {
		t.Fatalf("without the toolkit: %v", err)
	}
	must(t, off.UseDefaultToolkit())
	compile(t, c, source, off)
}
