/*
 * kjit — compiling CUDA C++ with NVRTC: options, compiler, compiled binaries, async.
 */
#ifndef KJIT_COMPILE_H
#define KJIT_COMPILE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Outputs and tiers ---------------------------------------------------------------- */

/** What a compile produces (bit mask). */
typedef enum kjit_output {
  KJIT_OUTPUT_PTX = 1,   /**< PTX text (always available except with LTO-IR) */
  KJIT_OUTPUT_CUBIN = 2, /**< CUBIN (ELF) for an exact sm_XY / sm_XYa target */
  KJIT_OUTPUT_LTOIR = 4  /**< LTO-IR (-dlto), for nvJitLink; exclusive with the others */
} kjit_output;

/** Where a binary came from. */
typedef enum kjit_tier {
  KJIT_TIER_COMPILED = 0, /**< NVRTC ran for this request */
  KJIT_TIER_MEMORY = 1,   /**< in-process memory tier hit */
  KJIT_TIER_DISK = 2,     /**< SQLite tier hit (this or another process compiled it) */
  KJIT_TIER_REMOTE = 3    /**< remote (fleet) tier hit */
} kjit_tier;

/* ---- Options builder ----------------------------------------------------------------- */

/**
 * Create an empty options builder. Defaults: target "auto" (the exact architecture of
 * device 0; needs a CUDA driver — pass an explicit target for compile-only use), outputs
 * PTX + CUBIN for sm_ targets or PTX for compute_ targets, program name "kernel.cu".
 * Ownership: the caller owns *out and frees it with kjit_options_destroy().
 * Thread-safety: a builder may be read by any number of concurrent compiles, but must not
 * be modified while another thread uses it. Compiles copy what they need; the builder can
 * be changed or destroyed as soon as kjit_compile*() returns.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT, KJIT_ERROR_OUT_OF_MEMORY.
 */
KJIT_EXPORT kjit_status kjit_options_create(kjit_options** out);

/** Create a deep copy of `src`. Same ownership rules as kjit_options_create(). */
KJIT_EXPORT kjit_status kjit_options_clone(const kjit_options* src, kjit_options** out);

/** Destroy a builder. NULL is a no-op. */
KJIT_EXPORT void kjit_options_destroy(kjit_options* opts);

/**
 * Set the target: "sm_80", "sm_90", "sm_90a", "sm_100", "compute_90" (PTX only), or
 * "auto" (exact architecture of the compile's device, resolved through the CUDA driver).
 * Checked against nvrtcGetSupportedArchs() at compile time; an unsupported target fails
 * with KJIT_ERROR_UNSUPPORTED_TARGET and a message listing the supported ones.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (malformed).
 */
KJIT_EXPORT kjit_status kjit_options_set_target(kjit_options* opts, const char* target);

/** Device whose architecture target "auto" resolves to (default 0). */
KJIT_EXPORT kjit_status kjit_options_set_device(kjit_options* opts, int device);

/** Select outputs (KJIT_OUTPUT_* mask, 0 = defaults). LTO-IR cannot be combined with
 *  PTX or CUBIN; CUBIN needs an sm_ target. Checked at compile time. */
KJIT_EXPORT kjit_status kjit_options_set_outputs(kjit_options* opts, unsigned outputs);

/** Name of the program (appears in the log and __FILE__); its directory is searched for
 *  `#include "..."` files like a source file's directory. Default "kernel.cu". */
KJIT_EXPORT kjit_status kjit_options_set_name(kjit_options* opts, const char* name);

/**
 * Append one raw NVRTC option, e.g. "-std=c++17", "--use_fast_math", "-maxrregcount=64",
 * "-DTILE=128", "-I/path", "--Ofast-compile=max", "--split-compile=0". Passed to NVRTC as
 * is (after normalisation for the cache key; e.g. "--define-macro=X" and "-DX" hash the
 * same). "-arch=..."/"--gpu-architecture=..." set the target instead. Unknown options are
 * reported by NVRTC at compile time (KJIT_ERROR_INVALID_OPTION).
 * "--no-builtin-std" is kjit's own (NVRTC never sees it): it turns off the built-in
 * standard headers. By default a program that includes one of <cstdint>, <cmath>,
 * <type_traits>, <limits>, <tuple>, <complex>, <cstdio>, <cassert> ... (the list:
 * `kjit info`; docs/cache-keys.md) and finds no file of that name on its include paths
 * and no in-memory header of that name is given kjit's header, which builds on the
 * toolkit's libcu++ (cuda::std) and declares the std:: names device code sees under nvcc;
 * headers with no meaning in device code (<iostream>, <vector>, <mutex> ...) declare
 * nothing. A program that uses them has the built-in set's version in its key.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (NULL/empty).
 */
