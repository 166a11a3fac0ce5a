/*
 * kjit — common definitions: export macro, version, status codes, errors, logging.
 *
 * Conventions used by every kjit header:
 *  - Every fallible function returns a kjit_status. KJIT_OK (0) means success.
 *  - Out-parameters are written only on success unless a function says otherwise.
 *  - Every *_create / *_open has a matching *_destroy / *_close; passing NULL to those
 *    is a no-op.
 *  - Handles carry a magic number: a destroyed or foreign pointer is reported as
 *    KJIT_ERROR_INVALID_HANDLE in most cases (not guaranteed for freed memory).
 *  - Strings are UTF-8 and NUL-terminated. A `const char*` returned by kjit is owned by
 *    the object it came from and lives as long as that object unless stated otherwise.
 *  - No C++ exception ever crosses this interface.
 */
#ifndef KJIT_COMMON_H
#define KJIT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KJIT_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define KJIT_EXPORT __attribute__((visibility("default")))
#else
#define KJIT_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------------------ */

#define KJIT_VERSION_MAJOR 0
#define KJIT_VERSION_MINOR 3
#define KJIT_VERSION_PATCH 0
/** Version as one number: major * 10000 + minor * 100 + patch. */
#define KJIT_VERSION (KJIT_VERSION_MAJOR * 10000 + KJIT_VERSION_MINOR * 100 + KJIT_VERSION_PATCH)

/** Run-time library version, encoded as KJIT_VERSION. Thread-safe. Never fails. */
KJIT_EXPORT int kjit_version(void);

/** Run-time library version as "major.minor.patch". Static storage. Thread-safe. */
KJIT_EXPORT const char* kjit_version_string(void);


/* ---- Status codes -------------------------------------------------------------------- */

/** Status codes. Numeric values are stable and never reused. */
typedef enum kjit_status {
  KJIT_OK = 0,
  KJIT_ERROR_INVALID_ARGUMENT = 1,   /**< NULL pointer, bad value, out-of-range index */
  KJIT_ERROR_INVALID_HANDLE = 2,     /**< NULL, destroyed or foreign handle */
  KJIT_ERROR_OUT_OF_MEMORY = 3,      /**< host allocation failed */
  KJIT_ERROR_INVALID_SOURCE = 4,     /**< empty or non-UTF-8 source */
  KJIT_ERROR_COMPILE = 5,            /**< NVRTC reported a compile error; see the log */
  KJIT_ERROR_INVALID_OPTION = 6,     /**< option NVRTC or kjit does not accept */
  KJIT_ERROR_UNSUPPORTED_TARGET = 7, /**< target architecture not supported by this NVRTC */
  KJIT_ERROR_NAME_NOT_FOUND = 8,     /**< name expression or kernel name not in the program */
  KJIT_ERROR_NVRTC = 9,              /**< any other NVRTC failure */
  KJIT_ERROR_CACHE = 10,             /**< cache could not be opened, read or written */
  KJIT_ERROR_CACHE_CORRUPT = 11,     /**< cache data failed an integrity check */
  KJIT_ERROR_NOT_FOUND = 12,         /**< lookup found nothing (raw cache access) */
  KJIT_ERROR_READ_ONLY = 13,         /**< write to a cache opened read-only */
  KJIT_ERROR_CUDA_UNAVAILABLE = 14,  /**< no CUDA driver or no device */
  KJIT_ERROR_CUDA = 15,              /**< CUDA driver call failed; message has its name */
  KJIT_ERROR_ARGUMENT_MISMATCH = 16, /**< launch arguments do not match the kernel */
  KJIT_ERROR_STALE_HANDLE = 17,      /**< kernel's context was reset and reload is off */
  KJIT_ERROR_CUDA_STICKY = 18,       /**< sticky device error: the context is unusable */
  KJIT_ERROR_UNSUPPORTED = 19,       /**< valid request this build/device cannot serve */
  KJIT_ERROR_CANCELLED = 20,         /**< operation was cancelled */
  KJIT_ERROR_TIMEOUT = 21,           /**< wait timed out (the operation continues), or a
                                          compile passed its time limit (stopped) */
  KJIT_ERROR_BUFFER_TOO_SMALL = 22,  /**< caller's buffer too small; required size given */
  KJIT_ERROR_CUBLAS = 23,            /**< cuBLASLt call failed */
  KJIT_ERROR_IO = 24,                /**< file system error outside the cache */
  KJIT_ERROR_LINK = 25,              /**< nvJitLink reported a link error (undefined or
                                          duplicate symbol, bad input...); see the log */
  KJIT_ERROR_NVJITLINK = 26,         /**< nvJitLink not available, or failed internally */
  KJIT_ERROR_INTERNAL = 99           /**< bug in kjit; please report */
} kjit_status;

