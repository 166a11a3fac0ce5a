/*
 * kjit — GEMM through cuBLASLt, with a plan cache that survives restarts.
 *
 *     D = epilogue(alpha * op(A) * op(B) + beta * C)
 *
 * op(A) is m x k, op(B) is k x n, C and D are m x n; each may be a batch of matrices.
 *
 * cuBLASLt (libcublasLt.so.13) is opened with dlopen the first time a GEMM handle is
 * created (or kjit_cublaslt_version() is called): a process that never uses GEMM never
 * loads it, and libkjit loads on machines that do not have it.
 *
 * Plans. The first run of a problem asks cuBLASLt's heuristic for an algorithm (or, with
 * autotuning on, times the best candidates on the real buffers) and keeps the result as a
 * plan: descriptors, the chosen cublasLtMatmulAlgo_t and its workspace size. Plans live in
 * a per-handle LRU (the memory tier) and, when the handle is bound to a kjit_cache, in
 * the cache database (the disk tier) scoped by the cuBLASLt version, the driver version,
 * the device name and compute capability and kjit's plan format version. A new process
 * with a warm cache runs a known problem without any heuristic query; every plan read
 * from disk is verified with cublasLtMatmulAlgoCheck first and replaced when it fails.
 *
 * A plan is chosen by everything that can change cuBLASLt's choice: shape, order and
 * transposes, leading dimensions, data types, compute type, epilogue and bias type,
 * batch count and strides, the alignment of every pointer (up to 256 bytes), the
 * workspace cap, the device's compute capability and SM count.
 *
 * Streams and context: work runs in the device's primary context (the one the CUDA
 * runtime, PyTorch and CuPy use) on the stream given (a CUstream / cudaStream_t of that
 * context; NULL is the legacy default stream). Calls are asynchronous like cuBLASLt's,
 * except a run that autotunes, which waits for its trial runs.
 *
 * Several devices: a handle belongs to one device; create one per device. Its cuBLASLt
 * handle, workspaces and memory tier are its own and live in that device's primary
 * context, whatever context the calling thread has current. Handles of different devices
 * may share one kjit_cache: a plan persisted by one device is used by another only where
 * the validators (cuBLASLt and driver versions, device name, compute capability) and the
 * plan key (which holds the SM count) agree, and is still checked with
 * cublasLtMatmulAlgoCheck there. After cuDevicePrimaryCtxReset of the device, a handle
 * made before it returns KJIT_ERROR_STALE_HANDLE (its workspaces went with the context);
 * destroy it, which frees nothing of the new context, and create a new one.
 */
#ifndef KJIT_GEMM_H
#define KJIT_GEMM_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Problem description ------------------------------------------------------------- */

/** Element types. KJIT_GEMM_DTYPE_DEFAULT in a type field means "derive it" (see each
 *  field of kjit_gemm_desc). */
typedef enum kjit_gemm_dtype {
  KJIT_GEMM_DTYPE_DEFAULT = 0,
  KJIT_GEMM_F32 = 1,     /**< IEEE binary32 */
  KJIT_GEMM_F16 = 2,     /**< IEEE binary16 */
  KJIT_GEMM_BF16 = 3,    /**< bfloat16 */
  KJIT_GEMM_F8_E4M3 = 4, /**< fp8 E4M3 (compute capability 8.9+) */
  KJIT_GEMM_F8_E5M2 = 5, /**< fp8 E5M2 (compute capability 8.9+) */
  KJIT_GEMM_F64 = 6      /**< IEEE binary64 */
} kjit_gemm_dtype;