KJIT_EXPORT kjit_status kjit_options_add(kjit_options* opts, const char* option);

/** Convenience: append "-D<name>" or "-D<name>=<value>" (value may be NULL). */
KJIT_EXPORT kjit_status kjit_options_add_define(kjit_options* opts, const char* name,
                                                const char* value);

/** Convenience: append "-I<path>". Files reachable from the source through this path are
 *  hashed into the cache key, so editing them invalidates cached results. */
KJIT_EXPORT kjit_status kjit_options_add_include_path(kjit_options* opts, const char* path);

/** Add an in-memory header: `#include "<name>"` in the source resolves to `contents`.
 *  Both strings are copied. Adding the same name twice replaces the contents. */
KJIT_EXPORT kjit_status kjit_options_add_header(kjit_options* opts, const char* name,
                                                const char* contents);

/** Add a name expression, e.g. "my_kernel<float, 256>" or "&ns::f<int>". The result maps it
 *  to NVRTC's lowered (mangled) name; kernel handles accept it as the kernel name.
 *  It stays in these options: every later compile with them looks it up (one that names
 *  nothing fails with KJIT_ERROR_NAME_NOT_FOUND, see kjit_compile()). Adding the same
 *  expression twice keeps one. */
KJIT_EXPORT kjit_status kjit_options_add_name_expression(kjit_options* opts, const char* expr);

/**
 * The CUDA toolkit whose headers (<cuda_fp16.h>, <cooperative_groups.h>, <mma.h>, CCCL's
 * <cub/...>, <cuda/std/...>, <cuda/atomic> ...) NVRTC finds without an include option.
 * `root` NULL (the default) finds it automatically: $KJIT_CUDA_HOME, $CUDA_PATH, $CUDA_HOME,
 * else the toolkit the loaded libnvrtc belongs to. A path names a toolkit root (its
 * include/ and include/cccl/, or targets/<arch>-linux/include/, are used). "" turns the
 * toolkit's headers off (for a caller that ships its own CCCL through -I).
 * The toolkit's directories are searched after the caller's own include paths. Its files
 * are not hashed one by one: the cache key covers them with a fingerprint of the toolkit
 * (paths, version files, CCCL's version header, NVRTC's version and build), so upgrading the
 * toolkit or CCCL changes every key while an in-place edit of a toolkit header is not seen.
 * A root (given here or by $KJIT_CUDA_HOME) without cuda_fp16.h fails the compile with
 * KJIT_ERROR_INVALID_OPTION. The string is copied.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_options_set_toolkit(kjit_options* opts, const char* root);

/**
 * Precompiled headers (default on): a program whose includes reach the toolkit is compiled
 * with NVRTC's automatic PCH, so later programs that start with the same #include lines
 * (and options) in this process parse those headers once (3-5x faster for CUB). Results are
 * byte-identical either way and the cache key does not depend on it: before each use, every
 * file the PCH was made from is checked, and a header edited or created earlier on the
 * search path makes a new PCH (docs/cache-keys.md). `enabled` 0 turns it off for these
 * options; $KJIT_PCH=0 turns it off for the process. Options of the caller's own (-pch,
 * --use-pch, --pch-dir ...) also turn kjit's off; a compile that used such a PCH is not
 * stored, since its inputs cannot be checked.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_options_set_pch(kjit_options* opts, int enabled);

/**
 * The include directories of the automatically found CUDA toolkit, separated by ':' in
 * search order ("" when none was found), e.g.
 * "/usr/local/cuda-13.0/include/cccl:/usr/local/cuda-13.0/include". The string is owned by
 * the library and valid for the life of the process. Thread-safe.
 * @since 0.2
 */
KJIT_EXPORT const char* kjit_toolkit_include_path(void);

