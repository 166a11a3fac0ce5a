// The CUDA Driver API, opened with dlopen on first need and resolved through
// cuGetProcAddress. Nothing in kjit links libcuda; <cuda.h> is used for types only.
//
// The driver library is libcuda.so.1, or the file named by $KJIT_CUDA_DRIVER.
#pragma once

#include <cuda.h>

#include <string>

namespace kjit::cuda {

// Every entry point kjit uses, with the CUDA version whose signature <cuda.h> declares
// (cuGetProcAddress hands out the matching ABI version of each symbol).
//
// The member names go through <cuda.h>'s versioning macros like calls do, so
// `d.cuMemAlloc(...)` names the member declared for cuMemAlloc_v2. `#name` is not
// expanded, so the symbol asked for is the base name, as cuGetProcAddress wants.
#define KJIT_CUDA_REQUIRED(X)                          \
  X(cuGetErrorName, 6000)                              \
  X(cuGetErrorString, 6000)                            \
  X(cuDriverGetVersion, 2020)                          \
  X(cuDeviceGet, 2000)                                 \
  X(cuDeviceGetCount, 2000)                            \
  X(cuDeviceGetName, 2000)                             \
  X(cuDeviceGetAttribute, 2000)                        \
  X(cuDevicePrimaryCtxRetain, 7000)                    \
  X(cuDevicePrimaryCtxRelease, 11000)                  \
  X(cuDevicePrimaryCtxReset, 11000)                    \
  X(cuDevicePrimaryCtxGetState, 7000)                  \
  X(cuCtxGetCurrent, 4000)                             \
  X(cuCtxSetCurrent, 4000)                             \
  X(cuCtxPushCurrent, 4000)                            \
  X(cuCtxPopCurrent, 4000)                             \
  X(cuCtxGetDevice, 2000)                              \
  X(cuCtxGetId, 12000)                                 \
  X(cuCtxSynchronize, 2000)                            \
  X(cuModuleLoadData, 2000)                            \
  X(cuModuleLoadDataEx, 2010)                          \
  X(cuModuleUnload, 2000)                              \
  X(cuModuleGetFunction, 2000)                         \
  X(cuFuncGetAttribute, 2020)                          \
  X(cuFuncSetAttribute, 9000)                          \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
  X(cuOccupancyMaxPotentialBlockSize, 6050)            \
  X(cuLaunchKernel, 4000)                              \
  X(cuLaunchKernelEx, 11060)                           \
  X(cuMemAlloc, 3020)                                  \
  X(cuMemFree, 3020)                                   \
  X(cuMemsetD8, 3020)                                  \
  X(cuMemcpyHtoD, 3020)                                \
  X(cuMemcpyDtoH, 3020)                                \
  X(cuMemcpyHtoDAsync, 3020)                           \
  X(cuMemcpyDtoHAsync, 3020)                           \
  X(cuStreamCreate, 2000)                              \
  X(cuStreamDestroy, 4000)                             \
  X(cuStreamSynchronize, 2000)                         \
  X(cuStreamGetCtx, 9020)                              \
  X(cuEventCreate, 2000)                               \
  X(cuEventDestroy, 4000)                              \
  X(cuEventRecord, 2000)                               \
  X(cuEventSynchronize, 2000)                          \
  X(cuEventElapsedTime, 2000)

// Entry points a usable driver may lack (older than the version given); null when absent.
#define KJIT_CUDA_OPTIONAL(X)                                        \
  X(cuFuncGetParamInfo, 12040) X(cuStreamGetId, 12000) X(cuTensorMapEncodeTiled, 12000) \
      X(cuOccupancyMaxActiveClusters, 12000)

struct Driver {
#define KJIT_CUDA_DECLARE(name, version) decltype(&::name) name = nullptr;
  KJIT_CUDA_REQUIRED(KJIT_CUDA_DECLARE)
  KJIT_CUDA_OPTIONAL(KJIT_CUDA_DECLARE)
#undef KJIT_CUDA_DECLARE
  int version = 0;      // cuDriverGetVersion, e.g. 13000
  std::string library;  // the file that was opened
};

// The driver, loaded and initialised (cuInit) once per process, thread-safe. Throws
// kjit::Error(KJIT_ERROR_CUDA_UNAVAILABLE, reason) (the reason only: "libcuda.so.1 (the
// CUDA driver) cannot be used: ...", util/dl.h, the status says the rest) when the
// library cannot be opened, is too old (no cuGetProcAddress_v2), lacks an entry point,
// or cuInit fails (no device, stub library, ...). The same error is thrown on every call.
const Driver& driver();

// True when driver() would succeed. Never throws.
bool driver_available() noexcept;

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string error_text(CUresult r);

// True for errors that leave the context unusable (illegal address, launch failure...).
bool is_sticky(CUresult r) noexcept;

// Throws kjit::Error for a failed call: KJIT_ERROR_CUDA_STICKY for sticky errors,
// KJIT_ERROR_CUDA otherwise. The message is "<what> failed: <error_text>".
[[noreturn]] void throw_error(CUresult r, const std::string& what);

inline void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw_error(r, what);
}

}  // namespace kjit::cuda