/** Compute (accumulation) type. */
typedef enum kjit_gemm_compute {
  KJIT_GEMM_COMPUTE_DEFAULT = 0,       /**< F64 for f64 data, F32 for everything else */
  KJIT_GEMM_COMPUTE_F32 = 1,           /**< f32 accumulation; f32 inputs use full f32 */
  KJIT_GEMM_COMPUTE_TF32 = 2,          /**< f32 inputs rounded to TF32 on tensor cores
                                            (sm_80+), f32 accumulation; f32 A, B only */
  KJIT_GEMM_COMPUTE_F16 = 3,           /**< f16 accumulation and f16 alpha/beta; f16 only */
  KJIT_GEMM_COMPUTE_F64 = 4,           /**< f64 accumulation; f64 only */
  KJIT_GEMM_COMPUTE_F32_FAST_F16 = 5,  /**< f32 inputs rounded to f16, f32 accumulation */
  KJIT_GEMM_COMPUTE_F32_FAST_BF16 = 6  /**< f32 inputs rounded to bf16, f32 accumulation */
} kjit_gemm_compute;

/** Storage order shared by A, B, C and D. */
typedef enum kjit_gemm_order {
  KJIT_GEMM_COL_MAJOR = 0, /**< Fortran/BLAS order: element (i, j) at i + j * ld */
  KJIT_GEMM_ROW_MAJOR = 1  /**< C/PyTorch order: element (i, j) at i * ld + j */
} kjit_gemm_order;

/** Operation applied to A or B before the product. */
typedef enum kjit_gemm_op {
  KJIT_GEMM_OP_N = 0, /**< as stored */
  KJIT_GEMM_OP_T = 1  /**< transposed: the stored matrix is k x m (A) or n x k (B) */
} kjit_gemm_op;

/** Epilogue applied to alpha * op(A) * op(B) + beta * C. The bias vector is broadcast
 *  along D's non-contiguous dimension: for column-major D it has m elements (one per
 *  row), for row-major D it has n elements (one per column), which is the convention of
 *  a linear layer Y = X * W^T + b with row-major Y. GELU is the tanh approximation. */
typedef enum kjit_gemm_epilogue {
  KJIT_GEMM_EPILOGUE_NONE = 0,
  KJIT_GEMM_EPILOGUE_BIAS = 1,      /**< + bias */
  KJIT_GEMM_EPILOGUE_RELU = 2,      /**< max(x, 0) */
  KJIT_GEMM_EPILOGUE_RELU_BIAS = 3, /**< max(x + bias, 0) */
  KJIT_GEMM_EPILOGUE_GELU = 4,      /**< gelu(x) */
  KJIT_GEMM_EPILOGUE_GELU_BIAS = 5  /**< gelu(x + bias) */
} kjit_gemm_epilogue;

/**
 * One GEMM problem. Initialise with KJIT_GEMM_DESC_INIT or kjit_gemm_desc_init(), then
 * set at least m, n, k and a_type. New fields are only ever appended; struct_size tells
 * kjit which ones the caller knows.
 *
 * Sizes, leading dimensions and strides count elements, not bytes.
 */
typedef struct kjit_gemm_desc {
  uint32_t struct_size; /**< sizeof(kjit_gemm_desc) of the caller's header */
  int32_t order;        /**< kjit_gemm_order of all four matrices */
  int32_t trans_a;      /**< kjit_gemm_op for A */
  int32_t trans_b;      /**< kjit_gemm_op for B */
  int64_t m, n, k;      /**< each >= 1 */
  /** Leading dimensions: the distance between consecutive columns (column-major) or rows
   *  (row-major) of the matrix as stored. 0 = packed. Must be at least the length of a
   *  stored column (row), e.g. for column-major A with trans_a = N, lda >= m. */
  int64_t lda, ldb, ldc, ldd;
  int32_t a_type;    /**< kjit_gemm_dtype; required */
  int32_t b_type;    /**< DEFAULT = a_type */
  int32_t c_type;    /**< DEFAULT = d_type (for fp8 D: must be given) */
  int32_t d_type;    /**< DEFAULT = a_type (for fp8 A or B: must be given) */
  int32_t compute;   /**< kjit_gemm_compute */
  int32_t epilogue;  /**< kjit_gemm_epilogue */
  int32_t bias_type; /**< DEFAULT = d_type, except for fp8 A/B: c_type when it is f16 or
                          bf16, else bf16 (cuBLASLt's rules) */
  int32_t reserved0; /**< must be 0 */
  /** Batch: batch_count >= 1 matrices of each operand, matrix i of X at X + i*stride_x
   *  elements. A stride of 0 means packed (ld times the stored matrix's other extent).
   *  stride_bias 0 means one bias vector for every batch. Ignored when batch_count is 1. */
  int64_t batch_count;
  int64_t stride_a, stride_b, stride_c, stride_d, stride_bias;
  double alpha; /**< host scalar, converted to the scale type (f64, f32 or, with
                     COMPUTE_F16, f16) */
  double beta;  /**< host scalar; when 0, C is not read and may be NULL (cuBLASLt is then
                     given D in C's place) */
  /** fp8 scaling factors: device pointers to one float each (cuBLASLt's scalar scale
   *  mode), or NULL for 1. With them D = d_scale * epilogue(alpha * a_scale * b_scale *
   *  op(A) op(B) + beta * C): a_scale / b_scale dequantise fp8 A / B, d_scale quantises an
   *  fp8 D. Each must be NULL when the matrix it scales is not fp8. */
  const void* a_scale;
  const void* b_scale;
  const void* d_scale;
} kjit_gemm_desc;