/* ---- Compiler ------------------------------------------------------------------------ */

/**
 * Create a compiler. If `cache` is non-NULL every compile goes through it (hits return
 * stored results, misses compile and store); the cache must outlive the compiler.
 * `threads` bounds the worker pool used by kjit_compile_async()/kjit_compile_many()
 * (0 = number of CPU cores). Workers start on first use.
 * Thread-safety: a compiler may be used from any number of threads at once; compiles of
 * different sources run in parallel (no global lock is held across NVRTC).
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT, KJIT_ERROR_INVALID_HANDLE (bad cache),
 * KJIT_ERROR_OUT_OF_MEMORY.
 */
KJIT_EXPORT kjit_status kjit_compiler_create(kjit_cache* cache, unsigned threads,
                                             kjit_compiler** out);

/** Destroy a compiler. Waits for its pending async compiles to finish (futures stay
 *  valid). NULL is a no-op. Must not race with other calls on the same compiler. */
KJIT_EXPORT void kjit_compiler_destroy(kjit_compiler* compiler);

/**
 * Compile `source` (NUL-terminated CUDA C++) with `opts` (NULL = defaults).
 * On KJIT_OK *out is a binary. On KJIT_ERROR_COMPILE *out is ALSO set: a binary holding no
 * code whose kjit_binary_log() has NVRTC's full log (so the log can be read without
 * thread-local state). On KJIT_ERROR_NAME_NOT_FOUND *out is also set (since 0.2): its log
 * names each name expression that names nothing in this program and NVRTC's reason, in
 * lines starting "kjit: error: name expression '<expr>'", after any warnings of NVRTC's.
 * On every other status *out is NULL. The caller destroys *out.
 * Name expressions belong to the options: every program compiled with `opts` is asked for
 * all of them, so give programs with different kernels their own options (e.g.
 * kjit_options_clone() of a shared base, then kjit_options_add_name_expression()). When a
 * program also has errors of its own, the status is KJIT_ERROR_COMPILE and the log has
 * both.
 * Errors: KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT, KJIT_ERROR_INVALID_SOURCE
 * (empty or invalid UTF-8), KJIT_ERROR_COMPILE, KJIT_ERROR_INVALID_OPTION,
 * KJIT_ERROR_UNSUPPORTED_TARGET, KJIT_ERROR_NAME_NOT_FOUND (a name expression that names
 * nothing), KJIT_ERROR_CUDA_UNAVAILABLE (target "auto" without a driver), KJIT_ERROR_NVRTC.
 * Cache problems never fail a compile: they are logged once and counted in the stats.
 * Thread-safe.
 */
KJIT_EXPORT kjit_status kjit_compile(kjit_compiler* compiler, const char* source,
                                     const kjit_options* opts, kjit_binary** out);

/** kjit_source_create()'s `size` for a NUL-terminated text. */
#define KJIT_SOURCE_NUL_TERMINATED ((size_t)-1)

/**
 * Make a source object: a copy of `text` (`size` bytes, or up to its NUL with
 * KJIT_SOURCE_NUL_TERMINATED) that kjit checks once (not empty, valid UTF-8, no NUL byte)
 * and never reads for a repeated request again. kjit_compile_source() of a source object
 * and options seen before finds the cache key by the object, where kjit_compile() must read
 * every byte of the source on every call (the caller may have changed them); for large
 * sources compiled again and again, this is the cheaper hit. Include files are checked as
 * with kjit_compile(): a header edited since is a miss.
 * Ownership: the caller destroys *out with kjit_source_destroy(); `text` is not kept.
 * Thread-safety: any thread; a source object may be used by any number of threads and
 * compilers at once (it is never modified).
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT (out or text NULL); KJIT_ERROR_INVALID_SOURCE
 * (empty, not valid UTF-8, or a NUL byte within `size`); KJIT_ERROR_OUT_OF_MEMORY. *out is
 * written only on success.
 * @since 0.3
 */
KJIT_EXPORT kjit_status kjit_source_create(const char* text, size_t size, kjit_source** out);

/** Destroy a source object. NULL is a no-op. Must not race with calls that use it; binaries
 *  compiled from it stay valid. @since 0.3 */
KJIT_EXPORT void kjit_source_destroy(kjit_source* source);

