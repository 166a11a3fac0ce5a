/*
 * kjit — grouped GEMM for mixture-of-experts layers, with kjit's own kernels.
 *
 *     for every group (expert) g, for every row r of g:
 *         D[r, :] = epilogue(alpha * A[r, :] x B_g + beta * C[r, :] + bias_g)
 *
 * A is `rows` x K, row-major; its rows are sorted by group, group g owning rows
 * [offs[g-1], offs[g]) (offs[-1] = 0). B holds G matrices, one per group, each K x N (order
 * KJIT_GROUPED_B_KN, memory (G, K, N)) or stored transposed as N x K (KJIT_GROUPED_B_NK,
 * memory (G, N, K), the order of a linear layer's weight, torch's `w.transpose(-2, -1)`
 * view). D (and C) are `rows` x N, row-major. bf16 data, fp32 accumulation, bf16 out.
 *
 * fp8 (@since 0.3). A and B may be fp8 e4m3 (a_type = b_type = KJIT_GEMM_F8_E4M3; the OCP
 * "e4m3fn" form, torch.float8_e4m3fn), with fp32 accumulation and bf16 D (C and bias stay
 * bf16). With desc->scale_mode = KJIT_GROUPED_SCALE_ROWWISE (the form of
 * torch._scaled_grouped_mm) the scales come to kjit_grouped_gemm_run_scaled(): scale_a, one
 * fp32 per row of A (`rows` floats), and scale_b, one fp32 per column of each B_g (G x n
 * floats, row g at scale_b + g * n), applied in the epilogue:
 *     D[r, :] = epilogue(scale_a[r] * scale_b[g, :] * (A x B_g)[r, :])
 * (the epilogue's alpha, beta * C, bias and activation as for bf16; with
 * KJIT_GROUPED_ACT_SWIGLU the gate column j is scaled by scale_b[g, j], the up column by
 * scale_b[g, n/2 + j]). On compute capability 9.0 the fp8 kernel is the sm_90a TMA + wgmma
 * kernel for B order KJIT_GROUPED_B_NK (fp8 wgmma reads both operands K-major: a linear
 * layer's weight, torch's layout for fp8 grouped GEMM); B order KN with fp8 runs on the
 * portable kernel (correct, slow), as does fp8 on other devices (sm_80, sm_89). With
 * row-wise scales or none the fp8 wgmma accumulates in the tensor core's fp32 accumulator
 * without promotion (torch's use_fast_accum). With KJIT_GROUPED_SCALE_BLOCK128 (DeepSeek's
 * form, see kjit_grouped_scale_mode) each 128-wide K block's product is scaled and promoted
 * into an fp32 main accumulator; the sm_90a kernel then uses the cooperative 128x128 tile
 * whatever the options ask (and, with KJIT_GROUPED_ACT_SWIGLU, needs n/2 a multiple of 64;
 * else the portable kernel runs).
 *
 * `offs` is a DEVICE array of G int32 cumulative row ends (torch._grouped_mm's `offs`):
 * the group sizes are never read on the host, so a call never synchronises. Empty groups
 * (offs[g] == offs[g-1]) are fine. Rows past offs[G-1] are not written. Offsets that
 * decrease or pass `rows` are clamped on the device (a decreasing end makes the group
 * empty; an end past `rows` is cut to `rows`), so bad offsets never make a kernel read or
 * write outside A, C or D; the result of such a call is unspecified. A handle created with
 * check_offsets reports them (see "Offset check mode" below).
 *
 * Plans. The configuration is chosen per shape class (G, K, N, the bucket of rows per group,
 * types, B order, epilogue pieces, TMA eligibility, device) by a heuristic, or by a tuned
 * plan persisted in the compiler's cache (kjit_grouped_gemm_options.autotune), which every
 * handle that leaves the choice to kjit uses, in this and later processes.
 *
 * Kernels. The source of each configuration (tile shape, pipeline stages, B order,
 * epilogue, target) is rendered by kjit and compiled through the kjit_compiler given at
 * creation: the same cache, single flight and compile worker as user kernels, so a second
 * process loads a configuration from the cache instead of compiling it. On compute
 * capability 9.0 the kernel is a persistent, warp-specialised TMA + wgmma kernel (target
 * sm_90a); elsewhere, and for shapes the TMA kernel cannot take (K not a multiple of 8,
 * N not a multiple of 8 with B order KN, or N/2 not a multiple of 8 with B order KN and
 * KJIT_GROUPED_ACT_SWIGLU, pointers or strides not 16-byte aligned), a plain tiled kernel
 * that is correct on every architecture from sm_70 on, not fast.
 *
 * Streams and context: kernels run on the stream given (a CUstream / cudaStream_t; NULL is
 * the legacy default stream) in the device's primary context unless the calling thread has
 * a current context of the device (kernel.h's rule). Calls are asynchronous.
 */