#define KJIT_GEMM_DESC_INIT                                                            \
  {sizeof(kjit_gemm_desc), KJIT_GEMM_COL_MAJOR, KJIT_GEMM_OP_N, KJIT_GEMM_OP_N, 0, 0, 0, \
   0, 0, 0, 0, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_DTYPE_DEFAULT,                     \
   KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_COMPUTE_DEFAULT,       \
   KJIT_GEMM_EPILOGUE_NONE, KJIT_GEMM_DTYPE_DEFAULT, 0, 1, 0, 0, 0, 0, 0, 1.0, 0.0,    \
   NULL, NULL, NULL}

/**
 * Fill the first `size` bytes of `desc` with the defaults of KJIT_GEMM_DESC_INIT and set
 * desc->struct_size = size. Nothing past `size` bytes is written; bytes past this library's
 * sizeof(kjit_gemm_desc) are set to zero. Normally called through the
 * kjit_gemm_desc_init() macro, which passes the caller's sizeof. Ownership: the caller's
 * struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `desc` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_gemm_desc_init_sized(kjit_gemm_desc* desc, size_t size);

/** Fill `desc` with KJIT_GEMM_DESC_INIT. The exported function of 0.1.0 writes the 0.1.0
 *  struct and ignores NULL; the macro calls kjit_gemm_desc_init_sized() with the caller's
 *  sizeof. Thread-safe. */
KJIT_EXPORT void kjit_gemm_desc_init(kjit_gemm_desc* desc);
#define kjit_gemm_desc_init(desc) kjit_gemm_desc_init_sized((desc), sizeof(*(desc)))

/* ---- GEMM handles ---------------------------------------------------------------------- */

/** Options for kjit_gemm_create(). Initialise with KJIT_GEMM_OPTIONS_INIT or
 *  kjit_gemm_options_init(); new fields are only ever appended. */
typedef struct kjit_gemm_options {
  uint32_t struct_size;          /**< sizeof(kjit_gemm_options) of the caller's header */
  uint32_t plan_capacity;        /**< plans kept in memory (LRU); 0 = 64 */
  int autotune;                  /**< non-zero: on a plan miss, time the best candidates
                                      on the real buffers and keep the fastest */
  uint32_t autotune_candidates;  /**< heuristic candidates timed; 0 = 8 */
  uint32_t autotune_warmup;      /**< untimed runs per candidate; 0 = 2 */
  uint32_t autotune_reps;        /**< timed runs per candidate (median kept); 0 = 7 */
  uint64_t max_workspace_bytes;  /**< workspace cap per stream; 0 = 32 MiB */
} kjit_gemm_options;

#define KJIT_GEMM_OPTIONS_INIT {sizeof(kjit_gemm_options), 0, 0, 0, 0, 0, 0}