/**
 * kjit_compile() of a source object: the same results, statuses and thread-safety; a
 * request (source object and options) seen before by this compiler is looked up without
 * reading the source's bytes.
 * Returns as kjit_compile(); KJIT_ERROR_INVALID_HANDLE also for a source that is not a live
 * kjit_source.
 * @since 0.3
 */
KJIT_EXPORT kjit_status kjit_compile_source(kjit_compiler* compiler, const kjit_source* source,
                                            const kjit_options* opts, kjit_binary** out);

/**
 * Start compiling on the compiler's worker pool; returns at once with a future.
 * The source and options are copied. Validation errors of the arguments themselves are
 * returned here; everything else is reported by kjit_future_wait().
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT,
 * KJIT_ERROR_OUT_OF_MEMORY. Thread-safe.
 */
KJIT_EXPORT kjit_status kjit_compile_async(kjit_compiler* compiler, const char* source,
                                           const kjit_options* opts, kjit_future** out);

/**
 * Wait up to `timeout_ms` milliseconds (negative = forever, 0 = poll) for the compile.
 * When done, returns exactly what kjit_compile() would have, with the same rules for
 * *out; the binary may be taken once (later calls return KJIT_ERROR_INVALID_ARGUMENT
 * with "result already taken"). KJIT_ERROR_TIMEOUT when not done yet; *out untouched.
 * KJIT_ERROR_CANCELLED after kjit_future_cancel() stopped the compile.
 * Thread-safe with respect to kjit_future_cancel(); one waiter at a time.
 */
KJIT_EXPORT kjit_status kjit_future_wait(kjit_future* future, int64_t timeout_ms,
                                         kjit_binary** out);

/** 1 if the result is ready (kjit_future_wait would not block), 0 if not, -1 for a bad
 *  handle. Thread-safe. */
KJIT_EXPORT int kjit_future_ready(const kjit_future* future);

/** Ask the compile to stop (NVRTC's flow callback is checked between compiler phases).
 *  A compile that already finished keeps its result. Returns KJIT_OK or
 *  KJIT_ERROR_INVALID_HANDLE. Thread-safe. */
KJIT_EXPORT kjit_status kjit_future_cancel(kjit_future* future);

/** Destroy a future. If the compile is still running it is cancelled and its result is
 *  dropped; this call does not wait. NULL is a no-op. */
KJIT_EXPORT void kjit_future_destroy(kjit_future* future);

/**
 * Compile `count` programs in parallel on the worker pool and wait for all of them.
 * `opts` may be NULL (defaults for all) or an array of `count` pointers (entries may be
 * NULL). `outs[i]` and `statuses[i]` receive what kjit_compile() would have given for item
 * i. Returns KJIT_OK when every item succeeded, otherwise the status of the first failed
 * item (by index); argument errors are returned before anything runs. Thread-safe.
 */
KJIT_EXPORT kjit_status kjit_compile_many(kjit_compiler* compiler, size_t count,
                                          const char* const* sources,
                                          const kjit_options* const* opts, kjit_binary** outs,
                                          kjit_status* statuses);

/* ---- Where NVRTC runs: the compile worker (Since 0.2) ---------------------------------- */

/**
 * Where a compiler runs NVRTC for compiles that miss the cache. Hits never involve NVRTC
 * or the worker. Since 0.2.
 *
 * The compile worker is one background process per user, kjit version and toolchain,
 * shared by every process that uses the same cache directory (a private directory under
 * $TMPDIR for memory-only or read-only caches). It is started by the first compile that
 * misses and exits after $KJIT_WORKER_IDLE_S seconds without work (default 300). It keeps
 * NVRTC's precompiled headers warm for all those processes, and an NVRTC crash on some
 * input costs only that compile: it fails with KJIT_ERROR_NVRTC ("the compiler crashed on
 * this input (signal N)"), the caller lives, and the next compile starts a new worker.
 * Results are byte-identical to compiling in-process and are cached the same way.
 */
