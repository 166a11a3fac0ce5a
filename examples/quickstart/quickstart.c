/*
 * kjit quick start: compile saxpy through the cache (cold, then warm), and on a machine
 * with a GPU launch it and check the result against the CPU.
 *
 *   quickstart [CACHE_DIR]
 */
#include <dlfcn.h>
#include <kjit/kjit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* kSource =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char* tier_name(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED: return "compiled (miss)";
    case KJIT_TIER_MEMORY: return "memory hit";
    case KJIT_TIER_DISK: return "disk hit";
    case KJIT_TIER_REMOTE: return "remote hit";
    default: return "?";
  }
}

#define CHECK(call)                                                                 \
  do {                                                                              \
    kjit_status s_ = (call);                                                        \
    if (s_ != KJIT_OK) {                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, kjit_status_string(s_),       \
              kjit_last_error());                                                   \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

/* Device memory comes from the CUDA driver, opened at run time so that this program also
   runs (compile-only) on machines without one. */
struct driver {
  int (*init)(unsigned);
  int (*device_get)(int*, int);
  int (*primary_retain)(void**, int);
  int (*ctx_set_current)(void*);
  int (*mem_alloc)(unsigned long long*, size_t);
  int (*mem_free)(unsigned long long);
  int (*htod)(unsigned long long, const void*, size_t);
  int (*dtoh)(void*, unsigned long long, size_t);
  int (*sync)(void);
};

static int load_driver(struct driver* d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  *(void**)&d->init = dlsym(lib, "cuInit");
  *(void**)&d->device_get = dlsym(lib, "cuDeviceGet");
  *(void**)&d->primary_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void**)&d->ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
  *(void**)&d->mem_alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void**)&d->mem_free = dlsym(lib, "cuMemFree_v2");
  *(void**)&d->htod = dlsym(lib, "cuMemcpyHtoD_v2");
  *(void**)&d->dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  *(void**)&d->sync = dlsym(lib, "cuCtxSynchronize");
  return d->init && d->device_get && d->primary_retain && d->ctx_set_current && d->mem_alloc &&
         d->mem_free && d->htod && d->dtoh && d->sync;
}

/* Launches saxpy on device 0 and checks it; returns 0 on success, 2 when skipped. */
static int launch_and_check(kjit_compiler* compiler) {
  int count = 0;
  if (kjit_device_count(&count) != KJIT_OK || count == 0) {
    printf("launch: skipped, %s\n", count == 0 && !*kjit_last_error() ? "no CUDA device"
                                                                      : kjit_last_error());
    return 2;
  }
  struct driver cu;
  if (!load_driver(&cu)) {
    printf("launch: skipped, libcuda.so.1 lacks the memory functions\n");
    return 2;
  }
  char arch[16];
  CHECK(kjit_device_arch(0, arch, sizeof arch));
  kjit_options* opts;
  CHECK(kjit_options_create(&opts));
  CHECK(kjit_options_set_target(opts, "auto"));
  kjit_kernel* k = NULL;
  kjit_binary* log = NULL;
  double t0 = now_ms();
  CHECK(kjit_kernel_create(compiler, kSource, "saxpy", opts, 0, 0, &k, &log));
  printf("launch: kernel ready for %s in %.3f ms (%s; includes starting the device's "
         "primary context, the first CUDA use of this process)\n",
         arch, now_ms() - t0, kjit_kernel_load_path(k) == KJIT_LOAD_CUBIN ? "CUBIN" : "PTX JIT");
  kjit_options_destroy(opts);

  int dev = 0;
  void* ctx = NULL;
  if (cu.init(0) || cu.device_get(&dev, 0) || cu.primary_retain(&ctx, dev) ||
      cu.ctx_set_current(ctx)) {
    fprintf(stderr, "launch: could not make the primary context current\n");
    return 1;
  }
  int n = 1000003;
  float a = 2.5f;
  float* x = malloc(sizeof(float) * n);
  float* y = malloc(sizeof(float) * n);
  for (int i = 0; i < n; ++i) {
    x[i] = (float)(i % 97) * 0.25f;
    y[i] = (float)(i % 13);
  }
  unsigned long long dx = 0, dy = 0;
  if (cu.mem_alloc(&dx, sizeof(float) * n) || cu.mem_alloc(&dy, sizeof(float) * n) ||
      cu.htod(dx, x, sizeof(float) * n) || cu.htod(dy, y, sizeof(float) * n)) {
    fprintf(stderr, "launch: device allocation or copy failed\n");
    return 1;
  }
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 256;
  cfg.grid[0] = (uint32_t)((n + 255) / 256);
  void* args[] = {&a, &dx, &dy, &n};
  t0 = now_ms();
  CHECK(kjit_kernel_launch(k, &cfg, args, 4));
  cu.sync();
  double launch_ms = now_ms() - t0;
  float* out = malloc(sizeof(float) * n);
  cu.dtoh(out, dy, sizeof(float) * n);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    float want = a * x[i] + y[i];
    if (fabsf(out[i] - want) > 1e-5f * fabsf(want) + 1e-6f) ++bad;
  }
  printf("launch: saxpy on %d elements in %.3f ms: %s (%d mismatches)\n", n, launch_ms,
         bad ? "WRONG" : "correct", bad);
  cu.mem_free(dx);
  cu.mem_free(dy);
  free(x);
  free(y);
  free(out);
  kjit_kernel_destroy(k);
  kjit_binary_destroy(log);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* v = "?";
  kjit_nvrtc_version(&v);
  printf("kjit %s, %s\n", kjit_version_string(), v);

  kjit_cache_options copts = KJIT_CACHE_OPTIONS_INIT;
  if (argc > 1) copts.directory = argv[1];
  kjit_cache* cache;
  CHECK(kjit_cache_open(&copts, &cache));
  printf("cache: %s\n", kjit_cache_directory(cache));
  kjit_compiler* compiler;
  CHECK(kjit_compiler_create(cache, 0, &compiler));
  kjit_options* opts;
  CHECK(kjit_options_create(&opts));
  CHECK(kjit_options_set_target(opts, "sm_90"));

  for (int round = 0; round < 2; ++round) {
    kjit_binary* b = NULL;
    double t0 = now_ms();
    CHECK(kjit_compile(compiler, kSource, opts, &b));
    double ms = now_ms() - t0;
    size_t cubin = 0, ptx = 0;
    kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &cubin);
    kjit_binary_data(b, KJIT_OUTPUT_PTX, &ptx);
    printf("compile #%d: %-16s %9.3f ms  sm_90 CUBIN %zu B, PTX %zu B, key %.16s...\n",
           round + 1, tier_name(kjit_binary_tier(b)), ms, cubin, ptx, kjit_binary_key(b));
    kjit_binary_destroy(b);
  }
  kjit_cache_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  CHECK(kjit_cache_stats_get(cache, &st));
  printf("cache: %llu entries, %llu bytes on disk; this process: %llu compiles, %llu memory "
         "hits, %llu disk hits\n",
         (unsigned long long)st.disk_entries, (unsigned long long)st.disk_bytes,
         (unsigned long long)st.compiles, (unsigned long long)st.memory_hits,
         (unsigned long long)st.disk_hits);

  int rc = launch_and_check(compiler);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return rc == 1 ? 1 : 0;
}