/** Static English name of a status, e.g. "KJIT_ERROR_COMPILE: compilation failed".
 *  Unknown values give "unknown kjit status". Thread-safe. */
KJIT_EXPORT const char* kjit_status_string(int status);

/**
 * Message describing the most recent failure on the calling thread: what failed, with
 * which input, and the underlying library's own error string. Valid until the next kjit
 * call on this thread; copy it if you need it longer. "" if the last call succeeded.
 * Callers whose language may move them between OS threads (Go, Julia) should prefer the
 * per-object error accessors such as kjit_binary_log() or lock the thread for the call.
 */
KJIT_EXPORT const char* kjit_last_error(void);

/**
 * The NVRTC in use, e.g. "13.0.88 (CL-36424714)": major.minor from nvrtcVersion() and the
 * build number and compiler build id read once per process from a probe compile (which
 * costs tens of milliseconds the first time; cached in the kjit cache database when one is
 * open). The returned string has static storage. Thread-safe.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT (out NULL) or KJIT_ERROR_NVRTC.
 */
KJIT_EXPORT kjit_status kjit_nvrtc_version(const char** out);

/* ---- Logging ------------------------------------------------------------------------- */

typedef enum kjit_log_level {
  KJIT_LOG_DEBUG = 0,
  KJIT_LOG_INFO = 1,
  KJIT_LOG_WARN = 2,
  KJIT_LOG_ERROR = 3
} kjit_log_level;

/** Log callback: level, NUL-terminated message (valid during the call), user pointer.
 *  May be called from any thread, including kjit's worker threads; must not call kjit. */
typedef void (*kjit_log_fn)(int level, const char* message, void* user);

/**
 * Route kjit's diagnostics to `fn` (NULL restores the default). The default writes
 * warnings and errors to stderr only when the environment variable KJIT_LOG is set
 * (KJIT_LOG=debug|info|warn|error picks the minimum level). Thread-safe.
 */
KJIT_EXPORT void kjit_set_log_callback(kjit_log_fn fn, void* user);

/* ---- Opaque handles (declared here so every header can use them) ---------------------- */

typedef struct kjit_cache kjit_cache;       /**< persistent kernel cache (cache.h) */
typedef struct kjit_options kjit_options;   /**< compile options builder (compile.h) */
typedef struct kjit_compiler kjit_compiler; /**< NVRTC front end (compile.h) */
typedef struct kjit_binary kjit_binary;     /**< compiled result (compile.h) */
typedef struct kjit_future kjit_future;     /**< pending async compile (compile.h) */
typedef struct kjit_kernel kjit_kernel;     /**< loaded, launchable kernel (kernel.h) */
typedef struct kjit_gemm kjit_gemm;         /**< cuBLASLt GEMM with plan cache (gemm.h) */
typedef struct kjit_linker kjit_linker;     /**< nvJitLink link step (link.h) */
typedef struct kjit_source kjit_source;     /**< immutable source, hashed once (compile.h) */

#ifdef __cplusplus
}
#endif

#endif /* KJIT_COMMON_H */
