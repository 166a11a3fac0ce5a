// C shims: GEMM through cuBLASLt (gemm.h).
#include <cstddef>
#include <memory>

#include "api/handles.h"
#include "api/versioned.h"
#include "blas/gemm.h"
#include "blas/lt.h"
#include "blas/plan.h"

using namespace kjit;
using namespace kjit::api;

namespace {

kjit_gemm_stats to_public(const blas::GemmStats& g) {
  kjit_gemm_stats s = blank<kjit_gemm_stats>();
  s.runs = g.runs;
  s.memory_hits = g.memory_hits;
  s.disk_hits = g.disk_hits;
  s.misses = g.misses;
  s.heuristic_queries = g.heuristic_queries;
  s.autotunes = g.autotunes;
  s.disk_rejected = g.disk_rejected;
  s.disk_writes = g.disk_writes;
  s.evictions = g.evictions;
  s.plans = g.plans;
  s.workspace_bytes = g.workspace_bytes;
  return s;
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_gemm_desc_init_sized(kjit_gemm_desc* desc, size_t size) {
  return guard([&] { return init_sized(desc, size, "kjit_gemm_desc_init_sized"); });
}

// The 0.1.0 entry points (the header's macros of the same names call the sized ones).
KJIT_EXPORT void(kjit_gemm_desc_init)(kjit_gemm_desc* desc) { init_v0_1(desc); }

KJIT_EXPORT kjit_status kjit_gemm_options_init_sized(kjit_gemm_options* opts, size_t size) {
  return guard([&] { return init_sized(opts, size, "kjit_gemm_options_init_sized"); });
}

KJIT_EXPORT void(kjit_gemm_options_init)(kjit_gemm_options* opts) { init_v0_1(opts); }

KJIT_EXPORT kjit_status kjit_gemm_stats_init_sized(kjit_gemm_stats* stats, size_t size) {
  return guard([&] { return init_sized(stats, size, "kjit_gemm_stats_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_gemm_create(kjit_cache* cache, int device,
                                         const kjit_gemm_options* options, kjit_gemm** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_gemm_create: out is NULL");
    kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
    if (options) {
      if (kjit_status s = read_in(options, &o, "kjit_gemm_create: options")) return s;
    }
    if (cache && !ok(cache))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_create: cache is not a live kjit_cache");
    const blas::GemmOptions opts = blas::options_from(&o);
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
    kjit_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_gemm_check: desc")) return s;
    blas::prepare(&d, A, B, C, D, bias);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_gemm_run(kjit_gemm* gemm, const kjit_gemm_desc* desc, const void* A,
                                      const void* B, const void* C, void* D, const void* bias,
                                      void* stream) {
  return guard([&] {
    kjit_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_gemm_run: desc")) return s;
    if (!ok(gemm)) return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_run: invalid gemm handle");
    gemm->gemm->run(blas::prepare(&d, A, B, C, D, bias), stream);
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
    size_t size = 0;
    if (kjit_status s = check_out(stats, &size, "kjit_gemm_stats_get: stats")) return s;
    if (!ok(gemm))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_stats_get: invalid gemm handle");
    write_out(stats, size, to_public(gemm->gemm->stats()));
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
