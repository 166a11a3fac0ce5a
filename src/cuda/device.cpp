#include "cuda/device.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "util/error.h"

namespace kjit::cuda {
namespace {

struct PrimarySlot {
  std::mutex mu;
  CUcontext ctx = nullptr;
  bool retained = false;
};

struct DeviceTables {
  std::mutex mu;  // guards the maps, not the slots
  std::map<int, std::string> arch;
  std::map<int, std::unique_ptr<PrimarySlot>> primary;
};

DeviceTables& tables() {
  static DeviceTables* t = new DeviceTables;  // never destroyed (used at exit)
  return *t;
}

// True when `ctx` is the active primary context of `dev`. Retaining an active primary
// context and releasing it again changes nothing; an inactive one is never created here.
bool is_active_primary(CUdevice dev, CUcontext ctx) {
  const Driver& d = driver();
  unsigned flags = 0;
  int active = 0;
  if (d.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) return false;
  CUcontext primary = nullptr;
  if (d.cuDevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS) return false;
  d.cuDevicePrimaryCtxRelease(dev);
  return primary == ctx;
}

PrimarySlot& primary_slot(int device) {
  DeviceTables& t = tables();
  std::lock_guard<std::mutex> lock(t.mu);
  std::unique_ptr<PrimarySlot>& slot = t.primary[device];
  if (!slot) slot = std::make_unique<PrimarySlot>();
  return *slot;
}

}  // namespace

int device_count() {
  const Driver& d = driver();
  int n = 0;
  check(d.cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

CUdevice device_handle(int device) {
  if (device < 0) {
    fail(KJIT_ERROR_INVALID_ARGUMENT, "device ordinal " + std::to_string(device) +
                                          " is negative");
  }
  const Driver& d = driver();
  const int n = device_count();
  if (device >= n) {
    fail(KJIT_ERROR_CUDA_UNAVAILABLE,
         "CUDA device " + std::to_string(device) + " does not exist (this machine has " +
             std::to_string(n) + (n == 1 ? " device)" : " devices)"));
  }
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  return dev;
}

int device_attribute(int device, CUdevice_attribute attribute) {
  const CUdevice dev = device_handle(device);
  int value = 0;
  check(driver().cuDeviceGetAttribute(&value, attribute, dev), "cuDeviceGetAttribute");
  return value;
}

int compute_capability(int device) {
  const int major = device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  return major * 10 + minor;
}

std::string device_arch(int device) {
  DeviceTables& t = tables();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.arch.find(device);
    if (it != t.arch.end()) return it->second;
  }
  const std::string arch = "sm_" + std::to_string(compute_capability(device));
  std::lock_guard<std::mutex> lock(t.mu);
  t.arch[device] = arch;
  return arch;
}

std::string device_name(int device) {
  const CUdevice dev = device_handle(device);
  char name[256] = {};
  check(driver().cuDeviceGetName(name, static_cast<int>(sizeof name - 1), dev),
        "cuDeviceGetName");
  return name;
}

int driver_version() { return driver().version; }

CUcontext primary_context(int device) {
  const Driver& d = driver();
  const CUdevice dev = device_handle(device);
  PrimarySlot& slot = primary_slot(device);
  std::lock_guard<std::mutex> lock(slot.mu);
  if (!slot.retained) {
    check(d.cuDevicePrimaryCtxRetain(&slot.ctx, dev), "cuDevicePrimaryCtxRetain");
    slot.retained = true;
    return slot.ctx;
  }
  unsigned flags = 0;
  int active = 0;
  check(d.cuDevicePrimaryCtxGetState(dev, &flags, &active), "cuDevicePrimaryCtxGetState");
  if (!active) {
    // Reset since we retained it: a retain re-creates it; the matching release keeps our
    // single reference (a reset does not release references).
    CUcontext ctx = nullptr;
    check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    d.cuDevicePrimaryCtxRelease(dev);
    slot.ctx = ctx;
  }
  return slot.ctx;
}

ContextChoice choose_context(int device) {
  const Driver& d = driver();
  const CUdevice dev = device_handle(device);
  ContextChoice c;
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current) {
    CUdevice current_dev = -1;
    unsigned long long id = 0;
    if (d.cuCtxGetDevice(&current_dev) == CUDA_SUCCESS && current_dev == dev &&
        context_id(current, &id)) {
      c.ctx = current;
      c.id = id;
      c.primary = is_active_primary(dev, current);
      return c;
    }
  }
  return primary_choice(device);
}

ContextChoice primary_choice(int device) {
  ContextChoice c;
  c.ctx = primary_context(device);
  c.primary = true;
  if (!context_id(c.ctx, &c.id)) {
    fail(KJIT_ERROR_CUDA, "the primary context of device " + std::to_string(device) +
                              " has no id after retain");
  }
  return c;
}

std::string describe_context(CUcontext ctx) noexcept {
  try {
    unsigned long long id = 0;
    if (!ctx || !context_id(ctx, &id)) return "a context that no longer exists";
    const Driver& d = driver();
    if (d.cuCtxPushCurrent(ctx) != CUDA_SUCCESS) return "context " + std::to_string(id);
    CUdevice dev = -1;
    const CUresult r = d.cuCtxGetDevice(&dev);
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    if (r != CUDA_SUCCESS) return "context " + std::to_string(id);
    int ordinal = -1;
    const int n = device_count();
    for (int i = 0; i < n && ordinal < 0; ++i) {
      CUdevice h = -1;
      if (d.cuDeviceGet(&h, i) == CUDA_SUCCESS && h == dev) ordinal = i;
    }
    const std::string which = "device " + std::to_string(ordinal);
    return is_active_primary(dev, ctx) ? "the primary context of " + which
                                       : "a context of " + which + " (not its primary context)";
  } catch (...) {
    return "an unknown context";
  }
}

bool context_id(CUcontext ctx, unsigned long long* id) noexcept {
  if (!ctx) return false;
  try {
    return driver().cuCtxGetId(ctx, id) == CUDA_SUCCESS;
  } catch (...) {
    return false;
  }
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const Driver& d = driver();
  CUcontext current = nullptr;
  check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != ctx) {
    check(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    driver().cuCtxPopCurrent(&popped);
  }
}

}  // namespace kjit::cuda
