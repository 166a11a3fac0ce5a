/*
 * kjit — devices, loaded kernels and launches through the CUDA Driver API.
 *
 * libcuda.so.1 is opened with dlopen on first need, so everything in compile.h and
 * cache.h works on machines without a GPU driver; the functions here then return
 * KJIT_ERROR_CUDA_UNAVAILABLE with a message saying why.
 *
 * Context rule: kernels are loaded into the calling thread's current CUDA context if it
 * has one and it belongs to the requested device; otherwise into the device's primary
 * context (retained by kjit, so it interoperates with the CUDA runtime, PyTorch, CuPy and
 * CUDA.jl). A kernel launches in the context it was loaded into; kjit makes it current
 * for the launch when it is not, and restores the caller's afterwards.
 *
 * Several devices: a kernel handle belongs to one device. Create one handle per device
 * from the same source and compiler; devices of the same architecture share the compiled
 * result (one compile, then a cache hit and a module load per device). A handle created
 * for device 1 launches in device 1's context whatever context the calling thread has
 * current (device 0's, none, or another), so one thread may drive several devices, and
 * threads may drive different devices at once. cfg->stream must be a stream of the
 * kernel's own context (or NULL, that context's legacy stream); a stream of another
 * device is refused by the driver, and kjit's message names both contexts.
 * After cuDevicePrimaryCtxReset (or cudaDeviceReset) of one device, that device's handles
 * reload into its primary context on their next use (or report KJIT_ERROR_STALE_HANDLE
 * with KJIT_KERNEL_NO_RELOAD); a handle whose code lived in the primary context goes back
 * there whatever the reloading thread has current. Handles of other devices are not
 * touched.
 *
 * Peer memory: kjit never enables peer access. A kernel on one device may read or write
 * another device's memory only after the caller has enabled it (cuCtxEnablePeerAccess
 * with the kernel's context current, or cudaDeviceEnablePeerAccess on the kernel's
 * device), and only where cuDeviceCanAccessPeer allows it.
 */
#ifndef KJIT_KERNEL_H
#define KJIT_KERNEL_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Devices ------------------------------------------------------------------------- */

/** Number of CUDA devices. KJIT_ERROR_CUDA_UNAVAILABLE without a driver. Thread-safe. */
KJIT_EXPORT kjit_status kjit_device_count(int* count);

/** Exact architecture of a device as an NVRTC target, e.g. "sm_90", into out[size].
 *  KJIT_ERROR_BUFFER_TOO_SMALL if size < 16. Thread-safe. */
KJIT_EXPORT kjit_status kjit_device_arch(int device, char* out, size_t size);

/** The same architecture as kjit_device_arch(), without initialising the CUDA driver where
 *  `cache` already knows it for this machine: for a process that only compiles (target
 *  "auto"), the driver's initialisation is most of a cache hit's time (15-50 ms).
 *
 *  The record is a fact in the cache, kept per fingerprint of what decides the device's
 *  architecture: the kernel driver's version and the GPUs it lists (/proc/driver/nvidia:
 *  bus location, model, UUID), the GPU device nodes, and CUDA_VISIBLE_DEVICES,
 *  CUDA_DEVICE_ORDER, CUDA_MPS_PIPE_DIRECTORY (and whether an MPS server runs),
 *  KJIT_CUDA_DRIVER. Any change gives another fingerprint, and the driver is asked. The
 *  driver is also asked where the fingerprint cannot be read (no /proc/driver/nvidia), where
 *  `cache` is NULL, and where a CUDA driver library is already loaded in this process (its
 *  devices were enumerated with the environment of that time); its answer is recorded for
 *  later processes (not in a read-only cache). An answer is kept for the rest of the
 *  process, per device, as the driver keeps its devices once initialised (and as
 *  kjit_device_arch() does).
 *
 *  out: at least 16 bytes (KJIT_ERROR_BUFFER_TOO_SMALL). from_record (may be NULL): set to 1
 *  when the record answered, 0 when the driver did. Errors: as kjit_device_arch() when the
 *  driver is asked (KJIT_ERROR_CUDA_UNAVAILABLE without one); KJIT_ERROR_INVALID_HANDLE for a
 *  closed cache. Thread-safe. */
KJIT_EXPORT kjit_status kjit_device_arch_cached(kjit_cache* cache, int device, char* out,
                                               size_t size, int* from_record);

