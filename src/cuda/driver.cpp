#include "cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "util/dl.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit::cuda {
namespace {

struct State {
  Driver driver;
  std::string error;  // non-empty when unavailable
};

// The messages say why the driver is unavailable, not that it is: the status
// (KJIT_ERROR_CUDA_UNAVAILABLE, "CUDA driver not available") says that, and callers print
// "<status>: <message>", so each says its part once.

std::string result_name(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out;
  if (d.cuGetErrorName && d.cuGetErrorName(r, &name) == CUDA_SUCCESS && name) {
    out = name;
  } else {
    out = "CUresult " + std::to_string(static_cast<int>(r));
  }
  if (d.cuGetErrorString && d.cuGetErrorString(r, &text) == CUDA_SUCCESS && text) {
    out += " (";
    out += text;
    out += ")";
  }
  return out;
}

const LibraryKind kDriver = {"the CUDA driver",
                             "set KJIT_CUDA_DRIVER to use another driver library"};

void load(State& s) {
  const char* env = std::getenv("KJIT_CUDA_DRIVER");
  const std::string path = env && *env ? env : "libcuda.so.1";
  s.driver.library = path;
  // The library stays open for the life of the process: function pointers and driver
  // state are used until exit.
  OpenedLibrary lib(kDriver, path);
  using GetProc = decltype(&::cuGetProcAddress);  // cuGetProcAddress_v2 (CUDA 12+)
  GetProc get_proc = nullptr;
  lib.resolve(get_proc, "cuGetProcAddress_v2");
  if (!lib.check_symbols("a CUDA 12.0 or newer driver is required")) {
    s.error = lib.error();
    return;
  }
  {
    // The toolkit's link stub (lib64/stubs/libcuda.so) answers every call with
    // CUDA_ERROR_STUB_LIBRARY: say that rather than list every entry point as missing.
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get_proc("cuInit", &fn, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) ==
        CUDA_ERROR_STUB_LIBRARY) {
      lib.refuse("it is the CUDA toolkit's link stub, not a driver (CUDA_ERROR_STUB_LIBRARY)");
      s.error = lib.error();
      return;
    }
  }
  Driver& d = s.driver;
  std::string missing;
  auto resolve = [&](const char* name, int version, void** slot, bool required) {
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void* fn = nullptr;
    CUresult r = get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
    if ((r != CUDA_SUCCESS || !fn) && version < 12000) {
      // A driver that no longer answers for so old a version: ask for the CUDA 12.0 ABI,
      // which has the same signature for every entry point listed with an older version.
      r = get_proc(name, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
    }
    if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && fn) {
      *slot = fn;
    } else if (required) {
      missing += missing.empty() ? name : std::string(", ") + name;
    }
  };
#define KJIT_CUDA_RESOLVE_REQUIRED(name, version) \
  resolve(#name, version, reinterpret_cast<void**>(&d.name), true);
#define KJIT_CUDA_RESOLVE_OPTIONAL(name, version) \
  resolve(#name, version, reinterpret_cast<void**>(&d.name), false);
  KJIT_CUDA_REQUIRED(KJIT_CUDA_RESOLVE_REQUIRED)
  KJIT_CUDA_OPTIONAL(KJIT_CUDA_RESOLVE_OPTIONAL)
#undef KJIT_CUDA_RESOLVE_REQUIRED
#undef KJIT_CUDA_RESOLVE_OPTIONAL

  // cuInit is resolved the same way but not kept: it is called once, here.
  void* init_fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get_proc("cuInit", &init_fn, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) !=
          CUDA_SUCCESS ||
      !init_fn) {
    missing += missing.empty() ? "cuInit" : ", cuInit";
  }
  if (!missing.empty()) lib.refuse("it lacks " + missing + " (driver too old?)");
  const CUresult r =
      lib.ok() ? reinterpret_cast<decltype(&::cuInit)>(init_fn)(0) : CUDA_ERROR_NOT_INITIALIZED;
  if (lib.ok() && r != CUDA_SUCCESS) lib.refuse("cuInit failed: " + result_name(d, r));
  if (!lib.ok()) {
    s.error = lib.error();
    return;
  }
  if (d.cuDriverGetVersion(&d.version) != CUDA_SUCCESS) d.version = 0;
  log_debug("CUDA driver " + std::to_string(d.version) + " loaded from " + path);
}

State& state() {
  // Never destroyed: kernels released during static destruction may still need it.
  static State* s = new State;
  static std::once_flag once;
  std::call_once(once, [] {
    load(*s);
    // Said once per process; compile-only use carries on without the driver.
    if (!s->error.empty()) {
      log_info("CUDA driver not available: " + s->error + " (compiling and caching still work)");
    }
  });
  return *s;
}

}  // namespace

const Driver& driver() {
  State& s = state();
  if (!s.error.empty()) fail(KJIT_ERROR_CUDA_UNAVAILABLE, s.error);
  return s.driver;
}

bool driver_available() noexcept {
  try {
    return state().error.empty();
  } catch (...) {
    return false;
  }
}

std::string error_text(CUresult r) {
  return result_name(state().driver, r);
}

bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
      return true;
    default:
      return false;
  }
}

void throw_error(CUresult r, const std::string& what) {
  if (is_sticky(r)) {
    fail(KJIT_ERROR_CUDA_STICKY,
         what + " failed: " + error_text(r) +
             "; this is a sticky error: the CUDA context is unusable until the "
             "process exits or its primary context is reset");
  }
  fail(KJIT_ERROR_CUDA, what + " failed: " + error_text(r));
}

}  // namespace kjit::cuda
