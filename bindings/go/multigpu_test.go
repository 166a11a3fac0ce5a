package kjit

// Two devices in one process: one compile, a kernel handle per device, launches on both.
// Skipped with the reason without two CUDA devices.

import (
	"runtime"
	"testing"

	"github.com/kjit-dev/kjit/bindings/go/internal/cudadrv"
)

func TestTwoDevicesCompileOnceLaunchOnBoth(t *testing.T) {
	requireGPU(t)
	n, err := DeviceCount()
	must(t, err)
	if n < 2 {
		t.Skipf("needs two CUDA devices; this machine has %d", n)
	}
	arch0, err := DeviceArch(0)
	must(t, err)
	arch1, err := DeviceArch(1)
	must(t, err)
	cache := openCache(t, &CacheOptions{Dir: t.TempDir()})
	c := newCompiler(t, cache)
	var k [2]*Kernel
	for d := range k {
		k[d], err = c.Kernel(saxpySource, "saxpy", nil, d, KernelDefault)
		must(t, err)
		defer k[d].Close()
	}
	s, err := cache.Stats()
	must(t, err)
	if arch0 == arch1 && (s.Compiles != 1 || s.MemoryHits != 1) {
		t.Fatalf("device 1 must reuse device 0's compile: %d compiles, %d memory hits", s.Compiles, s.MemoryHits)
	}
	if arch0 != arch1 && s.Compiles != 2 {
		t.Fatalf("%s and %s: want two compiles, got %d", arch0, arch1, s.Compiles)
	}

	// One OS thread for the launches, whatever context it has current (device 1's,
	// after opening it last): kjit launches each kernel in its own device's context.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var dev [2]*cudadrv.Device
	var dx, dy [2]uint64
	x := make([]float32, launchN)
	y0 := make([]float32, launchN)
	for i := range x {
		x[i] = float32(i)
		y0[i] = 0.5 * float32(i)
	}
	for d := range dev {
		dev[d], err = cudadrv.OpenDevice(d)
		must(t, err)
		dx[d], err = dev[d].Upload(x)
		must(t, err)
		dy[d], err = dev[d].Upload(y0)
		must(t, err)
		defer dev[d].Free(dx[d])
		defer dev[d].Free(dy[d])
	}
	for d := range k {
		a := float32(2 + d)
		must(t, k[d].Launch(ForElements(launchN, 128), int32(launchN), a, DevicePtr(dx[d]), DevicePtr(dy[d])))
	}
	for d := range dev {
		must(t, dev[d].Synchronize())
		y, err := dev[d].Download(dy[d], launchN)
		must(t, err)
		a := float32(2 + d)
		for i := range y {
			if y[i] != a*x[i]+y0[i] {
				t.Fatalf("device %d, element %d: %v, want %v", d, i, y[i], a*x[i]+y0[i])
			}
		}
	}
}
