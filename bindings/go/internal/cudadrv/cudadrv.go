// Package cudadrv is just enough of the CUDA driver API for the tests and examples to
// allocate, copy and synchronise. libcuda.so.1 is opened with dlopen, so nothing links
// against it and programs start on machines without a driver.
package cudadrv

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>

typedef int (*fn_init)(unsigned);
typedef int (*fn_device_get)(int*, int);
typedef int (*fn_retain)(void**, int);
typedef int (*fn_set_current)(void*);
typedef int (*fn_alloc)(uint64_t*, size_t);
typedef int (*fn_free)(uint64_t);
typedef int (*fn_htod)(uint64_t, const void*, size_t);
typedef int (*fn_dtoh)(void*, uint64_t, size_t);
typedef int (*fn_sync)(void);

static struct {
  fn_init init; fn_device_get device_get; fn_retain retain; fn_set_current set_current;
  fn_alloc alloc; fn_free free; fn_htod htod; fn_dtoh dtoh; fn_sync sync;
  void* ctx;
} cu;

// 0 on success, -1 when libcuda.so.1 or a symbol is missing, else a CUresult.
static int cu_open(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return -1;
  cu.init = (fn_init)dlsym(lib, "cuInit");
  cu.device_get = (fn_device_get)dlsym(lib, "cuDeviceGet");
  cu.retain = (fn_retain)dlsym(lib, "cuDevicePrimaryCtxRetain");
  cu.set_current = (fn_set_current)dlsym(lib, "cuCtxSetCurrent");
  cu.alloc = (fn_alloc)dlsym(lib, "cuMemAlloc_v2");
  cu.free = (fn_free)dlsym(lib, "cuMemFree_v2");
  cu.htod = (fn_htod)dlsym(lib, "cuMemcpyHtoD_v2");
  cu.dtoh = (fn_dtoh)dlsym(lib, "cuMemcpyDtoH_v2");
  cu.sync = (fn_sync)dlsym(lib, "cuCtxSynchronize");
  if (!cu.init || !cu.device_get || !cu.retain || !cu.set_current || !cu.alloc || !cu.free ||
      !cu.htod || !cu.dtoh || !cu.sync) return -1;
  int r = cu.init(0);
  if (r) return r;
  int dev = 0;
  if ((r = cu.device_get(&dev, 0))) return r;
  if ((r = cu.retain(&cu.ctx, dev))) return r;
  return cu.set_current(cu.ctx);
}
static int cu_make_current(void) { return cu.set_current(cu.ctx); }

// Other devices' primary contexts, retained by cu_open_device.
#define CU_MAX_DEVICES 64
static void* cu_ctxs[CU_MAX_DEVICES];
static int cu_open_device(int ordinal) {
  if (ordinal < 0 || ordinal >= CU_MAX_DEVICES) return -2;
  if (cu_ctxs[ordinal]) return 0;
  int dev = 0, r;
  if ((r = cu.device_get(&dev, ordinal))) return r;
  return cu.retain(&cu_ctxs[ordinal], dev);
}
static int cu_alloc_on(int o, uint64_t* p, size_t n) { int r = cu.set_current(cu_ctxs[o]); return r ? r : cu.alloc(p, n); }
static int cu_free_on(int o, uint64_t p) { int r = cu.set_current(cu_ctxs[o]); return r ? r : cu.free(p); }
static int cu_htod_on(int o, uint64_t d, const void* h, size_t n) { int r = cu.set_current(cu_ctxs[o]); return r ? r : cu.htod(d, h, n); }
static int cu_dtoh_on(int o, void* h, uint64_t d, size_t n) { int r = cu.set_current(cu_ctxs[o]); return r ? r : cu.dtoh(h, d, n); }
static int cu_sync_on(int o) { int r = cu.set_current(cu_ctxs[o]); return r ? r : cu.sync(); }
static int cu_alloc(uint64_t* p, size_t n) { int r = cu.set_current(cu.ctx); return r ? r : cu.alloc(p, n); }
static int cu_free(uint64_t p) { return cu.free(p); }
static int cu_htod(uint64_t d, const void* h, size_t n) { int r = cu.set_current(cu.ctx); return r ? r : cu.htod(d, h, n); }
static int cu_dtoh(void* h, uint64_t d, size_t n) { int r = cu.set_current(cu.ctx); return r ? r : cu.dtoh(h, d, n); }
static int cu_sync(void) { int r = cu.set_current(cu.ctx); return r ? r : cu.sync(); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	once    sync.Once
	openErr error
)