/** Device name (e.g. "NVIDIA H200") into out[size]. Thread-safe. */
KJIT_EXPORT kjit_status kjit_device_name(int device, char* out, size_t size);

/** CUDA driver version (e.g. 13000). Thread-safe. */
KJIT_EXPORT kjit_status kjit_driver_version(int* version);

/* ---- Kernel handles ------------------------------------------------------------------ */

/** How a kernel's code was loaded. */
typedef enum kjit_load_path {
  KJIT_LOAD_CUBIN = 0, /**< CUBIN for the device's exact architecture */
  KJIT_LOAD_PTX = 1    /**< PTX JIT-compiled by the driver (no matching CUBIN) */
} kjit_load_path;

/** Kernel flags for kjit_kernel_create() / kjit_kernel_from_binary(). */
typedef enum kjit_kernel_flags {
  KJIT_KERNEL_DEFAULT = 0,
  /** Return KJIT_ERROR_STALE_HANDLE instead of reloading transparently when the context
   *  the kernel was loaded into was reset or destroyed. */
  KJIT_KERNEL_NO_RELOAD = 1,
  /** Load PTX through the driver JIT even when a CUBIN is available. */
  KJIT_KERNEL_FORCE_PTX = 2
} kjit_kernel_flags;

/**
 * Compile-or-hit `source` with `opts` for `device` and load the kernel named `name` (an
 * extern "C" name, a mangled name, or a name expression added with
 * kjit_options_add_name_expression(); a name that is a name expression but was not added
 * is added automatically). The options' target is forced to the device's exact
 * architecture unless it is an explicit "sm_XYa" variant for that architecture.
 * If NVRTC cannot make a CUBIN for the device, PTX is loaded instead (see
 * kjit_kernel_load_path()).
 * On KJIT_ERROR_COMPILE, and on KJIT_ERROR_NAME_NOT_FOUND from the compile (a name
 * expression that names nothing), `log_out` (if non-NULL) receives a binary holding the
 * log, which the caller destroys; otherwise *log_out is set to NULL.
 * Ownership: the caller destroys *out with kjit_kernel_destroy(). Modules are shared by
 * every handle of the same (context, entry) and unloaded with the last one.
 * Thread-safety: handles may be shared between threads; see kjit_kernel_launch().
 * Returns everything kjit_compile() can, KJIT_ERROR_NAME_NOT_FOUND, KJIT_ERROR_CUDA,
 * KJIT_ERROR_CUDA_UNAVAILABLE.
 */
KJIT_EXPORT kjit_status kjit_kernel_create(kjit_compiler* compiler, const char* source,
                                           const char* name, const kjit_options* opts,
                                           int device, unsigned flags, kjit_kernel** out,
                                           kjit_binary** log_out);

/** Load kernel `name` from an already compiled binary onto `device`. The binary may be
 *  destroyed afterwards (the kernel keeps what it needs). Errors as kjit_kernel_create(),
 *  plus KJIT_ERROR_UNSUPPORTED when the binary has neither a CUBIN for the device nor PTX. */
KJIT_EXPORT kjit_status kjit_kernel_from_binary(const kjit_binary* binary, const char* name,
                                                int device, unsigned flags, kjit_kernel** out);

/** Destroy a kernel handle. NULL is a no-op. Must not race with launches of the same
 *  handle. */
KJIT_EXPORT void kjit_kernel_destroy(kjit_kernel* kernel);

/** Load path taken (kjit_load_path), or -1 for a bad handle. */
KJIT_EXPORT int kjit_kernel_load_path(const kjit_kernel* kernel);

/** Mangled symbol of the loaded function. Lives as long as the kernel. */
KJIT_EXPORT const char* kjit_kernel_symbol(const kjit_kernel* kernel);

/** Number of parameters of the kernel (from cuFuncGetParamInfo). */
KJIT_EXPORT kjit_status kjit_kernel_param_count(const kjit_kernel* kernel, size_t* count);

/** Offset and size in bytes of parameter `index` in the kernel's parameter buffer. */
KJIT_EXPORT kjit_status kjit_kernel_param_info(const kjit_kernel* kernel, size_t index,
                                               size_t* offset, size_t* size);

/** Total bytes of the packed parameter buffer (last offset + size). */
KJIT_EXPORT kjit_status kjit_kernel_param_buffer_size(const kjit_kernel* kernel, size_t* size);

