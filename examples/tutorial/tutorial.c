/*
 * The kjit tutorial's program (docs/tutorial.md): a templated kernel picked by name
 * expressions, an in-memory header, what the cache does, a GEMM, and kjit's kernels beside
 * CUDA code that nvcc built with the application (fill.cu).
 *
 *   tutorial          (KJIT_CACHE_DIR picks the cache directory)
 *
 * Without a GPU the compile and cache steps run (for sm_90) and the GPU steps are skipped.
 */
#include <cuda_runtime_api.h>
#include <kjit/kjit.h>
#include <stdio.h>
#include <string.h>

#include "fill.h"

/* A templated kernel: each instantiation the program uses is named by a name expression.
 * TILE comes from "tile.h", a header that exists only in memory (the options carry it). */
static const char* const kScaleSource =
    "#include \"tile.h\"\n"
    "template <typename T>\n"
    "__global__ void scale(T* x, T s, int n) {\n"
    "  int i = blockIdx.x * TILE + threadIdx.x;\n"
    "  if (i < n) x[i] *= s;\n"
    "}\n";

static const char* const kSaxpySource =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static const char* tier_name(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED: return "compiled (miss)";
    case KJIT_TIER_MEMORY: return "hit (memory)";
    case KJIT_TIER_DISK: return "hit (disk)";
    case KJIT_TIER_REMOTE: return "hit (remote)";
    default: return "?";
  }
}

/* Prints a failure as "<what>: <status>: <message>" and returns 1; returns 0 on KJIT_OK. */
static int failed(kjit_status st, const char* what) {
  if (st == KJIT_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, kjit_status_string(st), kjit_last_error());
  return 1;
}

/* Options for the scale kernel: target, C++17, the in-memory tile.h, the instantiations. */
static kjit_options* scale_options(const char* target, const char* tile_h) {
  kjit_options* opts = NULL;
  if (failed(kjit_options_create(&opts), "kjit_options_create")) return NULL;
  if (failed(kjit_options_set_target(opts, target), "kjit_options_set_target") ||
      failed(kjit_options_add(opts, "-std=c++17"), "kjit_options_add") ||
      failed(kjit_options_add_header(opts, "tile.h", tile_h), "kjit_options_add_header") ||
      failed(kjit_options_add_name_expression(opts, "scale<float>"), "add_name_expression") ||
      failed(kjit_options_add_name_expression(opts, "scale<double>"), "add_name_expression")) {
    kjit_options_destroy(opts);
    return NULL;
  }
  return opts;
}

/* Step 1: compile the templated kernel; the binary maps each expression to its symbol. */
static int compile_step(kjit_compiler* compiler, const char* target, kjit_binary** scale) {
  kjit_options* opts = scale_options(target, "#define TILE 256\n");
  kjit_status st;
  size_t i;
  if (!opts) return 1;
  st = kjit_compile(compiler, kScaleSource, opts, scale);
  kjit_options_destroy(opts);
  if (st == KJIT_ERROR_COMPILE) fprintf(stderr, "%s", kjit_binary_log(*scale));
  if (failed(st, "kjit_compile")) return 1;
  printf("step 1: scale for %s: %s, key %.16s...\n", kjit_binary_target(*scale),
         tier_name(kjit_binary_tier(*scale)), kjit_binary_key(*scale));
  for (i = 0; i < kjit_binary_name_count(*scale); ++i) {
    printf("  %s -> %s\n", kjit_binary_name_expression(*scale, i),
           kjit_binary_lowered_name_at(*scale, i));
  }
  return 0;
}

/* Compiles and prints where the result came from; 0 on success. */
static int compile_and_say(kjit_compiler* compiler, const char* label, const char* source,
                           const kjit_options* opts) {
  kjit_binary* bin = NULL;
  const kjit_status st = kjit_compile(compiler, source, opts, &bin);
  if (st == KJIT_OK) {
    printf("  %s: %s, key %.16s...\n", label, tier_name(kjit_binary_tier(bin)),
           kjit_binary_key(bin));
  } else {
    /* A compile error or a name expression that names nothing: the binary has the log. */
    printf("  %s: %s\n%s", label, kjit_status_string(st), bin ? kjit_binary_log(bin) : "");
  }
  kjit_binary_destroy(bin);
  return st == KJIT_OK ? 0 : 1;
}

/* Step 2: what the cache does with the same input, a changed header, and name expressions
 * that belong to another program. */