#ifndef KJIT_GROUPED_GEMM_H
#define KJIT_GROUPED_GEMM_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A grouped-GEMM handle: one device, its loaded kernels (opaque). */
typedef struct kjit_grouped_gemm kjit_grouped_gemm;

/** Memory order of B's G matrices. */
typedef enum kjit_grouped_b_order {
  KJIT_GROUPED_B_KN = 0, /**< (G, K, N): B_g[k, n] at B + g * stride_b + k * ldb + n */
  KJIT_GROUPED_B_NK = 1  /**< (G, N, K): B_g[k, n] at B + g * stride_b + n * ldb + k */
} kjit_grouped_b_order;

/**
 * Activation applied last in the epilogue. GELU is the tanh approximation.
 *
 * KJIT_GROUPED_ACT_SWIGLU is the gated form of a mixture-of-experts w1/w3 projection: each
 * B_g holds the gate and the up projection side by side, n columns in all (n even): columns
 * [0, n/2) are the gate, columns [n/2, n) the up projection, the order of torch's
 * `gate, up = (x @ w13.T).chunk(2, dim=-1)` with `w13 = cat([w1, w3])` (for B order NK,
 * rows [0, n/2) of each (n, k) matrix are w1, rows [n/2, n) w3). D and C then have n/2
 * columns (ldd, ldc >= n/2), the bias keeps all n (its first n/2 entries add to the gate,
 * the rest to the up half), and for output column j:
 *     D[r, j] = silu(alpha * (A B_g)[r, j] + bias[g, j])
 *               * (alpha * (A B_g)[r, n/2 + j] + bias[g, n/2 + j]) + beta * C[r, j]
 */
typedef enum kjit_grouped_activation {
  KJIT_GROUPED_ACT_NONE = 0,
  KJIT_GROUPED_ACT_RELU = 1, /**< max(x, 0) */
  KJIT_GROUPED_ACT_GELU = 2, /**< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  KJIT_GROUPED_ACT_SILU = 3, /**< x / (1 + exp(-x)) */
  /** silu(gate) * up over B's two column halves; D has n/2 columns (see above). @since 0.3 */
  KJIT_GROUPED_ACT_SWIGLU = 4
} kjit_grouped_activation;

/** Scales of fp8 inputs (kjit_grouped_gemm_desc.scale_mode). @since 0.3 */
typedef enum kjit_grouped_scale_mode {
  /** No scales: D = epilogue(A x B_g); scale_a and scale_b must be NULL. */
  KJIT_GROUPED_SCALE_NONE = 0,
  /** One fp32 per row of A (`rows`) and one per column of each B_g (G x n, packed):
   *  D = epilogue(scale_a[r] * scale_b[g, n] * (A x B_g)[r, n]); fp8 inputs only. */
  KJIT_GROUPED_SCALE_ROWWISE = 1,
  /** DeepSeek-style block scales: scale_a one fp32 per row and 128-wide K block (rows x
   *  ceil(k/128), row-major), scale_b one per 128 x 128 block of each B_g (G x ceil(n/128)
   *  x ceil(k/128), row-major; block (nb, kb) covers B_g's columns [128 nb, 128 nb + 128)
   *  and rows [128 kb, 128 kb + 128) of K): each K block's partial product is scaled as it
   *  is added to the fp32 accumulator; fp8 inputs only. */
  KJIT_GROUPED_SCALE_BLOCK128 = 2
} kjit_grouped_scale_mode;

