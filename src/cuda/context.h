// Devices and contexts: ordinals, primary contexts, context identity, scoped current.
#pragma once

#include <cuda.h>

#include <string>

namespace kjit::cuda {

// Number of devices (0 when the driver reports none). Throws KJIT_ERROR_CUDA_UNAVAILABLE.
int device_count();

// Device handle of ordinal `device`. Throws KJIT_ERROR_INVALID_ARGUMENT for a negative
// ordinal, KJIT_ERROR_CUDA_UNAVAILABLE when there is no such device.
CUdevice device_handle(int device);

// cuDeviceGetAttribute, throwing KJIT_ERROR_CUDA on failure.
int device_attribute(int device, CUdevice_attribute attribute);

// Compute capability as major * 10 + minor, e.g. 90.
int compute_capability(int device);

std::string device_name(int device);
int driver_version();

// The device's primary context. kjit retains it once per device on first use and keeps it
// for the life of the process (as the CUDA runtime does), so loaded code is not torn down
// behind the caller's back. If it was reset since (cuDevicePrimaryCtxReset), this makes it
// active again; the handle may be the same pointer with a new context id.
CUcontext primary_context(int device);

// Context the kernel layer loads into, by the rule in kernel.h: the calling thread's
// current context if it has one that belongs to `device`, else the primary context.
struct ContextChoice {
  CUcontext ctx = nullptr;
  unsigned long long id = 0;
  bool primary = false;  // ctx is the device's primary context
};
ContextChoice choose_context(int device);

// The device's primary context (retained, made active again after a reset), whatever
// context is current on the calling thread.
ContextChoice primary_choice(int device);

// "the primary context of device 1", "a context of device 0 (not its primary context)",
// or "a context that no longer exists". For error messages; never throws.
std::string describe_context(CUcontext ctx) noexcept;

// Id of a live context (unique for the life of the process). False when the context was
// destroyed or reset, or the driver is shutting down. Never throws.
bool context_id(CUcontext ctx, unsigned long long* id) noexcept;

// Makes `ctx` current for a scope when it is not already, restoring the previous one.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace kjit::cuda