static int cache_step(kjit_cache* cache, kjit_compiler* compiler, const char* target) {
  kjit_options* same = scale_options(target, "#define TILE 256\n");
  kjit_options* edited = scale_options(target, "#define TILE 128\n");
  kjit_options* base = NULL;
  kjit_options* saxpy = NULL;
  kjit_cache_stats stats = KJIT_CACHE_STATS_INIT;
  int rc = 1;
  printf("step 2: the cache\n");
  if (!same || !edited || failed(kjit_options_create(&base), "kjit_options_create") ||
      failed(kjit_options_set_target(base, target), "kjit_options_set_target")) {
    goto out;
  }
  /* The same source and options again: the same key, no NVRTC. */
  if (compile_and_say(compiler, "same input", kScaleSource, same)) goto out;
  /* The in-memory header's contents are part of the key: editing it compiles again. */
  if (compile_and_say(compiler, "tile.h edited", kScaleSource, edited)) goto out;
  /* Name expressions stay in the options they were added to: saxpy has no scale<float>. */
  if (compile_and_say(compiler, "saxpy with scale's options", kSaxpySource, same) == 0) goto out;
  /* Options of its own, cloned from a base that has no name expressions, compile it. */
  if (failed(kjit_options_clone(base, &saxpy), "kjit_options_clone")) goto out;
  if (compile_and_say(compiler, "saxpy with its own options", kSaxpySource, saxpy)) goto out;
  if (failed(kjit_cache_stats_get(cache, &stats), "kjit_cache_stats_get")) goto out;
  printf("  this process: %llu compiles, %llu memory hits, %llu disk hits\n",
         (unsigned long long)stats.compiles, (unsigned long long)stats.memory_hits,
         (unsigned long long)stats.disk_hits);
  rc = 0;
out:
  kjit_options_destroy(same);
  kjit_options_destroy(edited);
  kjit_options_destroy(base);
  kjit_options_destroy(saxpy);
  return rc;
}

enum { N = 4096, DIM = 64 };

