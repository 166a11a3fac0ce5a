// Command launchoverhead measures launch enqueue cost through the Go bindings (needs a
// GPU):
//
//	go run ./examples/launchoverhead [-n launches]
//
// It prints microseconds per launch for an empty kernel and for saxpy with 4 arguments,
// through Launch (packs the arguments on every call) and LaunchPacked (a prepared buffer).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	kjit "github.com/kjit-dev/kjit/bindings/go"
	"github.com/kjit-dev/kjit/bindings/go/internal/cudadrv"
)

const saxpy = `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
`

func measure(label string, iters int, f func() error) {
	for i := 0; i < iters/10; i++ {
		if err := f(); err != nil {
			log.Fatal(err)
		}
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := f(); err != nil {
			log.Fatal(err)
		}
	}
	us := time.Since(start).Seconds() * 1e6 / float64(iters)
	fmt.Printf("%-28s %8.3f us/launch\n", label, us)
}

func main() {
	iters := flag.Int("n", 100000, "launches per measurement")
	flag.Parse()
	if n, err := kjit.DeviceCount(); err != nil || n == 0 {
		fmt.Fprintln(os.Stderr, "no CUDA device: nothing to measure", err)
		os.Exit(77)
	}
	if err := cudadrv.Open(); err != nil {
		log.Fatal(err)
	}
	c, err := kjit.NewCompiler(nil, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	empty, err := c.Kernel(`extern "C" __global__ void empty() {}`, "empty", nil, 0, kjit.KernelDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer empty.Close()
	k, err := c.Kernel(saxpy, "saxpy", nil, 0, kjit.KernelDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()
	const count = 1024
	buf := make([]float32, count)
	dx, _ := cudadrv.Upload(buf)
	dy, _ := cudadrv.Upload(buf)
	defer cudadrv.Free(dx)
	defer cudadrv.Free(dy)
	name, _ := kjit.DeviceName(0)
	fmt.Printf("device: %s | %d launches each\n", name, *iters)
	one := kjit.LaunchConfig{}
	cfg := kjit.ForElements(count, 256)
	measure("empty: Launch", *iters, func() error { return empty.Launch(one) })
	cudadrv.Synchronize()
	measure("saxpy: Launch", *iters, func() error {
		return k.Launch(cfg, int32(count), float32(2), kjit.DevicePtr(dx), kjit.DevicePtr(dy))
	})
	cudadrv.Synchronize()
	packed, err := k.Pack(int32(count), float32(2), kjit.DevicePtr(dx), kjit.DevicePtr(dy))
	if err != nil {
		log.Fatal(err)
	}
	measure("saxpy: LaunchPacked", *iters, func() error { return k.LaunchPacked(cfg, packed) })
	cudadrv.Synchronize()
}