/** Kernel attributes. Initialise with KJIT_KERNEL_ATTRIBUTES_INIT or
 *  kjit_kernel_attributes_init(); new fields are only ever appended. */
typedef struct kjit_kernel_attributes {
  uint32_t struct_size;
  int num_regs;
  int static_shared_bytes;
  int const_bytes;
  int local_bytes;
  int max_threads_per_block;
  int max_dynamic_shared_bytes;
  int ptx_version;    /**< e.g. 90 */
  int binary_version; /**< e.g. 90 */
} kjit_kernel_attributes;

#define KJIT_KERNEL_ATTRIBUTES_INIT {sizeof(kjit_kernel_attributes), 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Zero the first `size` bytes of `attrs` and set attrs->struct_size = size, ready for
 * kjit_kernel_get_attributes(). Nothing past `size` bytes is written. Normally called
 * through the kjit_kernel_attributes_init() macro, which passes the caller's sizeof.
 * Ownership: the caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `attrs` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_kernel_attributes_init_sized(kjit_kernel_attributes* attrs,
                                                          size_t size);
#define kjit_kernel_attributes_init(attrs) \
  kjit_kernel_attributes_init_sized((attrs), sizeof(*(attrs)))

/** The kernel's attributes (cuFuncGetAttribute), written within the caller's
 *  attrs->struct_size bytes (struct_size keeps its value). The struct is checked before the
 *  handle and before the driver is used. Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT
 *  (attrs NULL, struct_size smaller than the 0.1.0 struct or larger than 4096; nothing is
 *  written), KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_CUDA. Thread-safe. */
KJIT_EXPORT kjit_status kjit_kernel_get_attributes(const kjit_kernel* kernel,
                                                   kjit_kernel_attributes* attrs);

/** Raise the kernel's maximum dynamic shared memory (cuFuncSetAttribute). A launch that
 *  asks for more than the limit raises it itself (kjit_kernel_launch()); this sets it
 *  ahead, e.g. before kjit_kernel_occupancy(). */
KJIT_EXPORT kjit_status kjit_kernel_set_max_dynamic_shared(kjit_kernel* kernel, int bytes);

/** Maximum active blocks per SM for `block_size` threads and `dynamic_shared` bytes. */
KJIT_EXPORT kjit_status kjit_kernel_occupancy(const kjit_kernel* kernel, int block_size,
                                              size_t dynamic_shared, int* blocks_per_sm);

/** Block size that maximises occupancy, and the minimum grid to fill the device. */
KJIT_EXPORT kjit_status kjit_kernel_suggest_block_size(const kjit_kernel* kernel,
                                                       size_t dynamic_shared, int* min_grid,
                                                       int* block_size);

/* ---- Launch -------------------------------------------------------------------------- */

/** Launch configuration. Initialise with KJIT_LAUNCH_CONFIG_INIT; new fields are only
 *  appended. */
typedef struct kjit_launch_config {
  uint32_t struct_size;
  uint32_t grid[3];   /**< blocks per grid, each >= 1 */
  uint32_t block[3];  /**< threads per block, each >= 1 */
  uint32_t shared_bytes; /**< dynamic shared memory */
  void* stream;       /**< CUstream / cudaStream_t; NULL = the legacy default stream */
  uint32_t cluster[3];   /**< thread-block cluster dims (sm_90+); {0,0,0} = none */
  int cooperative;    /**< non-zero: cooperative launch (grid-wide sync allowed) */
} kjit_launch_config;

#define KJIT_LAUNCH_CONFIG_INIT \
  {sizeof(kjit_launch_config), {1, 1, 1}, {1, 1, 1}, 0, NULL, {0, 0, 0}, 0}

/**
 * Fill the first `size` bytes of `cfg` with the defaults of KJIT_LAUNCH_CONFIG_INIT and set
 * cfg->struct_size = size. Nothing past `size` bytes is written; bytes past this library's
 * sizeof(kjit_launch_config) are set to zero. Normally called through the
 * kjit_launch_config_init() macro, which passes the caller's sizeof. Ownership: the
 * caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `cfg` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_launch_config_init_sized(kjit_launch_config* cfg, size_t size);

/** Fill `cfg` with KJIT_LAUNCH_CONFIG_INIT. The exported function of 0.1.0 writes the
 *  0.1.0 struct and ignores NULL; the macro calls kjit_launch_config_init_sized() with the
 *  caller's sizeof. Thread-safe. */