/**
 * One grouped GEMM problem. Initialise with KJIT_GROUPED_GEMM_DESC_INIT or
 * kjit_grouped_gemm_desc_init(), then set groups, rows, n, k and b_order. New fields are only
 * ever appended; struct_size tells kjit which ones the caller knows. Sizes, leading
 * dimensions and strides count elements, not bytes.
 *
 * The epilogue is composed of independent pieces, each rendered into the kernel only when
 * used: the alpha scale (always), beta * C (when beta != 0), the per-group bias (when a bias
 * pointer is passed to kjit_grouped_gemm_run()) and the activation:
 *     D = act(alpha * A B_g + beta * C + bias[g, :])
 * (KJIT_GROUPED_ACT_SWIGLU is gated: D = silu(gate) * up + beta * C, n/2 columns; see
 * kjit_grouped_activation.)
 */
typedef struct kjit_grouped_gemm_desc {
  uint32_t struct_size; /**< sizeof(kjit_grouped_gemm_desc) of the caller's header */
  int32_t groups;       /**< G >= 1: matrices in B, entries in offs */
  int64_t rows;         /**< rows of A, C and D, >= 0 and < 2^31 (0: nothing to do) */
  int64_t n, k;         /**< each >= 1 and < 2^31 */
  /** kjit_gemm_dtype (gemm.h): KJIT_GEMM_BF16, KJIT_GEMM_F8_E4M3 (@since 0.3) or DEFAULT
   *  (= bf16) */
  int32_t a_type;
  int32_t b_type;     /**< DEFAULT = a_type; must equal it */
  int32_t d_type;     /**< DEFAULT = bf16; must be bf16 (also C's and the bias's type) */
  int32_t b_order;    /**< kjit_grouped_b_order */
  int32_t activation; /**< kjit_grouped_activation */
  int32_t reserved0;  /**< must be 0 */
  /** Leading dimensions, 0 = packed: lda >= k; ldb >= n (KN) or >= k (NK); ldc, ldd >= n
   *  (>= n/2 with KJIT_GROUPED_ACT_SWIGLU). */
  int64_t lda, ldb, ldc, ldd;
  /** Elements from B_g to B_{g+1}; 0 = packed (k * ldb for KN, n * ldb for NK). */
  int64_t stride_b;
  /** Elements from bias_g to bias_{g+1} (bias is G x n when given); 0 = n. */
  int64_t stride_bias;
  double alpha; /**< host scalar, applied in fp32 */
  double beta;  /**< host scalar; when 0, C is not read and may be NULL */
  /** How fp8 inputs are scaled: a kjit_grouped_scale_mode; KJIT_GROUPED_SCALE_NONE with
   *  bf16. @since 0.3 */
  int32_t scale_mode;
  int32_t reserved1; /**< must be 0. @since 0.3 */
} kjit_grouped_gemm_desc;

#define KJIT_GROUPED_GEMM_DESC_INIT                                                                \
  {                                                                                                \
    sizeof(kjit_grouped_gemm_desc), 0, 0, 0, 0, 0, 0, 0, KJIT_GROUPED_B_KN, KJIT_GROUPED_ACT_NONE, \
        0, 0, 0, 0, 0, 0, 0, 1.0, 0.0, KJIT_GROUPED_SCALE_NONE, 0                                  \
  }

/**
 * Fill the first `size` bytes of `desc` with KJIT_GROUPED_GEMM_DESC_INIT and set
 * desc->struct_size = size. Normally called through the kjit_grouped_gemm_desc_init()
 * macro, which passes the caller's sizeof. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `desc` is NULL or `size` is smaller
 * than the first released struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_desc_init_sized(kjit_grouped_gemm_desc* desc,
                                                          size_t size);
#define kjit_grouped_gemm_desc_init(desc) kjit_grouped_gemm_desc_init_sized((desc), sizeof(*(desc)))

/** Schedules of the sm_90a kernel. */
typedef enum kjit_grouped_schedule {
  /** Chosen per shape: for groups of 64 rows or more on average, cooperative with the
   *  TMA store epilogue for fp8 and for bf16 with n <= 2048 (where D's base and pitch are
   *  16-byte aligned), cooperative 128 x 256 in 2x1 clusters for bf16 with
   *  2048 < n < 16384 (cluster_m 0), else pingpong; for fewer (decode) with bf16 inputs,
   *  a 64 x 256 tile (64 x 128 with tile_n 128) owned by one consumer warpgroup. */
  KJIT_GROUPED_SCHEDULE_AUTO = 0,
  /** Both consumer warpgroups share each tile (64 rows each); tiles 128x128 or 128x256. */
  KJIT_GROUPED_SCHEDULE_COOPERATIVE = 1,
  /** Each consumer warpgroup takes every other tile whole, so one's epilogue overlaps the
   *  other's main loop; tile 128x128. */
  KJIT_GROUPED_SCHEDULE_PINGPONG = 2
} kjit_grouped_schedule;

