/*
 * main.c — a templated kernel compiled asynchronously through the kjit cache, found by
 * its name expression, and launched with a packed argument buffer (the form FFI callers
 * use). Built by CMakeLists.txt with find_package(kjit) and kjit::kjit.
 *
 * Without a GPU the compile-and-cache part runs (for sm_90) and the launch is skipped.
 */
#define _POSIX_C_SOURCE 200809L
#include <kjit/kjit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_cuda.h"

static const char* const kSource =
    "template <typename T>\n"
    "__global__ void saxpy(T a, const T* x, T* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";
static const char* const kName = "saxpy<float>";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int check(kjit_status st, const char* what) {
  if (st == KJIT_OK) return 0;
  fprintf(stderr, "%s failed: %s (%s)\n", what, kjit_last_error(), kjit_status_string(st));
  return 1;
}

/* Packs one parameter at the offset the kernel expects. */
static int pack(const kjit_kernel* k, unsigned char* buf, size_t index, const void* value,
                size_t size) {
  size_t offset = 0, psize = 0;
  if (check(kjit_kernel_param_info(k, index, &offset, &psize), "kjit_kernel_param_info")) return 1;
  if (psize != size) {
    fprintf(stderr, "parameter %zu: kernel expects %zu bytes, got %zu\n", index, psize, size);
    return 1;
  }
  memcpy(buf + offset, value, size);
  return 0;
}

static int run_on_gpu(kjit_compiler* compiler, const kjit_options* opts) {
  enum { N = 4096 };
  example_cuda cu;
  kjit_kernel* k = NULL;
  kjit_binary* log = NULL;
  float x[N], y[N];
  ex_cu_devptr dx = 0, dy = 0;
  unsigned char buf[64];
  size_t size = 0;
  float a = 3.0f;
  int n = N, i, bad = 0, rc = 1;
  if (example_cuda_open(&cu, 0) != 0) return 1;
  for (i = 0; i < N; ++i) {
    x[i] = (float)(i % 100);
    y[i] = 0.5f;
  }
  if (cu.mem_alloc(&dx, sizeof x) || cu.mem_alloc(&dy, sizeof y) || cu.htod(dx, x, sizeof x) ||
      cu.htod(dy, y, sizeof y)) {
    fprintf(stderr, "device memory setup failed\n");
    goto out;
  }
  /* Compile-or-hit and load in one call; the target becomes the device's architecture. */
  if (check(kjit_kernel_create(compiler, kSource, kName, opts, 0, KJIT_KERNEL_DEFAULT, &k, &log),
            "kjit_kernel_create")) {
    if (log) fprintf(stderr, "%s\n", kjit_binary_log(log));
    goto out;
  }
  if (check(kjit_kernel_param_buffer_size(k, &size), "kjit_kernel_param_buffer_size")) goto out;
  if (size > sizeof buf) {
    fprintf(stderr, "unexpected parameter buffer size %zu\n", size);
    goto out;
  }
  memset(buf, 0, sizeof buf);
  if (pack(k, buf, 0, &a, sizeof a) || pack(k, buf, 1, &dx, sizeof dx) ||
      pack(k, buf, 2, &dy, sizeof dy) || pack(k, buf, 3, &n, sizeof n)) {
    goto out;
  }
  {
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = (N + 127) / 128;
    cfg.block[0] = 128;
    if (check(kjit_kernel_launch_packed(k, &cfg, buf, size), "kjit_kernel_launch_packed")) goto out;
  }
  if (cu.ctx_synchronize() != 0 || cu.dtoh(y, dy, sizeof y) != 0) {
    fprintf(stderr, "kernel execution failed\n");
    goto out;
  }
  for (i = 0; i < N; ++i) {
    if (y[i] != 3.0f * (float)(i % 100) + 0.5f) ++bad;
  }
  printf("launch: %s (%s) over %d floats with a %zu-byte packed buffer: %s\n", kName,
         kjit_kernel_symbol(k), N, size, bad ? "WRONG RESULTS" : "results ok");
  rc = bad ? 1 : 0;
out:
  kjit_binary_destroy(log);
  kjit_kernel_destroy(k);
  if (dx) cu.mem_free(dx);
  if (dy) cu.mem_free(dy);
  example_cuda_close(&cu);
  return rc;
}

int main(void) {
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_options* opts = NULL;
  kjit_options* gpu_opts = NULL;
  kjit_binary* bin = NULL;
  char arch[32] = "sm_90";
  int devices = 0, have_gpu, i, rc = 1;

  printf("kjit %s (headers %d.%d.%d)\n", kjit_version_string(), KJIT_VERSION_MAJOR,
         KJIT_VERSION_MINOR, KJIT_VERSION_PATCH);
  have_gpu = kjit_device_count(&devices) == KJIT_OK && devices > 0;
  if (have_gpu && kjit_device_arch(0, arch, sizeof arch) != KJIT_OK) have_gpu = 0;
  if (!have_gpu) printf("no GPU (%s): compiling for %s only\n", kjit_last_error(), arch);

  if (check(kjit_cache_open(NULL, &cache), "kjit_cache_open") ||
      check(kjit_compiler_create(cache, 2, &compiler), "kjit_compiler_create") ||
      check(kjit_options_create(&opts), "kjit_options_create") ||
      check(kjit_options_add(opts, "-std=c++17"), "kjit_options_add") ||
      check(kjit_options_add_name_expression(opts, kName), "kjit_options_add_name_expression") ||
      check(kjit_options_clone(opts, &gpu_opts), "kjit_options_clone") ||
      check(kjit_options_set_target(opts, arch), "kjit_options_set_target")) {
    goto done;
  }
  printf("cache: %s\n", kjit_cache_directory(cache));

  for (i = 1; i <= 2; ++i) {
    kjit_future* f = NULL;
    kjit_status st;
    double t0 = now_ms();
    kjit_binary_destroy(bin);
    bin = NULL;
    if (check(kjit_compile_async(compiler, kSource, opts, &f), "kjit_compile_async")) goto done;
    st = kjit_future_wait(f, -1, &bin);
    kjit_future_destroy(f);
    if (st == KJIT_ERROR_COMPILE) {
      fprintf(stderr, "compile error:\n%s\n", kjit_binary_log(bin));
      goto done;
    }
    if (check(st, "kjit_future_wait")) goto done;
    printf("compile %d: %s in %.2f ms (key %.16s, %s); %s -> %s\n", i,
           kjit_binary_tier(bin) == KJIT_TIER_COMPILED ? "miss (compiled by NVRTC)"
           : kjit_binary_tier(bin) == KJIT_TIER_DISK   ? "hit (disk)"
           : kjit_binary_tier(bin) == KJIT_TIER_MEMORY ? "hit (memory)"
                                                       : "hit (remote)",
           now_ms() - t0, kjit_binary_key(bin), kjit_binary_target(bin), kName,
           kjit_binary_lowered_name(bin, kName) ? kjit_binary_lowered_name(bin, kName) : "?");
  }

  if (!have_gpu) {
    printf("GPU part skipped: no CUDA device available\n");
    rc = 0;
  } else {
    rc = run_on_gpu(compiler, gpu_opts);
  }
done:
  kjit_binary_destroy(bin);
  kjit_options_destroy(gpu_opts);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return rc;
}