static int cuda_failed(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

/* Step 3: nvcc's kernel fills x, kjit's scale<float> scales it, on one stream. */
static int launch_step(const kjit_binary* scale, cudaStream_t stream) {
  static float host[N];
  float* x = NULL;
  float s = 0.5f;
  int n = N, i, bad = 0, rc = 1;
  kjit_kernel* k = NULL;
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  void* args[3];
  if (cuda_failed(cudaMalloc((void**)&x, sizeof host), "cudaMalloc") ||
      cuda_failed(fill_on_device(x, N, 3.0f, stream), "fill_on_device")) {
    goto out;
  }
  if (failed(kjit_kernel_from_binary(scale, "scale<float>", 0, 0, &k), "kjit_kernel_from_binary")) {
    goto out;
  }
  cfg.grid[0] = (N + 255) / 256;
  cfg.block[0] = 256; /* = TILE */
  cfg.stream = stream;
  args[0] = &x;
  args[1] = &s;
  args[2] = &n;
  if (failed(kjit_kernel_launch(k, &cfg, args, 3), "kjit_kernel_launch")) goto out;
  if (cuda_failed(cudaMemcpyAsync(host, x, sizeof host, cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync") ||
      cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
    goto out;
  }
  for (i = 0; i < N; ++i) bad += host[i] != 1.5f;
  printf("step 3: fill (nvcc) then scale<float> (kjit) over %d floats: %s\n", N,
         bad ? "WRONG RESULTS" : "results ok");
  rc = bad != 0;
out:
  kjit_kernel_destroy(k);
  cudaFree(x);
  return rc;
}

/* Step 4: D = A * B through cuBLASLt, the plan kept in the same cache database. */
static int gemm_step(kjit_cache* cache, cudaStream_t stream) {
  static float host[DIM * DIM];
  float *a = NULL, *b = NULL, *d = NULL;
  kjit_gemm* gemm = NULL;
  kjit_gemm_desc desc = KJIT_GEMM_DESC_INIT;
  int i, bad = 0, rc = 1;
  if (failed(kjit_gemm_create(cache, 0, NULL, &gemm), "kjit_gemm_create")) return 1;
  if (cuda_failed(cudaMalloc((void**)&a, sizeof host), "cudaMalloc") ||
      cuda_failed(cudaMalloc((void**)&b, sizeof host), "cudaMalloc") ||
      cuda_failed(cudaMalloc((void**)&d, sizeof host), "cudaMalloc") ||
      cuda_failed(fill_on_device(a, DIM * DIM, 1.0f, stream), "fill_on_device") ||
      cuda_failed(fill_on_device(b, DIM * DIM, 2.0f, stream), "fill_on_device")) {
    goto out;
  }
  desc.m = desc.n = desc.k = DIM; /* column-major, no transposes, alpha 1, beta 0 */
  desc.a_type = KJIT_GEMM_F32;
  if (failed(kjit_gemm_run(gemm, &desc, a, b, NULL, d, NULL, stream), "kjit_gemm_run")) goto out;
  if (cuda_failed(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync") ||
      cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
    goto out;
  }
  for (i = 0; i < DIM * DIM; ++i) bad += host[i] != 2.0f * DIM;
  printf("step 4: gemm %dx%dx%d f32: %s\n", DIM, DIM, DIM, bad ? "WRONG RESULTS" : "results ok");
  rc = bad != 0;
out:
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  kjit_gemm_destroy(gemm);
  return rc;
}

/* Step 5: a mixture-of-experts layer. The rows of x are sorted by expert; `ends` holds
   each expert's cumulative row end (on the device, so no host sync per layer); each expert
   has its own weight matrix. */
static int moe_step(kjit_compiler* compiler, cudaStream_t stream) {
  enum { EXPERTS = 4, ROWS = 96, K = 64, N = 128 };
  static const int32_t ends[EXPERTS] = {10, 10, 60, 96}; /* expert 1 gets no rows */
  static unsigned short host[ROWS * N];
  void *x = NULL, *w = NULL, *y = NULL, *offs = NULL;
  kjit_grouped_gemm* gg = NULL;
  kjit_grouped_gemm_desc desc = KJIT_GROUPED_GEMM_DESC_INIT;
  int i, bad = 0, rc = 1;
  if (failed(kjit_grouped_gemm_create(compiler, 0, NULL, &gg), "kjit_grouped_gemm_create")) return 1;
  /* bf16 data: every byte 0x3f makes each element 0x3f3f = 0.74609375 */
  if (cuda_failed(cudaMalloc(&x, ROWS * K * 2), "cudaMalloc") ||
      cuda_failed(cudaMalloc(&w, EXPERTS * N * K * 2), "cudaMalloc") ||
      cuda_failed(cudaMalloc(&y, ROWS * N * 2), "cudaMalloc") ||
      cuda_failed(cudaMalloc(&offs, sizeof ends), "cudaMalloc") ||
      cuda_failed(cudaMemsetAsync(x, 0x3f, ROWS * K * 2, stream), "cudaMemsetAsync") ||
      cuda_failed(cudaMemsetAsync(w, 0x3f, EXPERTS * N * K * 2, stream), "cudaMemsetAsync") ||
      cuda_failed(cudaMemcpyAsync(offs, ends, sizeof ends, cudaMemcpyHostToDevice, stream),
                  "cudaMemcpyAsync")) {
    goto out;
  }
  desc.groups = EXPERTS;
  desc.rows = ROWS;
  desc.n = N;
  desc.k = K;
  desc.b_order = KJIT_GROUPED_B_NK; /* each expert's weight stored N x K, as a linear layer's */
  desc.activation = KJIT_GROUPED_ACT_SILU;
  if (failed(kjit_grouped_gemm_run(gg, &desc, x, w, (const int32_t*)offs, NULL, y, NULL, stream),
             "kjit_grouped_gemm_run")) {
    goto out;
  }
  if (cuda_failed(cudaMemcpyAsync(host, y, sizeof host, cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync") ||
      cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
    goto out;
  }
  for (i = 0; i < ROWS * N; ++i) {
    /* silu(64 * 0.74609375^2) = 35.63 (to bf16 precision) */
    const unsigned int u = (unsigned int)host[i] << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    bad += !(v > 35.0f && v < 36.25f);
  }
  printf("step 5: moe layer, %d experts: %s\n", EXPERTS, bad ? "WRONG RESULTS" : "results ok");
  rc = bad != 0;
out:
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  cudaFree(offs);
  kjit_grouped_gemm_destroy(gg);
  return rc;
}

int main(void) {
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_binary* scale = NULL;
  cudaStream_t stream = NULL;
  char target[32] = "sm_90";
  int devices = 0, gpu, rc = 1;

  gpu = kjit_device_count(&devices) == KJIT_OK && devices > 0 &&
        kjit_device_arch(0, target, sizeof target) == KJIT_OK;
  if (!gpu) printf("no GPU: compiling for %s only\n", target);
  if (failed(kjit_cache_open(NULL, &cache), "kjit_cache_open") ||
      failed(kjit_compiler_create(cache, 0, &compiler), "kjit_compiler_create")) {
    goto done;
  }
  printf("cache: %s\n", kjit_cache_directory(cache));
  if (compile_step(compiler, target, &scale) || cache_step(cache, compiler, target)) goto done;
  if (!gpu) {
    printf("GPU steps skipped: no CUDA device available\n");
    rc = 0;
    goto done;
  }
  if (cuda_failed(cudaStreamCreate(&stream), "cudaStreamCreate")) goto done;
  rc = launch_step(scale, stream) || gemm_step(cache, stream) || moe_step(compiler, stream);
  cudaStreamDestroy(stream);
done:
  kjit_binary_destroy(scale);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return rc;
}
