/*
 * saxpy.c — compile a kernel through the kjit cache and launch it.
 *
 *   make && ./saxpy          (build: cc saxpy.c $(pkg-config --cflags --libs kjit))
 *
 * The first run compiles with NVRTC and stores the result; every later run, in any
 * process, is a cache hit. The cache is $KJIT_CACHE_DIR or ~/.cache/kjit. Without a GPU
 * the compile-and-cache part still runs (for sm_90) and the launch is skipped.
 */
#define _POSIX_C_SOURCE 200809L
#include <kjit/kjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "example_cuda.h"

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

static const char* tier_text(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED: return "miss (compiled by NVRTC)";
    case KJIT_TIER_MEMORY: return "hit (memory)";
    case KJIT_TIER_DISK: return "hit (disk)";
    case KJIT_TIER_REMOTE: return "hit (remote)";
    default: return "?";
  }
}

static int check(kjit_status st, const char* what) {
  if (st == KJIT_OK) return 0;
  fprintf(stderr, "%s failed: %s (%s)\n", what, kjit_last_error(), kjit_status_string(st));
  return 1;
}

/* Runs saxpy on the GPU and checks the result. 0 on success. */
static int run_on_gpu(const kjit_binary* bin) {
  enum { N = 1 << 20 };
  example_cuda cu;
  kjit_kernel* kernel = NULL;
  float* x = malloc(N * sizeof(float));
  float* y = malloc(N * sizeof(float));
  ex_cu_devptr dx = 0, dy = 0;
  int rc = 1, i, n = N, bad = 0;
  float a = 2.0f;
  if (!x || !y || example_cuda_open(&cu, 0) != 0) goto out_nocu;
  for (i = 0; i < N; ++i) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  if (cu.mem_alloc(&dx, N * sizeof(float)) || cu.mem_alloc(&dy, N * sizeof(float)) ||
      cu.htod(dx, x, N * sizeof(float)) || cu.htod(dy, y, N * sizeof(float))) {
    fprintf(stderr, "device memory setup failed\n");
    goto out;
  }
  if (check(kjit_kernel_from_binary(bin, "saxpy", 0, KJIT_KERNEL_DEFAULT, &kernel), "kjit_kernel_from_binary")) {
    goto out;
  }
  {
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    void* args[4];
    double t0;
    args[0] = &a;
    args[1] = &dx;
    args[2] = &dy;
    args[3] = &n;
    cfg.grid[0] = (N + 255) / 256;
    cfg.block[0] = 256;
    t0 = now_ms();
    if (check(kjit_kernel_launch(kernel, &cfg, args, 4), "kjit_kernel_launch")) goto out;
    if (cu.ctx_synchronize() != 0 || cu.dtoh(y, dy, N * sizeof(float)) != 0) {
      fprintf(stderr, "kernel execution failed\n");
      goto out;
    }
    for (i = 0; i < N; ++i) {
      if (fabsf(y[i] - (2.0f * (float)i + 1.0f)) > 1e-3f * (2.0f * (float)i + 1.0f)) ++bad;
    }
    printf("launch: saxpy over %d floats, %s, %.2f ms to the first completed launch: %s\n", N,
           kjit_kernel_load_path(kernel) == KJIT_LOAD_CUBIN ? "CUBIN" : "PTX", now_ms() - t0,
           bad ? "WRONG RESULTS" : "results ok");
    rc = bad ? 1 : 0;
  }
out:
  kjit_kernel_destroy(kernel);
  if (dx) cu.mem_free(dx);
  if (dy) cu.mem_free(dy);
  example_cuda_close(&cu);
out_nocu:
  free(x);
  free(y);
  return rc;
}

int main(void) {
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_options* opts = NULL;
  kjit_binary* bin = NULL;
  char arch[32] = "sm_90";
  int devices = 0, have_gpu, i, rc = 1;

  printf("kjit %s\n", kjit_version_string());
  have_gpu = kjit_device_count(&devices) == KJIT_OK && devices > 0;
  if (have_gpu && kjit_device_arch(0, arch, sizeof arch) != KJIT_OK) have_gpu = 0;
  if (!have_gpu) printf("no GPU (%s): compiling for %s only\n", kjit_last_error(), arch);

  if (check(kjit_cache_open(NULL, &cache), "kjit_cache_open") ||
      check(kjit_compiler_create(cache, 0, &compiler), "kjit_compiler_create") ||
      check(kjit_options_create(&opts), "kjit_options_create") ||
      check(kjit_options_set_target(opts, arch), "kjit_options_set_target")) {
    goto done;
  }
  printf("cache: %s\n", kjit_cache_directory(cache));

  /* The second compile in the same process is a memory-tier hit; a second run of the
   * program is a disk-tier hit. */
  for (i = 1; i <= 2; ++i) {
    double t0 = now_ms();
    kjit_status st;
    kjit_binary_destroy(bin);
    bin = NULL;
    st = kjit_compile(compiler, kSource, opts, &bin);
    if (st == KJIT_ERROR_COMPILE) {
      fprintf(stderr, "compile error:\n%s\n", kjit_binary_log(bin));
      goto done;
    }
    if (check(st, "kjit_compile")) goto done;
    printf("compile %d: %s in %.2f ms (key %.16s, %s)\n", i, tier_text(kjit_binary_tier(bin)),
           now_ms() - t0, kjit_binary_key(bin), kjit_binary_target(bin));
  }

  if (!have_gpu) {
    printf("GPU part skipped: no CUDA device available\n");
    rc = 0;
  } else {
    rc = run_on_gpu(bin);
  }
done:
  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return rc;
}