KJIT_EXPORT void kjit_launch_config_init(kjit_launch_config* cfg);
#define kjit_launch_config_init(cfg) kjit_launch_config_init_sized((cfg), sizeof(*(cfg)))

/**
 * Launch with cuLaunchKernel-style arguments: args[i] points at the value of parameter i.
 * `count` must equal the kernel's parameter count, else KJIT_ERROR_ARGUMENT_MISMATCH
 * naming expected and given counts. The size of each value is NOT checked (the driver
 * copies as many bytes as the kernel's parameter has, whatever args[i] points at): a
 * struct laid out differently on the host and in the kernel launches anyway and fails or
 * computes garbage on the GPU. Pass the sizes with kjit_kernel_launch_sized(), or launch a
 * kernel that takes one struct with kjit_kernel_launch_params().
 * More dynamic shared memory than the default 48 KiB (cfg->shared_bytes) raises the
 * function's limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) first, once per
 * function and context; a request beyond what the device allows is KJIT_ERROR_CUDA naming
 * the device's limit and the kernel's static shared memory. Every launch form does this. The launch is asynchronous on cfg->stream.
 * Errors carry the driver's error name and string (KJIT_ERROR_CUDA); a sticky error
 * (e.g. an illegal address from an earlier kernel) is KJIT_ERROR_CUDA_STICKY. A stream of
 * another context (another device's, say) is refused by the driver: KJIT_ERROR_CUDA with
 * the stream's and the kernel's contexts named. `cfg` is checked before the handle and
 * before the driver is used: NULL, or a struct_size smaller than the 0.1.0 struct or larger
 * than 4096, is KJIT_ERROR_INVALID_ARGUMENT; a larger struct (from a newer kjit) that sets
 * fields this library does not know is KJIT_ERROR_UNSUPPORTED.
 * Thread-safety: any number of threads may launch the same handle at once.
 * Hot path: no allocation and no lock on a launch of a loaded kernel.
 */
KJIT_EXPORT kjit_status kjit_kernel_launch(kjit_kernel* kernel, const kjit_launch_config* cfg,
                                           void** args, size_t count);

/** As kjit_kernel_launch(), with sizes[i] = size in bytes of *args[i]; each is checked
 *  against the kernel's parameter size (KJIT_ERROR_ARGUMENT_MISMATCH names the index,
 *  expected and given sizes). */
KJIT_EXPORT kjit_status kjit_kernel_launch_sized(kjit_kernel* kernel,
                                                 const kjit_launch_config* cfg, void** args,
                                                 const size_t* sizes, size_t count);

/** Launch with one packed parameter buffer laid out by the kernel's parameter offsets
 *  (kjit_kernel_param_info); `size` must equal kjit_kernel_param_buffer_size(). The
 *  buffer is copied by the driver before this returns. For FFI callers (Go, Julia, Rust)
 *  that cannot easily build arrays of pointers. */
KJIT_EXPORT kjit_status kjit_kernel_launch_packed(kjit_kernel* kernel,
                                                  const kjit_launch_config* cfg,
                                                  const void* buffer, size_t size);

/**
 * Launch a kernel whose one parameter is a struct passed by value (a CUTLASS kernel's
 * `__grid_constant__ const Params`, say): `params` points at the host's struct, `size` is
 * its sizeof and `align` its alignof (0: not checked).
 * Checks, before the driver sees the launch: the kernel takes exactly one parameter
 * (cuFuncGetParamInfo); `size` equals that parameter's size in the driver's parameter
 * layout; and, where the compiled result has PTX (the default outputs), `align` equals the
 * alignment the PTX declares for it (".param .align N"). A mismatch is
 * KJIT_ERROR_ARGUMENT_MISMATCH with both sizes or alignments: the host compiler and NVRTC
 * laid the struct out differently (docs/cutlass.md: CUtensorMap on CUDA 13), which a plain
 * kjit_kernel_launch() would not notice. An `align` that is not 0 or a power of two
 * dividing `size`, NULL `params` or `size` 0 is KJIT_ERROR_INVALID_ARGUMENT. The struct is
 * copied by the driver before this returns. Configuration, shared memory, errors and
 * thread-safety as kjit_kernel_launch().
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_kernel_launch_params(kjit_kernel* kernel,
                                                  const kjit_launch_config* cfg,
                                                  const void* params, size_t size, size_t align);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_KERNEL_H */