typedef enum kjit_compile_mode {
  /** The worker; in this process when the worker cannot be started (the reason is logged
   *  once). The default, unless $KJIT_COMPILE_MODE says otherwise. */
  KJIT_COMPILE_MODE_AUTO = 0,
  /** The worker only: a compile fails with KJIT_ERROR_UNSUPPORTED when it cannot start. */
  KJIT_COMPILE_MODE_WORKER = 1,
  /** NVRTC in the calling process (the behaviour of kjit 0.1). */
  KJIT_COMPILE_MODE_INPROCESS = 2
} kjit_compile_mode;

/**
 * Choose where `compiler` runs NVRTC (a kjit_compile_mode value). A new compiler starts
 * with the mode named by the environment variable KJIT_COMPILE_MODE ("auto", "worker" or
 * "inprocess"; unset or unknown = auto). Compiles already running keep their mode.
 * In worker mode each compile also has a time limit ($KJIT_COMPILE_TIMEOUT_S seconds,
 * default 600: KJIT_ERROR_TIMEOUT) and a limit on the worker's memory
 * ($KJIT_COMPILE_MEMORY_MB, default three quarters of the machine's memory:
 * KJIT_ERROR_OUT_OF_MEMORY), both read when the compiler is created.
 * Thread-safe (may be called while other threads compile with the same compiler).
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (unknown mode).
 * Since 0.2.
 */
KJIT_EXPORT kjit_status kjit_compiler_set_compile_mode(kjit_compiler* compiler, int mode);

/**
 * The compile mode of `compiler` (a kjit_compile_mode value) into *mode.
 * Thread-safe. Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT
 * (mode NULL). Since 0.2.
 */
KJIT_EXPORT kjit_status kjit_compiler_get_compile_mode(const kjit_compiler* compiler, int* mode);

/** State of the compile worker that serves a cache (kjit_worker_info_get). Initialise with
 *  KJIT_WORKER_INFO_INIT or kjit_worker_info_init(); new fields are only ever appended.
 *  Since 0.2. */
typedef struct kjit_worker_info {
  uint32_t struct_size;
  int running;            /**< 1 when a worker answered; the fields below are then valid */
  int pch_in_use;         /**< 1 when the worker holds precompiled headers (warm) */
  int64_t pid;            /**< its process id */
  double uptime_s;        /**< seconds since it started */
  double idle_s;          /**< seconds since its last request ended (0 while busy) */
  uint64_t compiles;      /**< compiles it ran */
  uint64_t failures;      /**< of which did not succeed (compile errors included) */
  uint64_t timeouts;      /**< of which were stopped at their time limit */
  uint64_t in_flight;     /**< compiles running or waiting for a slot now */
  uint64_t crashes;       /**< earlier workers of this cache that the compiler crashed */
  uint64_t pch_created;   /**< precompiled headers it created */
  uint64_t pch_used;      /**< compiles that used one */
  uint64_t idle_limit_s;  /**< it exits after this many idle seconds */
  uint64_t rss_bytes;     /**< its resident memory */
} kjit_worker_info;

#define KJIT_WORKER_INFO_INIT {sizeof(kjit_worker_info), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Zero the first `size` bytes of `info` and set info->struct_size = size, ready for
 * kjit_worker_info_get(). Nothing past `size` bytes is written. Normally called through
 * the kjit_worker_info_init() macro, which passes the caller's sizeof.
 * Ownership: the caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `info` is NULL or `size` is smaller
 * than the first released struct (0.2) or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_worker_info_init_sized(kjit_worker_info* info, size_t size);
#define kjit_worker_info_init(info) kjit_worker_info_init_sized((info), sizeof(*(info)))

/**
 * Ask the compile worker that serves `cache` (NULL = the worker of memory-only caches)
 * for its state. Never starts a worker: with none running, returns KJIT_OK with
 * info->running = 0 and the other fields 0.
 * Costs a connection and, the first time in a process without a cache database, NVRTC's
 * version probe (tens of milliseconds).
 * The struct is written within the caller's info->struct_size bytes (struct_size keeps
 * its value); it is checked before anything else.
 * Thread-safe. Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE (bad cache),
 * KJIT_ERROR_INVALID_ARGUMENT (info NULL, struct_size smaller than the first released
 * struct or larger than 4096; nothing is written), KJIT_ERROR_NVRTC.
 * Since 0.2.
 */
KJIT_EXPORT kjit_status kjit_worker_info_get(kjit_cache* cache, kjit_worker_info* info);

