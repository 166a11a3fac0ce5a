// C shims: version, status strings, errors, logging.
#include <string>

#include "api/handles.h"
#include "key/toolchain.h"
#include "util/log.h"

using namespace kjit;
using namespace kjit::api;

extern "C" {

KJIT_EXPORT int kjit_version(void) {
  return KJIT_VERSION;
}

KJIT_EXPORT const char* kjit_version_string(void) {
#define KJIT_STR2(x) #x
#define KJIT_STR(x) KJIT_STR2(x)
  return KJIT_STR(KJIT_VERSION_MAJOR) "." KJIT_STR(KJIT_VERSION_MINOR) "." KJIT_STR(
      KJIT_VERSION_PATCH);
}

KJIT_EXPORT kjit_status kjit_nvrtc_version(const char** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_nvrtc_version: out is NULL");
    static const std::string id = toolchain_id(nullptr);
    *out = id.c_str();
    return KJIT_OK;
  });
}

KJIT_EXPORT const char* kjit_status_string(int status) {
  switch (status) {
    case KJIT_OK:
      return "KJIT_OK: success";
    case KJIT_ERROR_INVALID_ARGUMENT:
      return "KJIT_ERROR_INVALID_ARGUMENT: invalid argument";
    case KJIT_ERROR_INVALID_HANDLE:
      return "KJIT_ERROR_INVALID_HANDLE: invalid or destroyed handle";
    case KJIT_ERROR_OUT_OF_MEMORY:
      return "KJIT_ERROR_OUT_OF_MEMORY: out of host memory";
    case KJIT_ERROR_INVALID_SOURCE:
      return "KJIT_ERROR_INVALID_SOURCE: empty or non-UTF-8 source";
    case KJIT_ERROR_COMPILE:
      return "KJIT_ERROR_COMPILE: compilation failed";
    case KJIT_ERROR_INVALID_OPTION:
      return "KJIT_ERROR_INVALID_OPTION: invalid compile option";
    case KJIT_ERROR_UNSUPPORTED_TARGET:
      return "KJIT_ERROR_UNSUPPORTED_TARGET: unsupported target";
    case KJIT_ERROR_NAME_NOT_FOUND:
      return "KJIT_ERROR_NAME_NOT_FOUND: name not found";
    case KJIT_ERROR_NVRTC:
      return "KJIT_ERROR_NVRTC: NVRTC failure";
    case KJIT_ERROR_CACHE:
      return "KJIT_ERROR_CACHE: cache failure";
    case KJIT_ERROR_CACHE_CORRUPT:
      return "KJIT_ERROR_CACHE_CORRUPT: corrupt cache data";
    case KJIT_ERROR_NOT_FOUND:
      return "KJIT_ERROR_NOT_FOUND: not found";
    case KJIT_ERROR_READ_ONLY:
      return "KJIT_ERROR_READ_ONLY: cache is read-only";
    case KJIT_ERROR_CUDA_UNAVAILABLE:
      return "KJIT_ERROR_CUDA_UNAVAILABLE: CUDA driver not available";
    case KJIT_ERROR_CUDA:
      return "KJIT_ERROR_CUDA: CUDA driver error";
    case KJIT_ERROR_ARGUMENT_MISMATCH:
      return "KJIT_ERROR_ARGUMENT_MISMATCH: launch arguments do not match the kernel";
    case KJIT_ERROR_STALE_HANDLE:
      return "KJIT_ERROR_STALE_HANDLE: kernel's context is gone";
    case KJIT_ERROR_CUDA_STICKY:
      return "KJIT_ERROR_CUDA_STICKY: sticky CUDA error, context unusable";
    case KJIT_ERROR_UNSUPPORTED:
      return "KJIT_ERROR_UNSUPPORTED: unsupported request";
    case KJIT_ERROR_CANCELLED:
      return "KJIT_ERROR_CANCELLED: cancelled";
    case KJIT_ERROR_TIMEOUT:
      return "KJIT_ERROR_TIMEOUT: timed out";
    case KJIT_ERROR_BUFFER_TOO_SMALL:
      return "KJIT_ERROR_BUFFER_TOO_SMALL: buffer too small";
    case KJIT_ERROR_CUBLAS:
      return "KJIT_ERROR_CUBLAS: cuBLASLt error";
    case KJIT_ERROR_IO:
      return "KJIT_ERROR_IO: file system error";
    case KJIT_ERROR_LINK:
      return "KJIT_ERROR_LINK: link failed";
    case KJIT_ERROR_NVJITLINK:
      return "KJIT_ERROR_NVJITLINK: nvJitLink not available or failed";
    case KJIT_ERROR_INTERNAL:
      return "KJIT_ERROR_INTERNAL: internal error";
    default:
      return "unknown kjit status";
  }
}

KJIT_EXPORT const char* kjit_last_error(void) {
  return last_error();
}

KJIT_EXPORT void kjit_set_log_callback(kjit_log_fn fn, void* user) {
  set_log_callback(fn, user);
}

}  // extern "C"
