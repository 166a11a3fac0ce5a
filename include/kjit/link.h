/*
 * kjit — the link step: kjit binaries and device code from elsewhere (LTO-IR, PTX, CUBIN,
 * fatbinaries, objects, static libraries) linked by nvJitLink into a CUBIN, cached like a
 * compile. Since 0.2.
 *
 * This is how separately compiled device code becomes a kernel: sources compiled with
 * "-rdc=true" (PTX or CUBIN) or to LTO-IR (KJIT_OUTPUT_LTOIR, i.e. "-dlto"), where one calls
 * an `extern __device__` function another defines, or generated code linked against a
 * device library shipped as LTO-IR, a fatbinary or a static library.
 *
 * nvJitLink (libnvJitLink.so.13; $KJIT_NVJITLINK_LIBRARY names another file) is opened with
 * dlopen on the first link: a process that never links never loads it, and a machine
 * without it gets KJIT_ERROR_NVJITLINK from kjit_link(), with the message
 * "libnvJitLink.so.13 (nvJitLink) cannot be used: ...".
 *
 * The cache key of a link covers every input's kind and bytes in order (a kjit binary is
 * covered by its own cache key, which determines its bytes), the target, the options in
 * order, the outputs, nvJitLink's version and the build id of the library file. It can never
 * equal a compile key. A hit skips nvJitLink. Failures are never stored.
 *
 * A kernel is loaded from a link result with kjit_kernel_from_binary() (kernel.h), by its
 * extern "C" or mangled name, or by a name expression of one of the kjit binaries that were
 * linked: their expressions and lowered names are carried into the result.
 */
#ifndef KJIT_LINK_H
#define KJIT_LINK_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Kinds of link input (the values of nvJitLinkInputType). */
typedef enum kjit_link_input {
  KJIT_LINK_INPUT_AUTO = 0,   /**< files only: from the name (.cubin .ptx .ltoir .fatbin .o .a) */
  KJIT_LINK_INPUT_CUBIN = 1,  /**< relocatable CUBIN (compiled with -rdc=true) */
  KJIT_LINK_INPUT_PTX = 2,    /**< PTX text (compiled with -rdc=true) */
  KJIT_LINK_INPUT_LTOIR = 3,  /**< LTO-IR (compiled with -dlto; link with -lto) */
  KJIT_LINK_INPUT_FATBIN = 4, /**< fatbinary (nvcc -fatbin -rdc=true ...) */
  KJIT_LINK_INPUT_OBJECT = 5, /**< host object file with embedded device code */
  KJIT_LINK_INPUT_LIBRARY = 6 /**< static library (ar archive) of such objects */
} kjit_link_input;

/**
 * Create a linker: a builder holding the inputs, options and target of a link. If `cache`
 * is non-NULL every kjit_link() goes through it; the cache must outlive the linker.
 * Ownership: the caller owns *out and frees it with kjit_linker_destroy().
 * Thread-safety: a linker may be used by any number of concurrent kjit_link() calls, but
 * must not be modified (set/add) while another thread uses it.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT (out NULL), KJIT_ERROR_INVALID_HANDLE (bad
 * cache), KJIT_ERROR_OUT_OF_MEMORY.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_create(kjit_cache* cache, kjit_linker** out);

/** Destroy a linker. Binaries it produced stay valid. NULL is a no-op.
 *  @since 0.2 */
KJIT_EXPORT void kjit_linker_destroy(kjit_linker* linker);