// Open loads the driver and retains device 0's primary context (the one kjit uses).
func Open() error {
	once.Do(func() {
		if r := C.cu_open(); r != 0 {
			openErr = fmt.Errorf("CUDA driver setup failed (%d)", int(r))
		}
	})
	return openErr
}

func check(r C.int, what string) error {
	if r != 0 {
		return fmt.Errorf("%s failed with CUresult %d", what, int(r))
	}
	return nil
}

// Upload copies data into new device memory and returns its address.
func Upload(data []float32) (uint64, error) {
	var d C.uint64_t
	n := C.size_t(len(data) * 4)
	if err := check(C.cu_alloc(&d, n), "cuMemAlloc"); err != nil {
		return 0, err
	}
	if len(data) > 0 {
		if err := check(C.cu_htod(d, unsafe.Pointer(&data[0]), n), "cuMemcpyHtoD"); err != nil {
			return 0, err
		}
	}
	return uint64(d), nil
}

// Download copies n floats from device memory.
func Download(d uint64, n int) ([]float32, error) {
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	err := check(C.cu_dtoh(unsafe.Pointer(&out[0]), C.uint64_t(d), C.size_t(n*4)), "cuMemcpyDtoH")
	return out, err
}

// Free releases device memory.
func Free(d uint64) error { return check(C.cu_free(C.uint64_t(d)), "cuMemFree") }

// Synchronize waits for the context's work.
func Synchronize() error { return check(C.cu_sync(), "cuCtxSynchronize") }

// Device is the primary context of one device (retained, as kjit retains it); each call
// makes it current on the calling thread first.
type Device struct{ ordinal C.int }

var deviceMu sync.Mutex

// OpenDevice loads the driver and retains device `ordinal`'s primary context.
func OpenDevice(ordinal int) (*Device, error) {
	if err := Open(); err != nil {
		return nil, err
	}
	deviceMu.Lock()
	defer deviceMu.Unlock()
	if err := check(C.cu_open_device(C.int(ordinal)), fmt.Sprintf("opening device %d", ordinal)); err != nil {
		return nil, err
	}
	return &Device{C.int(ordinal)}, nil
}

// Upload copies data into new memory of the device and returns its address.
func (d *Device) Upload(data []float32) (uint64, error) {
	var p C.uint64_t
	n := C.size_t(len(data) * 4)
	if err := check(C.cu_alloc_on(d.ordinal, &p, n), "cuMemAlloc"); err != nil {
		return 0, err
	}
	if len(data) > 0 {
		if err := check(C.cu_htod_on(d.ordinal, p, unsafe.Pointer(&data[0]), n), "cuMemcpyHtoD"); err != nil {
			return 0, err
		}
	}
	return uint64(p), nil
}

// Download copies n floats from the device's memory.
func (d *Device) Download(p uint64, n int) ([]float32, error) {
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	err := check(C.cu_dtoh_on(d.ordinal, unsafe.Pointer(&out[0]), C.uint64_t(p), C.size_t(n*4)), "cuMemcpyDtoH")
	return out, err
}

// Free releases memory of the device.
func (d *Device) Free(p uint64) error { return check(C.cu_free_on(d.ordinal, C.uint64_t(p)), "cuMemFree") }

// Synchronize waits for the device's primary context.
func (d *Device) Synchronize() error { return check(C.cu_sync_on(d.ordinal), "cuCtxSynchronize") }
