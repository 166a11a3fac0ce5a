/* The host half of the CUTLASS GEMM example, as a small C library: everything that needs
 * CUTLASS's host code (built with nvcc), behind a C interface that any language can call.
 * A Rust, Go, Julia or Python program links (or dlopens) this library for the kernel's
 * Params and compiles and launches the kernel itself through kjit (docs/cutlass.md).
 *
 * The GEMM: D (M x N, row-major bf16) = alpha * A (M x K, row-major bf16) * B (K x N,
 * column-major bf16) + beta * C (like D; may be NULL when beta == 0), fp32 accumulation
 * (gemm_config.hpp). */
#ifndef KJIT_EXAMPLE_GEMM_HOST_H
#define KJIT_EXAMPLE_GEMM_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof and alignof GemmKernel::Params as the host compiler lays it out. */
size_t gemm_host_params_size(void);
size_t gemm_host_params_align(void);

/* The kernel's name in gemm_kernel.cu, and the NVRTC options it is compiled with. */
const char* gemm_host_kernel_name(void);
size_t gemm_host_option_count(void);
const char* gemm_host_option(size_t index);

/* The text of CUTLASS's cute/arch/copy_sm90_desc.hpp (read from `cutlass_include`, the
 * directory holding cute/ and cutlass/) with its device-side TMA descriptor stand-in
 * aligned as this host's CUtensorMap, to be given to kjit as an in-memory header of the
 * same name (kjit_options_add_header). On CUDA 13 the host's CUtensorMap is aligned to 128
 * bytes and CUTLASS 4.7's stand-in to 64, which gives the kernel's Params another layout.
 * Returns a malloc'd string the caller frees, or NULL with a message in *why (a static
 * string) when the file cannot be read or does not have the expected declarations. */
char* gemm_host_tma_header(const char* cutlass_include, const char** why);

/* The launch of one problem. */
typedef struct gemm_host_launch {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t cluster[3];
  uint32_t shared_bytes;
  size_t workspace_bytes; /* device memory the caller passes as `workspace` (0: none) */
} gemm_host_launch;

/* Writes GemmKernel::Params for the problem into `params` (gemm_host_params_size() bytes,
 * aligned to gemm_host_params_align()) and fills `launch`. A, B, C, D and workspace are
 * device pointers of `device`; call once with workspace NULL to learn workspace_bytes.
 * Encodes the TMA descriptors (the CUDA driver, through the runtime): needs a GPU.
 * Returns 0, or -1 with a message in *why when CUTLASS cannot run the problem (sizes not
 * multiples of 8, say). */
int gemm_host_make_params(int m, int n, int k, float alpha, float beta, const void* A,
                          const void* B, const void* C, void* D, int device, void* workspace,
                          void* params, gemm_host_launch* launch, const char** why);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_EXAMPLE_GEMM_HOST_H */