/** Options for kjit_grouped_gemm_create(). Initialise with KJIT_GROUPED_GEMM_OPTIONS_INIT
 *  or kjit_grouped_gemm_options_init(); new fields are only ever appended. */
typedef struct kjit_grouped_gemm_options {
  uint32_t struct_size; /**< sizeof(kjit_grouped_gemm_options) of the caller's header */
  /** Tile width (columns of D per tile) of the sm_90a kernel: 0 = chosen per shape, else
   *  128 or 256. */
  uint32_t tile_n;
  /** Shared-memory pipeline stages of the sm_90a kernel: 0 = chosen per tile, else 2..8
   *  (the stages must fit the device's shared memory). */
  uint32_t stages;
  /** Non-zero: never use the sm_90a kernel (the portable kernel everywhere). */
  int portable_only;
  /** The sm_90a kernel's schedule: a kjit_grouped_schedule (0 = chosen per shape). */
  int schedule;
  /** Non-zero: check every call's offsets on the device (see "Offset check mode" above
   *  kjit_grouped_gemm_offsets_status()). Off by default: it costs one small kernel launch
   *  per call (docs/api.md gives the measured figure). @since 0.3 */
  int check_offsets;
  /** Non-zero: the first run() of a shape class (plan key) with no tuned plan tries the
   *  candidate configurations on the call's own buffers, keeps the fastest and persists it
   *  in the compiler's cache, so that later handles and processes use it without tuning.
   *  Needs tile_n, stages and schedule 0 and portable_only off. @since 0.3 */
  int autotune;
  /** CTAs per thread-block cluster along the rows of the sm_90a kernel: 0 = chosen per
   *  shape (2 for bf16 prefill with 2048 < n < 16384, see KJIT_GROUPED_SCHEDULE_AUTO), 1, or 2 (two CTAs take two row tiles of one column tile of B, and each copies
   *  half of B's stage into both: TMA multicast, half the L2 reads of B). 2 takes the
   *  cooperative schedule with 128-row tiles (schedule AUTO becomes COOPERATIVE; PINGPONG
   *  with 2 is refused); configurations the cluster does not take (fp8 inputs, the
   *  portable kernel) keep 1. @since 0.3 */
  uint32_t cluster_m;
} kjit_grouped_gemm_options;

#define KJIT_GROUPED_GEMM_OPTIONS_INIT \
  { sizeof(kjit_grouped_gemm_options), 0, 0, 0, 0, 0, 0, 0 }

/**
 * Fill the first `size` bytes of `opts` with KJIT_GROUPED_GEMM_OPTIONS_INIT and set
 * opts->struct_size = size (the kjit_grouped_gemm_options_init() macro passes the caller's
 * sizeof). Thread-safety: any thread. Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT (NULL,
 * size out of range; nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_options_init_sized(kjit_grouped_gemm_options* opts,
                                                             size_t size);
#define kjit_grouped_gemm_options_init(opts) \
  kjit_grouped_gemm_options_init_sized((opts), sizeof(*(opts)))

/**
 * Create a grouped-GEMM handle for `device` (an ordinal as in cuDeviceGet). Kernels are
 * compiled through `compiler` (its cache, single flight and compile worker); `compiler`
 * must stay alive until the handle is destroyed. `options` may be NULL (defaults).
 * Ownership: the caller destroys *out with kjit_grouped_gemm_destroy().
 * Thread-safety: any thread; the handle may then be shared by threads.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT (out NULL, negative device, options out of
 * range); KJIT_ERROR_UNSUPPORTED (options from a newer kjit); KJIT_ERROR_INVALID_HANDLE
 * (compiler not a live kjit_compiler); KJIT_ERROR_CUDA_UNAVAILABLE (no driver, no such
 * device). *out is written only on success.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_create(kjit_compiler* compiler, int device,
                                                 const kjit_grouped_gemm_options* options,
                                                 kjit_grouped_gemm** out);

/** Destroy a handle and unload its kernels. NULL is a no-op. Must not race with other calls
 *  on the same handle; work already enqueued finishes normally. */
KJIT_EXPORT void kjit_grouped_gemm_destroy(kjit_grouped_gemm* gg);

