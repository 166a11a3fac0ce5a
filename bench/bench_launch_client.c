/* An independent client of the first completed launch: a plain C program that uses kjit
 * only through its public header, as an application would, and reaches CUDA through its
 * own dlopen of the driver (nothing of kjit's is loaded or warmed before its clock).
 *
 *   bench_launch_client <cache dir> <saxpy|block_sum> [include dir] [--prewarm]
 *
 * CUDA is initialised first (cuInit, the primary context made current, the buffers), as
 * bench_launch's children do; the clock then covers kjit_cache_open, kjit_compiler_create,
 * the options, kjit_kernel_create (a disk hit of the cache bench_launch made), the launch
 * and cuCtxSynchronize. --prewarm calls kjit_driver_version() before the clock, so that
 * kjit's own opening of the driver is not timed: what bench_launch's children do, since
 * they initialise CUDA through kjit's driver table. Prints one line:
 *   RESULT <total ms> open=<ms> create=<ms> launch=<ms> disk_hits=<n> compiles=<n>
 * bench_launch runs it beside its own children when it lies next to it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit/kjit.h"

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int*, int);
typedef int (*cu_retain_t)(void**, int);
typedef int (*cu_set_current_t)(void*);
typedef int (*cu_mem_alloc_t)(unsigned long long*, size_t);
typedef int (*cu_memset_t)(unsigned long long, unsigned char, size_t);
typedef int (*cu_sync_t)(void);

static const char* const kSaxpy =
    "\n"
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static const char* const kCub =
    "\n"
    "#include <cub/block/block_reduce.cuh>\n"
    "extern \"C\" __global__ void block_sum(const float* in, float* out, int n) {\n"
    "  using BlockReduce = cub::BlockReduce<float, 256>;\n"
    "  __shared__ typename BlockReduce::TempStorage temp;\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  float v = i < n ? in[i] : 0.0f;\n"
    "  float sum = BlockReduce(temp).Sum(v);\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = sum;\n"
    "}\n";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char* what) {
  fprintf(stderr, "bench_launch_client: %s\n", what);
  exit(1);
}

static void kj(kjit_status st, const char* what) {
  if (st != KJIT_OK) {
    fprintf(stderr, "bench_launch_client: %s: %s\n", what, kjit_last_error());
    exit(1);
  }
}

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) die(name);
  return p;
}

int main(int argc, char** argv) {
  if (argc < 3)
    die("usage: bench_launch_client <cache dir> <saxpy|block_sum> [include] [--prewarm]");
  const char* dir = argv[1];
  const int cub = strcmp(argv[2], "block_sum") == 0;
  if (!cub && strcmp(argv[2], "saxpy") != 0) die("unknown kernel");
  const char* include = NULL;
  int prewarm = 0;
  for (int i = 3; i < argc; ++i) {
    if (strcmp(argv[i], "--prewarm") == 0) {
      prewarm = 1;
    } else {
      include = argv[i];
    }
  }
  if (cub && !include) die("block_sum needs the CCCL include directory");

  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) die("cannot open libcuda.so.1");
  cu_init_t cu_init = (cu_init_t)sym(cuda, "cuInit");
  cu_device_get_t cu_device_get = (cu_device_get_t)sym(cuda, "cuDeviceGet");
  cu_retain_t cu_retain = (cu_retain_t)sym(cuda, "cuDevicePrimaryCtxRetain");
  cu_set_current_t cu_set_current = (cu_set_current_t)sym(cuda, "cuCtxSetCurrent");
  cu_mem_alloc_t cu_mem_alloc = (cu_mem_alloc_t)sym(cuda, "cuMemAlloc_v2");
  cu_memset_t cu_memset = (cu_memset_t)sym(cuda, "cuMemsetD8_v2");
  cu_sync_t cu_sync = (cu_sync_t)sym(cuda, "cuCtxSynchronize");
  int dev = 0;
  void* ctx = NULL;
  if (cu_init(0) || cu_device_get(&dev, 0) || cu_retain(&ctx, dev) || cu_set_current(ctx)) {
    die("CUDA initialisation failed");
  }
  int n = 1 << 20;
  unsigned long long a = 0, b = 0;
  if (cu_mem_alloc(&a, (size_t)n * 4) || cu_mem_alloc(&b, (size_t)n * 4) ||
      cu_memset(a, 0, (size_t)n * 4) || cu_memset(b, 0, (size_t)n * 4) || cu_sync()) {
    die("buffers");
  }
  float alpha = 2.0f;
  void* saxpy_args[4] = {&alpha, &a, &b, &n};
  void* cub_args[3] = {&a, &b, &n};
  /* --prewarm: kjit opens the driver before the clock (driver_open=, its time), then what
   * that does is done again here, each timed, for scale: the entry points kjit resolves
   * (53) looked up through cuGetProcAddress (getproc=) and dlsym (dlsym=), the library
   * opened again (dlopen_again=), cuInit again (init_again=). Before all that, the
   * process's first cuGetProcAddress (getproc_first=). */
  double driver_open = 0, getproc = 0, dlsym_ms = 0, dlopen_again = 0, init_again = 0,
         getproc_first = 0;
  if (prewarm) {
    /* The process's first cuGetProcAddress, before kjit's (getproc_first=). */
    typedef int (*get_proc_t)(const char*, void**, int, unsigned long long, int*);
    get_proc_t get_proc = (get_proc_t)sym(cuda, "cuGetProcAddress_v2");
    {
      void* fn = NULL;
      int found = 0;
      const double f0 = now_ms();
      get_proc("cuModuleLoadData", &fn, 12000, 1, &found);
      getproc_first = now_ms() - f0;
    }
    int version = 0;
    const double p0 = now_ms();
    kj(kjit_driver_version(&version), "kjit_driver_version");
    driver_open = now_ms() - p0;
    static const char* const names[] = {"cuGetErrorName",
                                        "cuGetErrorString",
                                        "cuDriverGetVersion",
                                        "cuDeviceGet",
                                        "cuDeviceGetCount",
                                        "cuDeviceGetName",
                                        "cuDeviceGetAttribute",
                                        "cuDevicePrimaryCtxRetain",
                                        "cuDevicePrimaryCtxRelease",
                                        "cuDevicePrimaryCtxReset",
                                        "cuDevicePrimaryCtxGetState",
                                        "cuCtxGetCurrent",
                                        "cuCtxSetCurrent",
                                        "cuCtxPushCurrent",
                                        "cuCtxPopCurrent",
                                        "cuCtxGetDevice",
                                        "cuCtxGetId",
                                        "cuCtxSynchronize",
                                        "cuModuleLoadData",
                                        "cuModuleLoadDataEx",
                                        "cuModuleUnload",
                                        "cuModuleGetFunction",
                                        "cuFuncGetAttribute",
                                        "cuFuncSetAttribute",
                                        "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                        "cuOccupancyMaxPotentialBlockSize",
                                        "cuLaunchKernel",
                                        "cuLaunchKernelEx",
                                        "cuMemAlloc",
                                        "cuMemFree",
                                        "cuMemsetD8",
                                        "cuMemcpyHtoD",
                                        "cuMemcpyDtoH",
                                        "cuMemcpyHtoDAsync",
                                        "cuMemcpyDtoHAsync",
                                        "cuStreamCreate",
                                        "cuStreamDestroy",
                                        "cuStreamSynchronize",
                                        "cuStreamGetCtx",
                                        "cuEventCreate",
                                        "cuEventDestroy",
                                        "cuEventRecord",
                                        "cuEventSynchronize",
                                        "cuEventElapsedTime",
                                        "cuFuncGetParamInfo",
                                        "cuStreamGetId",
                                        "cuTensorMapEncodeTiled",
                                        "cuInit",
                                        "cuGetProcAddress",
                                        "cuCtxGetFlags",
                                        "cuDeviceGetUuid",
                                        "cuMemGetInfo",
                                        "cuCtxGetApiVersion"};
    const size_t count = sizeof names / sizeof names[0];
    const double g0 = now_ms();
    for (size_t i = 0; i < count; ++i) {
      void* fn = NULL;
      int found = 0;
      get_proc(names[i], &fn, 12000, 1, &found);
    }
    getproc = now_ms() - g0;
    const double s0 = now_ms();
    for (size_t i = 0; i < count; ++i) (void)dlsym(cuda, names[i]);
    dlsym_ms = now_ms() - s0;
    const double o0 = now_ms();
    void* again = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    dlopen_again = now_ms() - o0;
    const double i0 = now_ms();
    if (cu_init(0)) die("cuInit (again)");
    init_again = now_ms() - i0;
    if (again) dlclose(again);
  }

  const double t0 = now_ms();
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir;
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_options* opts = NULL;
  kj(kjit_cache_open(&co, &cache), "kjit_cache_open");
  kj(kjit_compiler_create(cache, 1, &compiler), "kjit_compiler_create");
  kj(kjit_options_create(&opts), "kjit_options_create");
  if (cub) kj(kjit_options_add_include_path(opts, include), "include path");
  const double t1 = now_ms();
  kjit_kernel* k = NULL;
  kjit_binary* log = NULL;
  const char* name = cub ? "block_sum" : "saxpy";
  kj(kjit_kernel_create(compiler, cub ? kCub : kSaxpy, name, opts, 0, 0, &k, &log),
     "kjit_kernel_create");
  const double t2 = now_ms();
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = (uint32_t)((n + 255) / 256);
  cfg.block[0] = 256;
  kj(kjit_kernel_launch(k, &cfg, cub ? cub_args : saxpy_args, cub ? 3 : 4), "launch");
  if (cu_sync()) die("sync");
  const double t3 = now_ms();

  kjit_cache_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  kjit_cache_stats_get(cache, &stats);
  printf("RESULT %.4f open=%.4f create=%.4f launch=%.4f disk_hits=%llu compiles=%llu", t3 - t0,
         t1 - t0, t2 - t1, t3 - t2, (unsigned long long)stats.disk_hits,
         (unsigned long long)stats.compiles);
  if (prewarm) {
    printf(
        " driver_open=%.4f getproc=%.4f dlsym=%.4f dlopen_again=%.4f init_again=%.4f "
        "getproc_first=%.4f",
        driver_open, getproc, dlsym_ms, dlopen_again, init_again, getproc_first);
  }
  printf("\n");
  kjit_binary_destroy(log);
  kjit_kernel_destroy(k);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return 0;
}