/* ---- Compiled binaries --------------------------------------------------------------- */

/** Destroy a binary. NULL is a no-op. Binaries are immutable: every accessor below is
 *  thread-safe, and pointers it returns live as long as the binary. */
KJIT_EXPORT void kjit_binary_destroy(kjit_binary* binary);

/** KJIT_OK for a usable binary, KJIT_ERROR_COMPILE for a failed compile (log only),
 *  KJIT_ERROR_NAME_NOT_FOUND for a compile whose name expressions name nothing (log only;
 *  since 0.2), KJIT_ERROR_INVALID_HANDLE for a bad handle. */
KJIT_EXPORT kjit_status kjit_binary_status(const kjit_binary* binary);

/** Bytes of one output (`kind` is one KJIT_OUTPUT_* value). NULL with *size = 0 when the
 *  binary has no such output. PTX is NUL-terminated; *size excludes the terminator. */
KJIT_EXPORT const void* kjit_binary_data(const kjit_binary* binary, int kind, size_t* size);

/** NVRTC's log (warnings on success, errors on failure); "" when empty. */
KJIT_EXPORT const char* kjit_binary_log(const kjit_binary* binary);

/** Exact target compiled for, e.g. "sm_90" (never "auto"). */
KJIT_EXPORT const char* kjit_binary_target(const kjit_binary* binary);

/** Cache key as 64 lowercase hex digits (computed even without a cache). */
KJIT_EXPORT const char* kjit_binary_key(const kjit_binary* binary);

/** Where the result came from (kjit_tier), or -1 for a bad handle. */
KJIT_EXPORT int kjit_binary_tier(const kjit_binary* binary);

/**
 * Whether the result in `binary` is kept by the cache: 1 when it came from the cache (any
 * tier) or its compile stored it in the disk tier; 0 when it was compiled and not stored,
 * and *reason (when `reason` is not NULL) is set to why, a sentence owned by the binary:
 * "disk full (...)", "the cache is read-only", "the disk cache is disabled
 * (KJIT_CACHE_DISABLE)", or a file NVRTC read that the cache key cannot vouch for ("NVRTC
 * listed the directory /x", "/x/a.h was modified around the time of the compile"). Such a
 * result is correct and usable; the next process compiles it again. -1 for a bad handle,
 * and for a binary of a failed compile (nothing to store). *reason is set to NULL unless
 * the result is 0. Thread-safe.
 * @since 0.2
 */
KJIT_EXPORT int kjit_binary_stored(const kjit_binary* binary, const char** reason);

/** Milliseconds NVRTC took when this result was first compiled (stored with the entry). */
KJIT_EXPORT double kjit_binary_compile_ms(const kjit_binary* binary);

/** Lowered (mangled) name of a name expression given at compile time, or NULL. */
KJIT_EXPORT const char* kjit_binary_lowered_name(const kjit_binary* binary, const char* expr);

/** Number of name expressions; kjit_binary_name_expression(i) / lowered name by index. */
KJIT_EXPORT size_t kjit_binary_name_count(const kjit_binary* binary);
KJIT_EXPORT const char* kjit_binary_name_expression(const kjit_binary* binary, size_t index);
KJIT_EXPORT const char* kjit_binary_lowered_name_at(const kjit_binary* binary, size_t index);

/** `__global__` entry points found in the PTX (".entry" directives), in order. */
KJIT_EXPORT size_t kjit_binary_kernel_count(const kjit_binary* binary);
KJIT_EXPORT const char* kjit_binary_kernel_name(const kjit_binary* binary, size_t index);

/**
 * Number of parameters of kernel `kernel` (a name kjit_binary_kernel_name() gives, or a
 * name expression of the compile) as the binary's PTX declares them. Needs no GPU: with
 * kjit_binary_param_info() a host program checks its struct against the compiled kernel
 * before any launch (docs/cutlass.md).
 * Returns KJIT_OK; KJIT_ERROR_INVALID_HANDLE; KJIT_ERROR_INVALID_ARGUMENT (NULL argument);
 * KJIT_ERROR_NAME_NOT_FOUND (no such kernel); KJIT_ERROR_UNSUPPORTED (a binary without PTX,
 * or of a failed compile, or a parameter declared in a form kjit does not read).
 * Thread-safe. @since 0.2
 */