/**
 * Check a problem and its pointers without a GPU: everything kjit_grouped_gemm_run() checks
 * before it launches. Pointers are compared with NULL and checked for alignment, never
 * dereferenced (offs's contents are not checked: they live on the device). Thread-safe.
 * The scale pointers of KJIT_GROUPED_SCALE_ROWWISE are not arguments here: the same checks
 * with them are those of kjit_grouped_gemm_run_scaled(), which makes them before it looks at
 * its handle (so a NULL handle gives its refusals without a GPU).
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT naming the field or pointer (desc NULL,
 * unknown enum value, groups < 1, sizes out of range, leading dimension or stride too
 * small, a required pointer NULL (A, B, offs, D when rows > 0; C when beta != 0), a pointer
 * not aligned to its element size, reserved0 or reserved1 not 0); KJIT_ERROR_UNSUPPORTED
 * naming what (a data type other than bf16 and fp8 e4m3, b_type other than a_type, d_type
 * other than bf16, scales with bf16 inputs, a desc from a newer kjit).
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_check(const kjit_grouped_gemm_desc* desc, const void* A,
                                                const void* B, const int32_t* offs, const void* C,
                                                const void* D, const void* bias);

/**
 * Enqueue the grouped GEMM on `stream`. A, B, C, D, bias and offs are device pointers of
 * the handle's device; bias (G x n bf16, row g at bias + g * stride_bias) may be NULL;
 * C may be NULL when beta == 0 and may equal D when ldc == ldd. The configuration's kernel
 * is compiled (or taken from the cache) and loaded on first use, and kept by the handle.
 * Thread-safety: any number of threads may run on one handle at once.
 * Returns KJIT_OK; the statuses of kjit_grouped_gemm_check(); KJIT_ERROR_INVALID_HANDLE;
 * KJIT_ERROR_COMPILE (a rendered kernel failed to compile: a bug; the message has the
 * log); KJIT_ERROR_CUDA, KJIT_ERROR_CUDA_STICKY (tensor map encoding or launch failed).
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_run(kjit_grouped_gemm* gg,
                                              const kjit_grouped_gemm_desc* desc, const void* A,
                                              const void* B, const int32_t* offs, const void* C,
                                              void* D, const void* bias, void* stream);

/**
 * kjit_grouped_gemm_run() with the scales of desc->scale_mode (see "fp8" above): with
 * KJIT_GROUPED_SCALE_ROWWISE, scale_a (`rows` fp32) and scale_b (G x n fp32, packed) are
 * device pointers, 4-byte aligned, not NULL when rows > 0; with KJIT_GROUPED_SCALE_NONE
 * both must be NULL. kjit_grouped_gemm_run() is this call with NULL scales.
 * The arguments are checked before the handle: a problem or a scale pointer at fault gives
 * its status even with gg NULL (then, with good arguments, KJIT_ERROR_INVALID_HANDLE).
 * Thread-safety: as kjit_grouped_gemm_run().
 * Returns KJIT_OK; the statuses of kjit_grouped_gemm_check(); KJIT_ERROR_INVALID_ARGUMENT
 * naming scale_a or scale_b (NULL where needed, given where not, not aligned to 4 bytes);
 * KJIT_ERROR_INVALID_HANDLE; KJIT_ERROR_COMPILE; KJIT_ERROR_CUDA, KJIT_ERROR_CUDA_STICKY.
 * @since 0.3
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_run_scaled(kjit_grouped_gemm* gg,
                                                     const kjit_grouped_gemm_desc* desc,
                                                     const void* A, const void* B,
                                                     const int32_t* offs, const void* C, void* D,
                                                     const void* bias, const float* scale_a,
                                                     const float* scale_b, void* stream);

/**
 * Compile (or hit) and load the kernel that kjit_grouped_gemm_run() would use for `desc`
 * with pointers aligned to 256 bytes (C when beta != 0, a bias when `with_bias` is
 * non-zero), without launching anything, so that a service never compiles on a request
 * path. Thread-safe.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT / KJIT_ERROR_UNSUPPORTED as for
 * kjit_grouped_gemm_check() (pointers are not looked at); KJIT_ERROR_INVALID_HANDLE;
 * KJIT_ERROR_COMPILE; KJIT_ERROR_CUDA.
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_prepare(kjit_grouped_gemm* gg,
                                                  const kjit_grouped_gemm_desc* desc,
                                                  int with_bias);

/**
 * The plan key (configuration) kjit_grouped_gemm_run() picks for `desc` with its pointers,
 * e.g. "grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk epi=alpha+bias+silu", written into
 * `buf` (NUL-terminated, truncated to `size` bytes); *needed (may be NULL) receives the
 * length without the NUL. For logs, tools and tests. Thread-safe.
 * Returns KJIT_OK; the statuses of kjit_grouped_gemm_check(); KJIT_ERROR_INVALID_HANDLE.
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_plan_key(kjit_grouped_gemm* gg,
                                                   const kjit_grouped_gemm_desc* desc,
                                                   const void* A, const void* B, const void* C,
                                                   const void* D, const void* bias, char* buf,
                                                   size_t size, size_t* needed);

/*
 * Offset check mode (kjit_grouped_gemm_options.check_offsets). Each run() with rows > 0
 * first enqueues, on the same stream, a small kernel (compiled through the same compiler
 * and cache as the GEMM kernels) that reads the G offsets and finds the first group g whose
 * end is below the previous end (offs[g] < offs[g-1], or offs[0] < 0) or past the row count
 * (offs[g] > rows). It records the first such call since the record was last read, in a
 * device word owned by the handle: the call's number (the handle's run() calls with rows >
 * 0 counted from 1), g, offs[g], the previous end and rows; and counts every call with bad
 * offsets. The GEMM itself still runs with its offsets clamped (so it never reads or writes
 * outside A, C or D), and its result for such a call is unspecified. The record is read by
 * kjit_grouped_gemm_offsets_status() once the calls are complete (after the caller
 * synchronised their streams).
 */

