// C shims: grouped GEMM with kjit's own kernels (grouped_gemm.h).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "api/handles.h"
#include "api/versioned.h"
#include "compile/async.h"
#include "grouped/grouped.h"

using namespace kjit;
using namespace kjit::api;

extern "C" {

KJIT_EXPORT kjit_status kjit_grouped_gemm_desc_init_sized(kjit_grouped_gemm_desc* desc,
                                                          size_t size) {
  return guard([&] { return init_sized(desc, size, "kjit_grouped_gemm_desc_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_options_init_sized(kjit_grouped_gemm_options* opts,
                                                             size_t size) {
  return guard([&] { return init_sized(opts, size, "kjit_grouped_gemm_options_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_create(kjit_compiler* compiler, int device,
                                                 const kjit_grouped_gemm_options* options,
                                                 kjit_grouped_gemm** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_create: out is NULL");
    kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    if (options) {
      if (kjit_status s = read_in(options, &o, "kjit_grouped_gemm_create: options")) return s;
    }
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_create: compiler is not a live kjit_compiler");
    if (device < 0)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_create: device is " +
                                                    std::to_string(device) + ", must be >= 0");
    const grouped::Options opts = grouped::options_from(&o);
    auto h = std::make_unique<kjit_grouped_gemm>();
    h->gg = std::make_unique<grouped::GroupedGemm>(*compiler->compiler, device, opts);
    *out = h.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_grouped_gemm_destroy(kjit_grouped_gemm* gg) {
  if (ok(gg)) delete gg;
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_check(const kjit_grouped_gemm_desc* desc, const void* A,
                                                const void* B, const int32_t* offs, const void* C,
                                                const void* D, const void* bias) {
  return guard([&] {
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_check: desc")) return s;
    grouped::check(d, A, B, offs, C, D, bias);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_run(kjit_grouped_gemm* gg,
                                              const kjit_grouped_gemm_desc* desc, const void* A,
                                              const void* B, const int32_t* offs, const void* C,
                                              void* D, const void* bias, void* stream) {
  return guard([&] {
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_run: desc")) return s;
    if (!ok(gg))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_grouped_gemm_run: invalid grouped GEMM handle");
    grouped::Scales none;
    none.check = true;  // a desc asking for scales is refused: they come to run_scaled()
    gg->gg->run(grouped::check(d, A, B, offs, C, D, bias, true, none), stream);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_run_scaled(kjit_grouped_gemm* gg,
                                                     const kjit_grouped_gemm_desc* desc,
                                                     const void* A, const void* B,
                                                     const int32_t* offs, const void* C, void* D,
                                                     const void* bias, const float* scale_a,
                                                     const float* scale_b, void* stream) {
  return guard([&] {
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_run_scaled: desc")) return s;
    grouped::Scales scales;
    scales.check = true;
    scales.a = scale_a;
    scales.b = scale_b;
    const grouped::Problem p = grouped::check(d, A, B, offs, C, D, bias, true, scales);
    if (!ok(gg))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_run_scaled: invalid grouped GEMM handle");
    gg->gg->run(p, stream);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_prepare(kjit_grouped_gemm* gg,
                                                  const kjit_grouped_gemm_desc* desc,
                                                  int with_bias) {
  return guard([&] {
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_prepare: desc")) return s;
    if (!ok(gg))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_prepare: invalid grouped GEMM handle");
    static const char with = 0;
    gg->gg->prepare(grouped::check(d, nullptr, nullptr, nullptr, nullptr, nullptr,
                                   with_bias ? &with : nullptr, /*pointers=*/false));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_plan_key(kjit_grouped_gemm* gg,
                                                   const kjit_grouped_gemm_desc* desc,
                                                   const void* A, const void* B, const void* C,
                                                   const void* D, const void* bias, char* buf,
                                                   size_t size, size_t* needed) {
  return guard([&] {
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_plan_key: desc")) return s;
    if (!ok(gg))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_plan_key: invalid grouped GEMM handle");
    // The offsets are not part of the choice; a stand-in passes the NULL check.
    static const int32_t offs_stand_in = 0;
    const std::string key =
        gg->gg->config_for(grouped::check(d, A, B, &offs_stand_in, C, D, bias)).key();
    if (needed) *needed = key.size();
    if (buf && size > 0) {
      const size_t n = key.size() < size - 1 ? key.size() : size - 1;
      std::memcpy(buf, key.data(), n);
      buf[n] = '\0';
    }
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_offsets_status(kjit_grouped_gemm* gg) {
  return guard([&] {
    if (!ok(gg))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_offsets_status: invalid grouped GEMM handle");
    const std::string bad = gg->gg->offsets_status();
    if (!bad.empty()) return error(KJIT_ERROR_INVALID_ARGUMENT, "grouped GEMM: " + bad);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_grouped_gemm_compile(kjit_compiler* compiler, const char* target,
                                                  const kjit_grouped_gemm_desc* desc,
                                                  const kjit_grouped_gemm_options* options,
                                                  int with_bias, kjit_binary** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_compile: out is NULL");
    *out = nullptr;
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_grouped_gemm_compile: compiler is not a live kjit_compiler");
    if (!target)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_compile: target is NULL");
    kjit_grouped_gemm_desc d;
    if (kjit_status s = read_in(desc, &d, "kjit_grouped_gemm_compile: desc")) return s;
    kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    if (options) {
      if (kjit_status s = read_in(options, &o, "kjit_grouped_gemm_compile: options")) return s;
    }
    grouped::Options opts = grouped::options_from(&o);
    static const char with = 0;
    const grouped::Problem p = grouped::check(d, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              with_bias ? &with : nullptr, /*pointers=*/false);
    const Outcome made =
        grouped::compile(*compiler->compiler, grouped::config_for_target(p, target, opts));
    if (delivers_binary(made)) *out = make_binary(made);
    if (made.status != KJIT_OK) return error(made.status, made.message);
    return KJIT_OK;
  });
}

}  // extern "C"
