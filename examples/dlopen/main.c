/*
 * main.c — use kjit without linking to it: dlopen("libkjit.so.0") and resolve the kjit_*
 * functions with dlsym, the way a language runtime's FFI does (Python ctypes, LuaJIT,
 * Java's Panama, a plugin host). Only kjit's headers are needed: <kjit/kjit_typedefs.h>
 * for the function types (it includes <kjit/kjit.h> for the rest).
 *
 *   cc -I<prefix>/include -I../common main.c -ldl -o kjit-dlopen
 *   LD_LIBRARY_PATH=<prefix>/lib ./kjit-dlopen        (or ./kjit-dlopen /path/libkjit.so.0)
 *
 * Without a GPU the compile-and-cache part runs (for sm_90) and the launch is skipped.
 */
#define _GNU_SOURCE /* dlvsym */
#include <kjit/kjit_typedefs.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "example_cuda.h"

/* The functions this program uses, as the library exports them (version node KJIT_0.1).
 * <kjit/kjit_typedefs.h> gives the type of each: PFN_kjit_<name> is the type of
 * &kjit_<name>, so no prototype is written by hand here. */
static struct {
  PFN_kjit_version_string version_string;
  PFN_kjit_status_string status_string;
  PFN_kjit_last_error last_error;
  PFN_kjit_device_count device_count;
  PFN_kjit_device_arch device_arch;
  PFN_kjit_cache_open cache_open;
  PFN_kjit_cache_close cache_close;
  PFN_kjit_cache_directory cache_directory;
  PFN_kjit_compiler_create compiler_create;
  PFN_kjit_compiler_destroy compiler_destroy;
  PFN_kjit_options_create options_create;
  PFN_kjit_options_destroy options_destroy;
  PFN_kjit_options_set_target options_set_target;
  PFN_kjit_compile compile;
  PFN_kjit_binary_destroy binary_destroy;
  PFN_kjit_binary_log binary_log;
  PFN_kjit_binary_key binary_key;
  PFN_kjit_binary_tier binary_tier;
  PFN_kjit_kernel_from_binary kernel_from_binary;
  PFN_kjit_kernel_destroy kernel_destroy;
  PFN_kjit_kernel_launch_sized kernel_launch_sized;
  PFN_kjit_launch_config_init launch_config_init;
} kj;

/* Ask for the exact version node: a later libkjit.so.0 still carries the KJIT_0.1
 * symbols this program was written against. */
static void* lookup(void* lib, const char* name) {
#ifdef __GLIBC__
  return dlvsym(lib, name, "KJIT_0.1");
#else
  return dlsym(lib, name);
#endif
}

static int resolve(void* lib, const char* name, void* fn_ptr_out, size_t size) {
  void* sym = lookup(lib, name);
  if (!sym) {
    fprintf(stderr, "libkjit lacks %s: %s\n", name, dlerror());
    return 0;
  }
  memcpy(fn_ptr_out, &sym, size);
  return 1;
}

#define RESOLVE(lib, field) resolve(lib, "kjit_" #field, &kj.field, sizeof kj.field)

static const char* const kSource =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int check(kjit_status st, const char* what) {
  if (st == KJIT_OK) return 0;
  fprintf(stderr, "%s failed: %s (%s)\n", what, kj.last_error(), kj.status_string(st));
  return 1;
}

