// C shims: GEMM through cuBLASLt (gemm.h).
#include <cstddef>
#include <memory>

#include "api/handles.h"
#include "blas/gemm.h"
#include "blas/lt.h"
#include "blas/plan.h"

using namespace kjit;
using namespace kjit::api;

extern "C" {

KJIT_EXPORT void kjit_gemm_desc_init(kjit_gemm_desc* desc) {
  if (desc) *desc = kjit_gemm_desc KJIT_GEMM_DESC_INIT;
}

KJIT_EXPORT void kjit_gemm_options_init(kjit_gemm_options* opts) {
  if (opts) *opts = kjit_gemm_options KJIT_GEMM_OPTIONS_INIT;
}

KJIT_EXPORT kjit_status kjit_gemm_create(kjit_cache* cache, int device,
                                         const kjit_gemm_options* options, kjit_gemm** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_gemm_create: out is NULL");
    if (cache && !ok(cache))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_create: cache is not a live kjit_cache");
    const blas::GemmOptions opts = blas::options_from(options);
    auto h = std::make_unique<kjit_gemm>();
    h->gemm = std::make_unique<blas::Gemm>(cache ? cache->cache.get() : nullptr, device, opts);
    *out = h.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_gemm_destroy(kjit_gemm* gemm) {
  if (ok(gemm)) delete gemm;
}

KJIT_EXPORT kjit_status kjit_gemm_check(const kjit_gemm_desc* desc, const void* A, const void* B,
                                        const void* C, const void* D, const void* bias) {
  return guard([&] {
    blas::prepare(desc, A, B, C, D, bias);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_gemm_run(kjit_gemm* gemm, const kjit_gemm_desc* desc, const void* A,
                                      const void* B, const void* C, void* D, const void* bias,
                                      void* stream) {
  return guard([&] {
    if (!ok(gemm)) return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_run: invalid gemm handle");
    gemm->gemm->run(blas::prepare(desc, A, B, C, D, bias), stream);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_gemm_clear_plans(kjit_gemm* gemm) {
  return guard([&] {
    if (!ok(gemm))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_clear_plans: invalid gemm handle");
    gemm->gemm->clear_plans();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_gemm_stats_get(const kjit_gemm* gemm, kjit_gemm_stats* stats) {
  return guard([&] {
    if (!ok(gemm))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_stats_get: invalid gemm handle");
    if (!stats) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_gemm_stats_get: stats is NULL");
    if (stats->struct_size < offsetof(kjit_gemm_stats, runs) + sizeof(stats->runs))
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_gemm_stats_get: stats->struct_size is too small; set it to "
                   "sizeof(kjit_gemm_stats)");
    gemm->gemm->stats(stats);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cublaslt_version(size_t* out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cublaslt_version: out is NULL");
    *out = blas::lt().version;
    return KJIT_OK;
  });
}

}  // extern "C"
