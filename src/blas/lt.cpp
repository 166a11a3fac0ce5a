#include "blas/lt.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "util/error.h"
#include "util/log.h"

namespace kjit::blas {
namespace {

struct Loaded {
  Lt lt;
  std::string error;  // non-empty when loading failed
};

std::atomic<bool> g_loaded{false};

Loaded load() {
  Loaded out;
  const char* env = std::getenv("KJIT_CUBLASLT_LIBRARY");
  const std::string name = (env && *env) ? env : "libcublasLt.so.13";
  // RTLD_LOCAL: cuBLASLt's symbols must not leak into the global namespace of the host.
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    out.error = "cuBLASLt not available: dlopen(" + name + ") failed: " + (e ? e : "unknown");
    return out;
  }
  // The handle is kept for the life of the process: plans and handles hold its code.
#define KJIT_LT_RESOLVE(fn)                                                          \
  out.lt.fn = reinterpret_cast<decltype(out.lt.fn)>(dlsym(h, #fn));                  \
  if (!out.lt.fn) {                                                                  \
    out.error = "cuBLASLt not available: " + name + " has no symbol " #fn;           \
    return out;                                                                      \
  }
  KJIT_LT_FUNCTIONS(KJIT_LT_RESOLVE)
#undef KJIT_LT_RESOLVE
  out.lt.version = out.lt.cublasLtGetVersion();
  out.lt.library = name;
  if (out.lt.version < 130000) {
    out.error = "cuBLASLt not available: " + name + " is version " +
                std::to_string(out.lt.version) + ", kjit needs 13.0 or newer";
    return out;
  }
  log_debug("loaded " + name + " (cuBLASLt " + std::to_string(out.lt.version) + ")");
  return out;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r = load();
    if (r.error.empty()) g_loaded.store(true, std::memory_order_release);
    return r;
  }();
  return l;
}

}  // namespace

const Lt& lt() {
  const Loaded& l = loaded();
  if (!l.error.empty()) fail(KJIT_ERROR_CUBLAS, l.error);
  return l.lt;
}

bool lt_loaded() noexcept { return g_loaded.load(std::memory_order_acquire); }

std::string lt_status_text(cublasStatus_t s) {
  std::string name = "CUBLAS_STATUS_" + std::to_string(int(s));
  if (lt_loaded()) {
    const Lt& l = loaded().lt;
    const char* n = l.cublasLtGetStatusName(s);
    const char* t = l.cublasLtGetStatusString(s);
    if (n) name = n;
    if (t && *t) name += std::string(" (") + t + ")";
  }
  return name;
}

void lt_throw(cublasStatus_t s, const std::string& what) {
  fail(KJIT_ERROR_CUBLAS, what + " failed: " + lt_status_text(s));
}

}  // namespace kjit::blas