static int run_on_gpu(const kjit_binary* bin) {
  enum { N = 1000 };
  example_cuda cu;
  kjit_kernel* k = NULL;
  float x[N], y[N], a = 0.5f;
  int n = N, i, bad = 0, rc = 1;
  ex_cu_devptr dx = 0, dy = 0;
  if (example_cuda_open(&cu, 0) != 0) return 1;
  for (i = 0; i < N; ++i) {
    x[i] = (float)i;
    y[i] = (float)-i;
  }
  if (cu.mem_alloc(&dx, sizeof x) || cu.mem_alloc(&dy, sizeof y) || cu.htod(dx, x, sizeof x) ||
      cu.htod(dy, y, sizeof y)) {
    fprintf(stderr, "device memory setup failed\n");
    goto out;
  }
  if (check(kj.kernel_from_binary(bin, "saxpy", 0, 0, &k), "kjit_kernel_from_binary")) goto out;
  {
    kjit_launch_config cfg;
    void* args[4];
    size_t sizes[4];
    kj.launch_config_init(&cfg);
    cfg.grid[0] = (N + 255) / 256;
    cfg.block[0] = 256;
    args[0] = &a;  sizes[0] = sizeof a;
    args[1] = &dx; sizes[1] = sizeof dx;
    args[2] = &dy; sizes[2] = sizeof dy;
    args[3] = &n;  sizes[3] = sizeof n;
    /* Sizes are checked against the kernel's parameters before the driver sees them. */
    if (check(kj.kernel_launch_sized(k, &cfg, args, sizes, 4), "kjit_kernel_launch_sized")) goto out;
  }
  if (cu.ctx_synchronize() != 0 || cu.dtoh(y, dy, sizeof y) != 0) {
    fprintf(stderr, "kernel execution failed\n");
    goto out;
  }
  for (i = 0; i < N; ++i) {
    if (y[i] != -0.5f * (float)i) ++bad;
  }
  printf("launch: saxpy over %d floats: %s\n", N, bad ? "WRONG RESULTS" : "results ok");
  rc = bad ? 1 : 0;
out:
  kj.kernel_destroy(k);
  if (dx) cu.mem_free(dx);
  if (dy) cu.mem_free(dy);
  example_cuda_close(&cu);
  return rc;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libkjit.so.0";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_options* opts = NULL;
  kjit_binary* bin = NULL;
  char arch[32] = "sm_90";
  int devices = 0, have_gpu, i, rc = 1;

  if (!lib) {
    fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  if (!RESOLVE(lib, version_string) || !RESOLVE(lib, status_string) ||
      !RESOLVE(lib, last_error) || !RESOLVE(lib, device_count) || !RESOLVE(lib, device_arch) ||
      !RESOLVE(lib, cache_open) || !RESOLVE(lib, cache_close) ||
      !RESOLVE(lib, cache_directory) || !RESOLVE(lib, compiler_create) ||
      !RESOLVE(lib, compiler_destroy) || !RESOLVE(lib, options_create) ||
      !RESOLVE(lib, options_destroy) || !RESOLVE(lib, options_set_target) ||
      !RESOLVE(lib, compile) || !RESOLVE(lib, binary_destroy) || !RESOLVE(lib, binary_log) ||
      !RESOLVE(lib, binary_key) || !RESOLVE(lib, binary_tier) ||
      !RESOLVE(lib, kernel_from_binary) || !RESOLVE(lib, kernel_destroy) ||
      !RESOLVE(lib, kernel_launch_sized) || !RESOLVE(lib, launch_config_init)) {
    dlclose(lib);
    return 1;
  }
  printf("kjit %s loaded with dlopen(\"%s\")\n", kj.version_string(), path);

  have_gpu = kj.device_count(&devices) == KJIT_OK && devices > 0;
  if (have_gpu && kj.device_arch(0, arch, sizeof arch) != KJIT_OK) have_gpu = 0;
  if (!have_gpu) printf("no GPU (%s): compiling for %s only\n", kj.last_error(), arch);

  if (check(kj.cache_open(NULL, &cache), "kjit_cache_open") ||
      check(kj.compiler_create(cache, 0, &compiler), "kjit_compiler_create") ||
      check(kj.options_create(&opts), "kjit_options_create") ||
      check(kj.options_set_target(opts, arch), "kjit_options_set_target")) {
    goto done;
  }
  printf("cache: %s\n", kj.cache_directory(cache));
  for (i = 1; i <= 2; ++i) {
    double t0 = now_ms();
    kjit_status st;
    kj.binary_destroy(bin);
    bin = NULL;
    st = kj.compile(compiler, kSource, opts, &bin);
    if (st == KJIT_ERROR_COMPILE) {
      fprintf(stderr, "compile error:\n%s\n", kj.binary_log(bin));
      goto done;
    }
    if (check(st, "kjit_compile")) goto done;
    printf("compile %d: %s in %.2f ms (key %.16s)\n", i,
           kj.binary_tier(bin) == KJIT_TIER_COMPILED ? "miss (compiled by NVRTC)"
           : kj.binary_tier(bin) == KJIT_TIER_DISK   ? "hit (disk)"
           : kj.binary_tier(bin) == KJIT_TIER_MEMORY ? "hit (memory)"
                                                     : "hit (remote)",
           now_ms() - t0, kj.binary_key(bin));
  }
  if (!have_gpu) {
    printf("GPU part skipped: no CUDA device available\n");
    rc = 0;
  } else {
    rc = run_on_gpu(bin);
  }
done:
  kj.binary_destroy(bin);
  kj.options_destroy(opts);
  kj.compiler_destroy(compiler);
  kj.cache_close(cache);
  dlclose(lib);
  return rc;
}