/**
 * Set the target: an exact architecture "sm_90", "sm_90a", "sm_100f", or "auto" (device 0's
 * architecture, resolved through the CUDA driver at kjit_link() time). Without a target the
 * link uses the target of the first kjit binary added. The option "-arch=sm_XY" does the
 * same. The string is copied.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (NULL/empty);
 * a malformed target fails kjit_link() with KJIT_ERROR_INVALID_OPTION.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_set_target(kjit_linker* linker, const char* target);

/**
 * Append one nvJitLink option, passed on as is: "-lto" (link-time optimisation: needed for
 * LTO-IR inputs), "-O3", "-maxrregcount=64", "-ftz=1", "-prec-div=0", "-prec-sqrt=0",
 * "-fma=1", "-split-compile=0", "-lineinfo", "-kernels-used=name", "-Xptxas=...",
 * "-optimize-unused-variables" (drops device variables the linked code does not use:
 * sources compiled with -rdc=true keep every one of them otherwise, e.g. CUB's).
 * "-arch=sm_XY" sets the target instead; "-ptx" is refused (ask for KJIT_OUTPUT_PTX).
 * Options nvJitLink does not know fail kjit_link() with KJIT_ERROR_INVALID_OPTION.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (NULL/empty).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_add_option(kjit_linker* linker, const char* option);

/**
 * What the link produces (KJIT_OUTPUT_* mask of compile.h, 0 = the default, CUBIN):
 * KJIT_OUTPUT_CUBIN and/or KJIT_OUTPUT_PTX. PTX needs "-lto" (nvJitLink makes PTX from
 * LTO-IR only); CUBIN and PTX together run nvJitLink twice on a miss. Checked by kjit_link().
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_set_outputs(kjit_linker* linker, unsigned outputs);

/**
 * Add a kjit binary (a compile or link result): its LTO-IR if it has one, else its CUBIN
 * when that was compiled for the link's architecture, else its PTX. The binary may be
 * destroyed afterwards (the linker keeps what it needs). `name` (may be NULL: the
 * binary's program name) labels it in nvJitLink's log.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE (bad linker or binary),
 * KJIT_ERROR_INVALID_ARGUMENT (a failed compile's binary, which holds no code).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_add_binary(kjit_linker* linker, const kjit_binary* binary,
                                               const char* name);

/**
 * Add `size` bytes of device code of kind `kind` (a kjit_link_input other than AUTO); the
 * bytes are copied. `name` (may be NULL) labels it in nvJitLink's log.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (NULL or empty
 * data, unknown kind, or bytes that cannot be of that kind: a CUBIN or object without an
 * ELF header, a fatbinary or library without its magic number, PTX that is not text; other
 * malformed inputs are reported by kjit_link() as KJIT_ERROR_LINK with nvJitLink's log).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_add_data(kjit_linker* linker, int kind, const void* data,
                                             size_t size, const char* name);

/**
 * Add the file at `path`, read now (later edits of the file are not seen). `kind`
 * KJIT_LINK_INPUT_AUTO picks the kind from the extension (.cubin, .ptx, .ltoir or .lto,
 * .fatbin, .o, .a).
 * Returns what kjit_linker_add_data() returns, and KJIT_ERROR_IO when the file cannot be
 * read.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_add_file(kjit_linker* linker, int kind, const char* path);

/**
 * Link the inputs (or hit the cache).
 * On KJIT_OK *out is a binary holding the CUBIN (and PTX if asked), its kernels
 * (kjit_binary_kernel_name), the name expressions of the kjit binaries linked, nvJitLink's
 * info log (kjit_binary_log) and the link key (kjit_binary_key); kjit_binary_tier() says
 * whether nvJitLink ran (KJIT_TIER_COMPILED) or the cache answered.
 * When nvJitLink itself reports the failure, *out is ALSO set: a binary holding no code
 * whose kjit_binary_status() is the failure and whose kjit_binary_log() is nvJitLink's error
 * and info log (e.g. "Unresolved extern function '_Z1ff'"). On every other status *out is
 * NULL. The caller destroys *out.
 * Errors: KJIT_ERROR_INVALID_HANDLE; KJIT_ERROR_INVALID_ARGUMENT (no inputs);
 * KJIT_ERROR_INVALID_OPTION (no or malformed target, an option nvJitLink refuses, PTX
 * without -lto, LTO-IR without -lto); KJIT_ERROR_UNSUPPORTED_TARGET (an input compiled for a
 * newer architecture than the target, or a CUBIN for another one);
 * KJIT_ERROR_LINK (undefined or duplicate symbols, inputs nvJitLink cannot read, a PTX
 * input that does not assemble); KJIT_ERROR_NVJITLINK (nvJitLink missing or failing
 * internally); KJIT_ERROR_CUDA_UNAVAILABLE (target "auto" without a driver).
 * Cache problems never fail a link. Thread-safe (see kjit_linker_create()).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_link(kjit_linker* linker, kjit_binary** out);

/**
 * The cache key kjit_link() would use, as 64 lowercase hex digits + NUL into out_hex[65],
 * without linking (it loads nvJitLink, whose identity is part of the key).
 * Returns kjit_link()'s argument, option and target errors, KJIT_ERROR_NVJITLINK.
 * Thread-safe (see kjit_linker_create()).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_linker_key(kjit_linker* linker, char out_hex[65]);

/**
 * The nvJitLink in use, e.g. "nvJitLink 13.0 build-id:157d67e6...": its version and the
 * build id of the library file, as the link keys cover them. Loads nvJitLink. Static
 * storage. Thread-safe.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT (out NULL), KJIT_ERROR_NVJITLINK.
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_nvjitlink_version(const char** out);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_LINK_H */
