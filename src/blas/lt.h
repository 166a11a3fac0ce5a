// cuBLASLt, opened with dlopen on first need. Nothing in kjit links libcublasLt: a process
// that never runs a GEMM never loads it, and libkjit loads on machines without it.
//
// The library is libcublasLt.so.13, or the file named by $KJIT_CUBLASLT_LIBRARY.
#pragma once

#include <cublasLt.h>

#include <string>

namespace kjit::blas {

#define KJIT_LT_FUNCTIONS(X)              \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetVersion)                   \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulAlgoCheck)              \
  X(cublasLtMatmulAlgoConfigGetAttribute) \
  X(cublasLtMatmulAlgoConfigSetAttribute) \
  X(cublasLtMatmul)

struct Lt {
#define KJIT_LT_DECLARE(name) decltype(&::name) name = nullptr;
  KJIT_LT_FUNCTIONS(KJIT_LT_DECLARE)
#undef KJIT_LT_DECLARE
  size_t version = 0;   // cublasLtGetVersion(), e.g. 130100
  std::string library;  // the file that was opened
};

// cuBLASLt, loaded once per process, thread-safe. Throws kjit::Error(KJIT_ERROR_CUBLAS,
// "libcublasLt.so.13 (cuBLASLt) cannot be used: ...", util/dl.h) when the library cannot be opened
// or lacks an entry point; the same error is thrown on every call.
const Lt& lt();

// True once lt() has loaded the library in this process. Never loads it.
bool lt_loaded() noexcept;

// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
std::string lt_status_text(cublasStatus_t s);

// Throws kjit::Error(KJIT_ERROR_CUBLAS, "<what> failed: <status text>").
[[noreturn]] void lt_throw(cublasStatus_t s, const std::string& what);

inline void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) lt_throw(s, what);
}

}  // namespace kjit::blas
