/*
 * example_cuda.h — the few CUDA Driver API calls the examples need for device memory,
 * resolved at run time with dlopen("libcuda.so.1") so that the examples build without a
 * CUDA toolkit and run (skipping their GPU part) without a driver.
 *
 * kjit itself needs none of this: a real program allocates memory with whatever it
 * already uses (the CUDA runtime, PyTorch, CuPy, CUDA.jl...) and passes the pointers to
 * kjit_kernel_launch*. kjit launches in the device's primary context, which is the one
 * the CUDA runtime uses, so the pointers are valid there.
 */
#ifndef KJIT_EXAMPLE_CUDA_H
#define KJIT_EXAMPLE_CUDA_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int ex_cu_result;                /* CUresult */
typedef unsigned long long ex_cu_devptr; /* CUdeviceptr */

typedef struct example_cuda {
  void* lib;
  void* ctx;
  ex_cu_result (*init)(unsigned);
  ex_cu_result (*device_get)(int*, int);
  ex_cu_result (*primary_retain)(void**, int);
  ex_cu_result (*primary_release)(int);
  ex_cu_result (*ctx_set_current)(void*);
  ex_cu_result (*ctx_synchronize)(void);
  ex_cu_result (*mem_alloc)(ex_cu_devptr*, size_t);
  ex_cu_result (*mem_free)(ex_cu_devptr);
  ex_cu_result (*htod)(ex_cu_devptr, const void*, size_t);
  ex_cu_result (*dtoh)(void*, ex_cu_devptr, size_t);
  int device;
} example_cuda;

/* dlsym returns void*; converting it to a function pointer goes through memcpy, which
 * ISO C allows. */
static int example_cuda_sym(void* lib, const char* name, void* fn_ptr_out, size_t size) {
  void* sym = dlsym(lib, name);
  if (!sym) {
    fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
    return 0;
  }
  memcpy(fn_ptr_out, &sym, size);
  return 1;
}

#define EXAMPLE_CUDA_SYM(cu, field, name) \
  example_cuda_sym((cu)->lib, name, &(cu)->field, sizeof((cu)->field))

/* Opens libcuda, retains device 0's primary context and makes it current. 0 on success. */
static int example_cuda_open(example_cuda* cu, int device) {
  int dev = 0;
  memset(cu, 0, sizeof *cu);
  cu->device = device;
  cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu->lib) {
    fprintf(stderr, "cannot open libcuda.so.1: %s\n", dlerror());
    return -1;
  }
  if (!EXAMPLE_CUDA_SYM(cu, init, "cuInit") || !EXAMPLE_CUDA_SYM(cu, device_get, "cuDeviceGet") ||
      !EXAMPLE_CUDA_SYM(cu, primary_retain, "cuDevicePrimaryCtxRetain") ||
      !EXAMPLE_CUDA_SYM(cu, primary_release, "cuDevicePrimaryCtxRelease_v2") ||
      !EXAMPLE_CUDA_SYM(cu, ctx_set_current, "cuCtxSetCurrent") ||
      !EXAMPLE_CUDA_SYM(cu, ctx_synchronize, "cuCtxSynchronize") ||
      !EXAMPLE_CUDA_SYM(cu, mem_alloc, "cuMemAlloc_v2") ||
      !EXAMPLE_CUDA_SYM(cu, mem_free, "cuMemFree_v2") ||
      !EXAMPLE_CUDA_SYM(cu, htod, "cuMemcpyHtoD_v2") ||
      !EXAMPLE_CUDA_SYM(cu, dtoh, "cuMemcpyDtoH_v2")) {
    return -1;
  }
  if (cu->init(0) != 0 || cu->device_get(&dev, device) != 0 ||
      cu->primary_retain(&cu->ctx, dev) != 0 || cu->ctx_set_current(cu->ctx) != 0) {
    fprintf(stderr, "cannot set up device %d's primary context\n", device);
    return -1;
  }
  cu->device = dev;
  return 0;
}

static void example_cuda_close(example_cuda* cu) {
  if (cu->ctx) cu->primary_release(cu->device);
  if (cu->lib) dlclose(cu->lib);
  memset(cu, 0, sizeof *cu);
}

#endif /* KJIT_EXAMPLE_CUDA_H */