/**
 * Read and clear the handle's offset record (see "Offset check mode" above). Call it after
 * the streams of the checked calls are synchronised; it copies the record synchronously
 * (cuMemcpyDtoH) and does not wait for other streams.
 * Thread-safety: any thread; a call racing with a checked run() still in flight may miss
 * that run's record or clear it unread.
 * Returns KJIT_OK when no call since the last read had bad offsets;
 * KJIT_ERROR_INVALID_ARGUMENT when one had, with kjit_last_error() naming the call, the
 * group and the values, e.g. "grouped GEMM: bad offsets in call 3 of this handle: offs[2] =
 * 40 is less than offs[1] = 50 (group 2 would end before it starts); 1 call had bad offsets
 * since the last read"; KJIT_ERROR_INVALID_ARGUMENT also when the handle was created
 * without check_offsets (nothing is recorded); KJIT_ERROR_INVALID_HANDLE;
 * KJIT_ERROR_CUDA, KJIT_ERROR_CUDA_STICKY (the copy failed).
 * @since 0.3
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_offsets_status(kjit_grouped_gemm* gg);

/**
 * Compile (or find in the cache) the kernel a grouped-GEMM handle with `options` would
 * use for `desc` on a device of architecture `target` ("sm_90a": the TMA kernel where
 * the shape allows it; "sm_80", "sm_89", ...: the portable kernel), with pointers aligned
 * to 256 bytes, C when beta != 0 and a bias when `with_bias` is non-zero. Needs no GPU
 * (NVRTC runs on the CPU), so a cache can be warmed before a service starts (`kjit warm
 * --grouped`); a handle on such a device then loads the kernel from the cache. A tuned
 * plan persisted for the shape (options.autotune) is not looked up here: the heuristic's
 * configuration is compiled; options.autotune is ignored.
 * Ownership: *out (set also for a failed compile, with its log) is destroyed with
 * kjit_binary_destroy(); kjit_binary_tier() says whether it was a cache hit.
 * Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT (NULL arguments, a target that is not
 * "sm_XY" or "sm_90a", the desc or options out of range as for
 * kjit_grouped_gemm_check() and kjit_grouped_gemm_create()); KJIT_ERROR_UNSUPPORTED;
 * KJIT_ERROR_INVALID_HANDLE; KJIT_ERROR_COMPILE (a bug: the log is in *out).
 * @since 0.3
 */
KJIT_EXPORT kjit_status kjit_grouped_gemm_compile(kjit_compiler* compiler, const char* target,
                                                  const kjit_grouped_gemm_desc* desc,
                                                  const kjit_grouped_gemm_options* options,
                                                  int with_bias, kjit_binary** out);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_GROUPED_GEMM_H */