/**
 * Fill the first `size` bytes of `opts` with the defaults of KJIT_GEMM_OPTIONS_INIT and
 * set opts->struct_size = size. Nothing past `size` bytes is written; bytes past this
 * library's sizeof(kjit_gemm_options) are set to zero. Normally called through the
 * kjit_gemm_options_init() macro, which passes the caller's sizeof. Ownership: the
 * caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `opts` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_gemm_options_init_sized(kjit_gemm_options* opts, size_t size);

/** Fill `opts` with KJIT_GEMM_OPTIONS_INIT. The exported function of 0.1.0 writes the
 *  0.1.0 struct and ignores NULL; the macro calls kjit_gemm_options_init_sized() with the
 *  caller's sizeof. Thread-safe. */
KJIT_EXPORT void kjit_gemm_options_init(kjit_gemm_options* opts);
#define kjit_gemm_options_init(opts) kjit_gemm_options_init_sized((opts), sizeof(*(opts)))

/**
 * Create a GEMM handle for `device` (an ordinal as in cuDeviceGet). Retains the device's
 * primary context and creates a cuBLASLt handle; loads libcuda and cuBLASLt on first use.
 * `cache` may be NULL: plans are then kept in memory only. A cache given must stay open
 * until the handle is destroyed. `options` may be NULL (defaults).
 * Ownership: the caller destroys *out with kjit_gemm_destroy().
 * Thread-safety: any thread; the handle may then be shared by threads (see
 * kjit_gemm_run()).
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT (out NULL, negative device, bad options);
 * KJIT_ERROR_UNSUPPORTED (options from a newer kjit); KJIT_ERROR_INVALID_HANDLE (cache not
 * a live cache); KJIT_ERROR_CUDA_UNAVAILABLE (no driver, no device, no such device
 * ordinal; checked before cuBLASLt is loaded); KJIT_ERROR_CUBLAS (cuBLASLt cannot be
 * loaded or initialised); KJIT_ERROR_CUDA. *out is written only on success.
 */
KJIT_EXPORT kjit_status kjit_gemm_create(kjit_cache* cache, int device,
                                         const kjit_gemm_options* options, kjit_gemm** out);

/**
 * Destroy a handle: waits for the GEMMs it enqueued to finish, then frees its workspaces,
 * its plans and its cuBLASLt handle, and releases the primary context. NULL is a no-op.
 * Must not race with other calls on the same handle. After a reset of the device's
 * primary context it frees no device memory (the reset did, and the addresses may belong
 * to new allocations).
 */
KJIT_EXPORT void kjit_gemm_destroy(kjit_gemm* gemm);

/**
 * Check a problem and its pointers without a GPU: everything kjit_gemm_run() checks before
 * it needs the device. Pointers are only compared with NULL and checked for alignment,
 * never dereferenced. Thread-safe.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT naming the field or pointer (desc NULL,
 * unknown enum value, size < 1, leading dimension or stride too small, required pointer
 * NULL, pointer not aligned to its element size, sizes that overflow);
 * KJIT_ERROR_UNSUPPORTED naming what (a type/compute/epilogue combination cuBLASLt does
 * not offer, a desc from a newer kjit).
 */
KJIT_EXPORT kjit_status kjit_gemm_check(const kjit_gemm_desc* desc, const void* A,
                                        const void* B, const void* C, const void* D,
                                        const void* bias);

/**
 * Enqueue D = epilogue(alpha * op(A) * op(B) + beta * C) on `stream`.
 * A, B, C, D and bias are device pointers (C may be NULL when beta == 0 and C's type is
 * D's type — for an fp8 D with a 16-bit C, pass a real C buffer; C may equal D when both
 * have the same type and leading dimension; bias is required exactly when the epilogue
 * has one). fp8: cuBLASLt's fp8 kernels want op(A) = T and op(B) = N in
 * column-major terms (row-major: Y = X * W^T, trans_b = T), 16-byte aligned pointers and
 * leading dimensions, and beta = 0 or C == D; what it refuses comes back as
 * KJIT_ERROR_UNSUPPORTED. The plan comes from the handle's memory tier, else from the cache
 * database (verified with cublasLtMatmulAlgoCheck), else from cuBLASLt's heuristic or, with
 * autotuning, from timing the candidates (the trials write a scratch buffer, never D, and
 * the call waits for them). New plans are written to the cache database.
 * The workspace is allocated once per handle and stream, sized by the largest plan that
 * ran there (at most the cap) and reused; growing it waits for that stream.
 * Thread-safety: any number of threads may run on one handle at once, on the same or
 * different streams.
 * Returns KJIT_OK; the statuses of kjit_gemm_check(); KJIT_ERROR_INVALID_HANDLE;
 * KJIT_ERROR_INVALID_ARGUMENT also for a stream of another context than the device's
 * primary context (another device's, say), naming both; KJIT_ERROR_STALE_HANDLE once the
 * device's primary context was reset after the handle was created;
 * KJIT_ERROR_UNSUPPORTED (cuBLASLt has no algorithm for this problem on this device or
 * refuses to run it, or fp8 on a device before compute capability 8.9); KJIT_ERROR_CUBLAS (a cuBLASLt call
 * failed; the message has its status name); KJIT_ERROR_CUDA or KJIT_ERROR_CUDA_STICKY.
 */