KJIT_EXPORT kjit_status kjit_binary_param_count(const kjit_binary* binary, const char* kernel,
                                                size_t* count);

/** Size and alignment in bytes of parameter `index` of kernel `kernel`, as its PTX declares
 *  them (".param .align 64 .b8 p[1280]": 1280 and 64; ".param .u64 p": 8 and 8). The size
 *  is the one the driver's layout gives (kjit_kernel_param_info()). Errors as
 *  kjit_binary_param_count(), and KJIT_ERROR_INVALID_ARGUMENT for an index past the last.
 *  Thread-safe. @since 0.2 */
KJIT_EXPORT kjit_status kjit_binary_param_info(const kjit_binary* binary, const char* kernel,
                                               size_t index, size_t* size, size_t* align);

/**
 * Performance advisories ptxas wrote into the compile log: its "Potential Performance Loss"
 * lines, e.g. "(C7510) Potential Performance Loss: wgmma.mma_async instructions are
 * serialized due to ..." (device code calling a function, such as a device assert's
 * handler, inside a wgmma pipeline: compile with -DNDEBUG). Counted from the stored log, so
 * a cache hit reports what the compile reported; also in kjit_binary_metadata_json()
 * ("advisories") and in `kjit compile`'s output. 0 for a bad handle or a failed compile.
 * Thread-safe. @since 0.2
 */
KJIT_EXPORT size_t kjit_binary_advisory_count(const kjit_binary* binary);

/** Advisory `index` (without ptxas's "ptxas info    : " prefix), or NULL past the last.
 *  Lives as long as the binary. Thread-safe. @since 0.2 */
KJIT_EXPORT const char* kjit_binary_advisory(const kjit_binary* binary, size_t index);

/** Metadata as a JSON object (options, target, names, kernels, toolchain, sizes, times, and
 *  "advisories": the performance advisories of kjit_binary_advisory()). */
KJIT_EXPORT const char* kjit_binary_metadata_json(const kjit_binary* binary);

/* ---- Stable hashes ------------------------------------------------------------------- */

/** SHA-256 of `len` bytes as 64 lowercase hex digits + NUL into out_hex[65]. Identical on
 *  every process and machine. Thread-safe. */
KJIT_EXPORT kjit_status kjit_hash_source(const char* data, size_t len, char out_hex[65]);

/** SHA-256 over a length-prefixed, order-sensitive encoding of `count` strings, so that
 *  {"ab","c"} and {"a","bc"} differ and so do {"a","b"} and {"b","a"}. Thread-safe. */
KJIT_EXPORT kjit_status kjit_hash_options(const char* const* options, size_t count,
                                          char out_hex[65]);

/**
 * The cache key kjit_compile() would give for (source, opts) now.
 * A program that cannot read files (no #include, __has_include or pre-included header)
 * is not compiled: its key is a hash of the request. The key of a program that can read
 * files covers the files NVRTC reads for it (docs/cache-keys.md): it is taken from the
 * default cache's record of an earlier compile when every file of that record is
 * unchanged; otherwise the program is compiled (and its result stored in the default
 * cache) to learn what NVRTC reads, and a compile error still gives the key.
 * Target "auto" needs the CUDA driver. Returns the same argument/target errors as
 * kjit_compile(), and its failures other than compile errors. Thread-safe.
 */
KJIT_EXPORT kjit_status kjit_compute_key(const char* source, const kjit_options* opts,
                                         char out_hex[65]);

/**
 * The cache key kjit_compile() through a compiler of `cache` would give for (source, opts)
 * now, without ever compiling: for a program that cannot read files, the key
 * kjit_compute_key() gives; for one that can, the key from `cache`'s record of an earlier
 * compile of it, while every file of that record is unchanged. *known is 1 with the key in
 * out_hex, or 0 with out_hex "" when only a compile can tell (no record in `cache`, a file
 * of it changed, or `cache` is NULL). What `kjit warm --dry-run` prints. Returns the same
 * argument/target errors as kjit_compile(). Thread-safe.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_compute_key_cached(kjit_cache* cache, const char* source,
                                                const kjit_options* opts, char out_hex[65],
                                                int* known);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_COMPILE_H */
