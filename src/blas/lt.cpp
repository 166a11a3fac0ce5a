#include "blas/lt.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "util/dl.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit::blas {
namespace {

struct Loaded {
  Lt lt;
  std::string error;  // non-empty when loading failed
};

std::atomic<bool> g_loaded{false};

const LibraryKind kCublasLt = {"cuBLASLt",
                               "set KJIT_CUBLASLT_LIBRARY to its path, or LD_LIBRARY_PATH"};

Loaded load() {
  Loaded out;
  const char* env = std::getenv("KJIT_CUBLASLT_LIBRARY");
  // Kept open for the life of the process: plans and handles hold its code.
  OpenedLibrary lib(kCublasLt, (env && *env) ? env : "libcublasLt.so.13");
#define KJIT_LT_RESOLVE(fn) lib.resolve(out.lt.fn, #fn);
  KJIT_LT_FUNCTIONS(KJIT_LT_RESOLVE)
#undef KJIT_LT_RESOLVE
  if (lib.check_symbols()) {
    out.lt.version = out.lt.cublasLtGetVersion();
    out.lt.library = lib.file();
    if (out.lt.version < 130000) {
      lib.refuse("it is version " + std::to_string(out.lt.version) + ", kjit needs 13.0 or newer");
    }
  }
  out.error = lib.error();
  if (out.error.empty()) {
    log_debug("loaded " + lib.file() + " (cuBLASLt " + std::to_string(out.lt.version) + ")");
  }
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

bool lt_loaded() noexcept {
  return g_loaded.load(std::memory_order_acquire);
}

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