KJIT_EXPORT kjit_status kjit_gemm_run(kjit_gemm* gemm, const kjit_gemm_desc* desc,
                                      const void* A, const void* B, const void* C, void* D,
                                      const void* bias, void* stream);

/** Drop every plan of the memory tier (the cache database keeps its copies). For tools
 *  and tests. Thread-safe: runs in flight keep the plans they hold. */
KJIT_EXPORT kjit_status kjit_gemm_clear_plans(kjit_gemm* gemm);

/** Counters of one handle since it was created. Initialise with KJIT_GEMM_STATS_INIT or
 *  kjit_gemm_stats_init(); fields beyond the caller's struct_size are not written. */
typedef struct kjit_gemm_stats {
  uint32_t struct_size;
  uint64_t runs;               /**< successful kjit_gemm_run() calls */
  uint64_t memory_hits;        /**< plan found in the memory tier */
  uint64_t disk_hits;          /**< plan read from the cache database and verified */
  uint64_t misses;             /**< plan found in neither tier: heuristic (or autotune) */
  uint64_t heuristic_queries;  /**< cublasLtMatmulAlgoGetHeuristic calls */
  uint64_t autotunes;          /**< problems autotuned */
  uint64_t disk_rejected;      /**< persisted plans that failed verification (corrupt,
                                    other validators, cublasLtMatmulAlgoCheck) and were
                                    replaced */
  uint64_t disk_writes;        /**< plans written to the cache database */
  uint64_t evictions;          /**< plans evicted from the memory tier */
  uint64_t plans;              /**< plans in the memory tier now */
  uint64_t workspace_bytes;    /**< device memory held for workspaces now */
} kjit_gemm_stats;

#define KJIT_GEMM_STATS_INIT {sizeof(kjit_gemm_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Zero the first `size` bytes of `stats` and set stats->struct_size = size, ready for
 * kjit_gemm_stats_get(). Nothing past `size` bytes is written. Normally called through the
 * kjit_gemm_stats_init() macro, which passes the caller's sizeof. Ownership: the caller's
 * struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `stats` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_gemm_stats_init_sized(kjit_gemm_stats* stats, size_t size);
#define kjit_gemm_stats_init(stats) kjit_gemm_stats_init_sized((stats), sizeof(*(stats)))

/** Read the counters into the caller's struct_size bytes (struct_size keeps its value).
 *  The struct is checked before the handle. Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE,
 *  KJIT_ERROR_INVALID_ARGUMENT (stats NULL, struct_size smaller than the 0.1.0 struct or
 *  larger than 4096; nothing is written). Thread-safe. */
KJIT_EXPORT kjit_status kjit_gemm_stats_get(const kjit_gemm* gemm, kjit_gemm_stats* stats);

/** cuBLASLt's run-time version (cublasLtGetVersion(), e.g. 130100), loading cuBLASLt if
 *  needed. Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT (out NULL), KJIT_ERROR_CUBLAS
 *  (libcublasLt.so.13 cannot be loaded). Thread-safe. */
KJIT_EXPORT kjit_status kjit_cublaslt_version(size_t* out);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_GEMM_H */
