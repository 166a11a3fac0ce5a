// Command saxpy compiles saxpy through the machine's kjit cache and, when a GPU is
// present, runs it:
//
//	go run ./examples/saxpy
//
// The cache is $KJIT_CACHE_DIR (or the default location); run it twice to see the second
// run hit the disk tier.
package main

import (
	"fmt"
	"log"

	kjit "github.com/kjit-dev/kjit/bindings/go"
	"github.com/kjit-dev/kjit/bindings/go/internal/cudadrv"
)

const saxpy = `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
`

func main() {
	cache, err := kjit.OpenCache(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	compiler, err := kjit.NewCompiler(cache, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer compiler.Close()

	opts, err := kjit.NewOptions()
	if err != nil {
		log.Fatal(err)
	}
	defer opts.Close()
	if err := opts.Add("-std=c++17"); err != nil {
		log.Fatal(err)
	}
	n, derr := kjit.DeviceCount()
	gpu := derr == nil && n > 0
	if !gpu {
		// Target "auto" needs a driver; compile for an explicit architecture instead.
		if err := opts.SetTarget("sm_80"); err != nil {
			log.Fatal(err)
		}
	}
	bin, err := compiler.Compile(saxpy, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer bin.Close()
	fmt.Printf("kjit %s | saxpy for %s from %s (key %s…), %d bytes of PTX, cache at %s\n",
		kjit.VersionString(), bin.Target(), bin.Tier(), bin.Key()[:12], len(bin.PTX()), cache.Dir())
	if !gpu {
		fmt.Printf("no CUDA device here: compiled only (%v)\n", derr)
		return
	}

	if err := cudadrv.Open(); err != nil {
		log.Fatal(err)
	}
	k, err := bin.Load("saxpy", 0, kjit.KernelDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()
	const count = 1 << 20
	x := make([]float32, count)
	y := make([]float32, count)
	for i := range x {
		x[i], y[i] = float32(i), 1
	}
	dx, err := cudadrv.Upload(x)
	if err != nil {
		log.Fatal(err)
	}
	defer cudadrv.Free(dx)
	dy, err := cudadrv.Upload(y)
	if err != nil {
		log.Fatal(err)
	}
	defer cudadrv.Free(dy)
	const a = float32(2)
	if err := k.Launch(kjit.ForElements(count, 256), int32(count), a, kjit.DevicePtr(dx), kjit.DevicePtr(dy)); err != nil {
		log.Fatal(err)
	}
	if err := cudadrv.Synchronize(); err != nil {
		log.Fatal(err)
	}
	out, err := cudadrv.Download(dy, count)
	if err != nil {
		log.Fatal(err)
	}
	bad := 0
	for i := range out {
		if out[i] != a*x[i]+y[i] {
			bad++
		}
	}
	name, _ := kjit.DeviceName(0)
	fmt.Printf("launched %d threads on %s: %d wrong results\n", count, name, bad)
	if bad != 0 {
		log.Fatal("wrong results")
	}
}
