package kjit

// Launch paths. Without a CUDA driver or device the GPU tests are skipped with the
// reason; TestKernelWithoutGPUSaysCUDAUnavailable checks the no-GPU behaviour itself.

import (
	"errors"
	"sync"
	"testing"

	"github.com/kjit-dev/kjit/bindings/go/internal/cudadrv"
)

const launchN = 1000

func requireGPU(t *testing.T) {
	t.Helper()
	n, err := DeviceCount()
	if err != nil {
		if !errors.Is(err, StatusCUDAUnavailable) {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Skipf("no CUDA driver: %v", err)
	}
	if n == 0 {
		t.Skip("no CUDA device")
	}
	must(t, cudadrv.Open())
}

func saxpyData(t *testing.T) (x, y []float32, dx, dy uint64) {
	t.Helper()
	x = make([]float32, launchN)
	y = make([]float32, launchN)
	for i := range x {
		x[i] = float32(i)
		y[i] = 2 * float32(i)
	}
	var err error
	dx, err = cudadrv.Upload(x)
	must(t, err)
	dy, err = cudadrv.Upload(y)
	must(t, err)
	t.Cleanup(func() { cudadrv.Free(dx); cudadrv.Free(dy) })
	return
}

func checkSaxpy(t *testing.T, a float32, x, y0 []float32, dy uint64) {
	t.Helper()
	must(t, cudadrv.Synchronize())
	y, err := cudadrv.Download(dy, launchN)
	must(t, err)
	for i := range y {
		if y[i] != a*x[i]+y0[i] {
			t.Fatalf("element %d: %v, want %v", i, y[i], a*x[i]+y0[i])
		}
	}
}

func loadSaxpy(t *testing.T, flags KernelFlags) *Kernel {
	t.Helper()
	k, err := newCompiler(t, nil).Kernel(saxpySource, "saxpy", nil, 0, flags)
	must(t, err)
	t.Cleanup(func() { k.Close() })
	return k
}

func TestKernelWithoutGPUSaysCUDAUnavailable(t *testing.T) {
	c := newCompiler(t, nil)
	bin := compile(t, c, saxpySource, testOptions(t))
	_, derr := DeviceCount()
	k, err := c.Kernel(saxpySource, "saxpy", nil, 0, KernelDefault)
	if derr != nil {
		wantStatus(t, derr, StatusCUDAUnavailable)
		if derr.(*Error).Message == "" {
			t.Fatal("the message should say why")
		}
		wantStatus(t, err, StatusCUDAUnavailable)
		_, err = bin.Load("saxpy", 0, KernelDefault)
		wantStatus(t, err, StatusCUDAUnavailable)
		t.Logf("no CUDA driver here (%v); GPU launch tests skip", derr)
		return
	}
	must(t, err)
	k.Close()
	name, err := DeviceName(0)
	must(t, err)
	arch, err := DeviceArch(0)
	must(t, err)
	v, err := DriverVersion()
	must(t, err)
	if name == "" || arch[:3] != "sm_" || v <= 0 {
		t.Fatal(name, arch, v)
	}
}

func TestSaxpyLaunch(t *testing.T) {
	requireGPU(t)
	k := loadSaxpy(t, KernelDefault)
	if k.Symbol() != "saxpy" || k.LoadPath() != LoadCUBIN {
		t.Fatal(k.Symbol(), k.LoadPath())
	}
	want := []Param{{0, 4}, {4, 4}, {8, 8}, {16, 8}}
	got := k.Params()
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatal(got)
	}
	x, y0, dx, dy := saxpyData(t)
	must(t, k.Launch(ForElements(launchN, 128), int32(launchN), float32(3), DevicePtr(dx), DevicePtr(dy)))
	checkSaxpy(t, 3, x, y0, dy)
}

func TestSaxpyLaunchPacked(t *testing.T) {
	requireGPU(t)
	k := loadSaxpy(t, KernelDefault)
	size, err := k.ParamBufferSize()
	must(t, err)
	if size != 24 {
		t.Fatal(size)
	}
	x, y0, dx, dy := saxpyData(t)
	buf, err := k.Pack(int32(launchN), float32(0.5), DevicePtr(dx), DevicePtr(dy))
	must(t, err)
	must(t, k.LaunchPacked(ForElements(launchN, 256), buf))
	checkSaxpy(t, 0.5, x, y0, dy)
	wantStatus(t, k.LaunchPacked(LaunchConfig{}, buf[:20]), StatusArgumentMismatch)
	wantStatus(t, k.Launch(LaunchConfig{}, int32(1), float32(1), DevicePtr(0)), StatusArgumentMismatch)
	wantStatus(t, k.Launch(LaunchConfig{}, int64(1), float32(1), DevicePtr(0), DevicePtr(0)), StatusArgumentMismatch)
}

func TestKernelAttributesAndBinaryLoad(t *testing.T) {
	requireGPU(t)
	arch, err := DeviceArch(0)
	must(t, err)
	o, err := NewOptions()
	must(t, err)
	defer o.Close()
	must(t, o.SetTarget(arch))
	c := newCompiler(t, nil)
	bin := compile(t, c, saxpySource, o)
	k, err := bin.Load("saxpy", 0, KernelDefault)
	must(t, err)
	defer k.Close()
	bin.Close()
	a, err := k.Attributes()
	must(t, err)
	if a.MaxThreadsPerBlock <= 0 || a.NumRegs <= 0 {
		t.Fatalf("%+v", a)
	}
	occ, err := k.Occupancy(256, 0)
	must(t, err)
	g, b, err := k.SuggestBlockSize(0)
	must(t, err)
	if occ <= 0 || g <= 0 || b <= 0 {
		t.Fatal(occ, g, b)
	}
	must(t, k.SetMaxDynamicShared(1024))
	ptx, err := c.Kernel(saxpySource, "saxpy", o, 0, KernelForcePTX)
	must(t, err)
	defer ptx.Close()
	if ptx.LoadPath() != LoadPTX {
		t.Fatal(ptx.LoadPath())
	}
}

func TestConcurrentLaunchesOfOneKernel(t *testing.T) {
	requireGPU(t)
	k := loadSaxpy(t, KernelDefault)
	x, y0, dx, _ := saxpyData(t)
	ys := make([]uint64, 4)
	for i := range ys {
		d, err := cudadrv.Upload(y0)
		must(t, err)
		ys[i] = d
		defer cudadrv.Free(d)
	}
	var wg sync.WaitGroup
	for _, dy := range ys {
		wg.Add(1)
		go func(dy uint64) {
			defer wg.Done()
			if err := k.Launch(ForElements(launchN, 128), int32(launchN), float32(2), DevicePtr(dx), DevicePtr(dy)); err != nil {
				t.Error(err)
			}
		}(dy)
	}
	wg.Wait()
	for _, dy := range ys {
		checkSaxpy(t, 2, x, y0, dy)
	}
}
